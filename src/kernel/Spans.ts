/**
 * Spans for hot paths: made only when a tracer is installed. Under the tracer of a
 * runtime nobody configured, spans reach no one, and a cell would pay for them anyway.
 */
import { Context, Effect, Tracer } from "effect"

const untracedTracer = Effect.runSync(Effect.tracer)

/**
 * Runs `use` with the fiber's current span when it is in one of its own; otherwise does
 * nothing, without the error `Effect.currentSpan` allocates for a missing span.
 */
export const withCurrentSpan = (use: (span: Tracer.Span) => void): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    const span = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
    if (span?._tag === "Span") use(span)
    return Effect.void
  })

/** Carries a value that ends its span with error status; caught outside the span and turned back into the value. */
class FailedOutcome<A> extends Error {
  constructor(message: string, readonly value: A) {
    super(message)
    this.name = "CellFailed"
  }
}

/**
 * `Effect.withSpan`, skipped (and `traced` false) when no tracer is installed. When
 * `failureOf` gives a sentence for the value, the span ends with error status and that
 * message (a failed, cancelled or timed-out cell); the caller still gets the value.
 */
export const withSpanWhenTraced = <A, E, R>(
  make: (traced: boolean) => Effect.Effect<A, E, R>,
  name: string,
  options: Tracer.SpanOptions,
  failureOf?: (value: A) => string | undefined
): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => {
    if (fiber.getRef(Tracer.Tracer) === untracedTracer) return make(false)
    if (failureOf === undefined) return Effect.withSpan(make(true), name, options)
    const judged = Effect.flatMap(make(true), (value) => {
      const failure = failureOf(value)
      return failure === undefined ? Effect.succeed(value) : Effect.fail(new FailedOutcome(failure, value))
    })
    return Effect.withSpan(judged, name, options).pipe(
      Effect.catchIf(
        (error): error is FailedOutcome<A> => error instanceof FailedOutcome,
        (failed) => Effect.succeed(failed.value)
      )
    ) as Effect.Effect<A, E, R>
  })

/** How a cell ended, as far as its span's status is concerned. */
export interface CellEnding {
  readonly status: "ok" | "error"
  readonly cancelled: boolean
  readonly timedOut: boolean
  readonly killed: boolean
}

/** The error-status message of a cell's span: undefined when the cell ended normally. */
export const cellSpanFailure = (ending: CellEnding): string | undefined =>
  ending.timedOut
    ? ending.killed ? "the cell timed out and its kernel was killed" : "the cell timed out"
    : ending.cancelled
    ? ending.killed ? "the cell was cancelled and its kernel was killed" : "the cell was cancelled"
    : ending.status === "error"
    ? "the cell raised an error"
    : undefined
