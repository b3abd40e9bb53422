/**
 * Stopping a running cell: wait (bounded) until the runner says the cell began, send
 * SIGINT through the lifecycle, and give the cell the escalation delay (5 s by default)
 * to send `done`. A cell that never began or never answers gets its kernel killed.
 */
import { Duration, Effect, Option } from "effect"
import type { DoneFrame } from "./Frame.ts"
import type { KernelError } from "./KernelError.ts"
import { type InterruptReason, LifecycleEvent } from "./Lifecycle.ts"
import { awaitUntil, type CellRequest } from "./RequestTable.ts"

/** What interrupting needs from its kernel. */
export interface InterruptContext {
  /** How long after SIGINT (and before `started`) a cell may take. */
  readonly escalation: Duration.Duration
  /** Feeds a lifecycle event to the kernel (SIGINT and escalation are its actions). */
  readonly dispatch: (event: LifecycleEvent) => Effect.Effect<void>
  /** Shuts the kernel down (the escalation's end). */
  readonly shutdown: Effect.Effect<void>
  /** A label for the span. */
  readonly label: string
}

/** How an interrupted cell ended: its `done` (absent when the kernel was killed) and a sentence for the caller. */
export interface InterruptOutcome {
  readonly frame: DoneFrame | undefined
  readonly notice?: string
}

/** The notice of a cell stopped by its watchdog. */
export const timeoutNotice = (seconds: number): string =>
  `eval cell timed out after ${seconds}s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted.`

/** The notice of a cell whose kernel was killed because it did not stop after SIGINT. */
export const killedNotice = (reason: InterruptReason, seconds: number | undefined, escalation: Duration.Duration): string => {
  const why = reason === "timeout" && seconds !== undefined ? `eval cell timed out after ${seconds}s` : "eval cell was cancelled"
  return `${why}; the kernel did not stop within ${Duration.format(escalation)} of SIGINT and was killed. The next call starts a fresh kernel; earlier state is gone.`
}

const begunOrDone = (request: CellRequest) => request.started || request.done !== undefined
const isDone = (request: CellRequest) => request.done !== undefined

/** Stops `request` for `reason`, escalating to a kill when it does not stop in time. */
export const interruptCell = Effect.fnUntraced(
  function*(
    context: InterruptContext,
    request: CellRequest,
    reason: InterruptReason,
    timeoutSeconds: number | undefined
  ): Effect.fn.Return<InterruptOutcome, KernelError> {
    const began = Option.isSome(yield* awaitUntil(request, begunOrDone).pipe(Effect.timeoutOption(context.escalation)))
    if (began) yield* context.dispatch(LifecycleEvent.Interrupt({ requestId: request.id, reason }))
    const answered = began && Option.isSome(yield* awaitUntil(request, isDone).pipe(Effect.timeoutOption(context.escalation)))
    if (answered) {
      return reason === "timeout" && timeoutSeconds !== undefined
        ? { frame: request.done, notice: timeoutNotice(timeoutSeconds) }
        : { frame: request.done }
    }
    yield* context.dispatch(LifecycleEvent.EscalationTimeout({ requestId: request.id }))
    yield* context.shutdown
    return { frame: undefined, notice: killedNotice(reason, timeoutSeconds, context.escalation) }
  },
  (effect, context, _request, reason) =>
    Effect.withSpan(effect, "kernel.interrupt", { attributes: { "kernel.key": context.label, reason }, captureStackTrace: false })
)
