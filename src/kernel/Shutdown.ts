/**
 * The shutdown escalation as data, and the walk over it: ask the runner to exit, wait a
 * grace period, SIGTERM the process group, wait, SIGKILL it, wait. The walk stops at the
 * first step after which the process has exited; whatever happens, the group then gets a
 * final SIGKILL so no child outlives the kernel.
 */
import { Duration, Effect, Option } from "effect"
import { encodeHostLine } from "./Frame.ts"
import type { KernelProcess, KernelSignal } from "./KernelProcess.ts"

/** What one step sends: the protocol's exit request, or a signal to the process group. */
export type ShutdownMove = "exit-request" | KernelSignal

/** One step: send, then wait up to `grace` for the process to exit. */
export interface ShutdownStep {
  readonly send: ShutdownMove
  readonly grace: Duration.Duration
}

/**
 * The escalation with `grace` after each step. With `busy` (a cell is running) it starts at
 * SIGTERM: the runner answers the requests before an exit request first, so a running cell
 * would keep it alive through the exit request's grace.
 */
export const shutdownSteps = (grace: Duration.Duration, busy = false): ReadonlyArray<ShutdownStep> => [
  ...(busy ? [] : [{ send: "exit-request" as const, grace }]),
  { send: "SIGTERM", grace },
  { send: "SIGKILL", grace }
]

const EXIT_REQUEST_LINE = encodeHostLine({ type: "exit" })

/** Walks `steps` until `proc` has exited, recording each step as an event of the current span. */
export const runShutdown = Effect.fnUntraced(function*(proc: KernelProcess, steps: ReadonlyArray<ShutdownStep>): Effect.fn.Return<void> {
  const span = yield* Effect.option(Effect.currentSpan)
  if ((yield* proc.exitNow) === undefined) {
    for (const step of steps) {
      if (Option.isSome(span)) span.value.event(step.send, BigInt(Date.now()) * 1_000_000n)
      yield* step.send === "exit-request" ? Effect.ignore(proc.write(EXIT_REQUEST_LINE)) : proc.signal(step.send)
      const exited = yield* Effect.interruptible(proc.exited).pipe(Effect.timeoutOption(step.grace), Effect.map(Option.isSome))
      if (exited) break
    }
  }
  yield* proc.signal("SIGKILL")
})
