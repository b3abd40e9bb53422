/**
 * Spans for hot paths: made only when a tracer is installed. Under the tracer of a
 * runtime nobody configured, spans reach no one, and a cell would pay for them anyway.
 */
import { Effect, type Tracer } from "effect"

const untracedTracer = Effect.runSync(Effect.tracer)

/** Whether the current fiber has a tracer someone installed. */
export const isTraced: Effect.Effect<boolean> = Effect.map(Effect.tracer, (tracer) => tracer !== untracedTracer)

/** `Effect.withSpan`, skipped (and `traced` false) when no tracer is installed. */
export const withSpanWhenTraced = <A, E, R>(
  make: (traced: boolean) => Effect.Effect<A, E, R>,
  name: string,
  options: Tracer.SpanOptions
): Effect.Effect<A, E, R> =>
  Effect.flatMap(isTraced, (traced) => (traced ? Effect.withSpan(make(true), name, options) : make(false)))
