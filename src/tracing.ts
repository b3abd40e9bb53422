/**
 * veyyon-eval/tracing: the kernel's spans through OpenTelemetry. Only embedders that import
 * this entry need `@effect/opentelemetry` and the OpenTelemetry SDK installed.
 */

/** A layer that sends every Effect span of the program to the given OpenTelemetry span processor(s). */
export { TracingLive } from "./layers/Tracing.ts"
/** What the tracing layer needs: where spans go and how the service is named. */
export type { TracingOptions } from "./layers/Tracing.ts"
