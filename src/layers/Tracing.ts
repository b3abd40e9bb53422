/**
 * Exports the kernel's spans (`kernel.start`, `kernel.execute`, `kernel.interrupt`,
 * `kernel.shutdown`) through OpenTelemetry. Optional: only embedders that import this
 * module need `@effect/opentelemetry` and the OpenTelemetry SDK installed.
 */
import * as OtelTracer from "@effect/opentelemetry/OtelTracer"
import * as Resource from "@effect/opentelemetry/Resource"
import { BasicTracerProvider, type SpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Duration, Effect, Layer } from "effect"

/** What the tracing layer needs: where spans go and how the service is named. */
export interface TracingOptions {
  readonly spanProcessor: SpanProcessor | ReadonlyArray<SpanProcessor>
  readonly serviceName?: string
  readonly serviceVersion?: string
}

/** How long closing the layer waits for the span processors to flush. */
const SHUTDOWN_TIMEOUT = Duration.seconds(3)

const tracerProvider = (spanProcessors: ReadonlyArray<SpanProcessor>): Layer.Layer<OtelTracer.OtelTracerProvider, never, Resource.Resource> =>
  Layer.effect(
    OtelTracer.OtelTracerProvider,
    Effect.gen(function*() {
      const resource = yield* Resource.Resource
      return yield* Effect.acquireRelease(
        Effect.sync(() => new BasicTracerProvider({ resource, spanProcessors: [...spanProcessors] })),
        (provider) =>
          Effect.promise(() => provider.forceFlush().finally(() => provider.shutdown())).pipe(
            Effect.ignore,
            Effect.interruptible,
            Effect.timeoutOption(SHUTDOWN_TIMEOUT)
          )
      )
    })
  )

/** A layer that sends every Effect span of the program to the given OpenTelemetry span processor(s). */
export const TracingLive = (options: TracingOptions): Layer.Layer<Resource.Resource> =>
  OtelTracer.layer.pipe(
    Layer.provide(tracerProvider(Array.isArray(options.spanProcessor) ? options.spanProcessor : [options.spanProcessor])),
    Layer.provideMerge(
      Resource.layerFromEnv(
        Resource.configToAttributes({
          serviceName: options.serviceName ?? "veyyon-eval",
          ...(options.serviceVersion === undefined ? {} : { serviceVersion: options.serviceVersion })
        })
      )
    )
  )
