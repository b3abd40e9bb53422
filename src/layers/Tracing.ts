/**
 * Exports the kernel's spans (`kernel.start`, `kernel.execute`, `kernel.interrupt`,
 * `kernel.shutdown`) through OpenTelemetry. Optional: only embedders that import this
 * module need `@effect/opentelemetry` and the OpenTelemetry SDK installed.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import type { SpanProcessor } from "@opentelemetry/sdk-trace-base"
import type * as Resource from "@effect/opentelemetry/Resource"
import type { Layer } from "effect"

/** What the tracing layer needs: where spans go and how the service is named. */
export interface TracingOptions {
  readonly spanProcessor: SpanProcessor | ReadonlyArray<SpanProcessor>
  readonly serviceName?: string
  readonly serviceVersion?: string
}

/** A layer that sends every Effect span of the program to the given OpenTelemetry span processor(s). */
export const TracingLive = (options: TracingOptions): Layer.Layer<Resource.Resource> =>
  NodeSdk.layer(() => ({
    spanProcessor: options.spanProcessor,
    resource: {
      serviceName: options.serviceName ?? "veyyon-eval",
      ...(options.serviceVersion === undefined ? {} : { serviceVersion: options.serviceVersion })
    }
  }))
