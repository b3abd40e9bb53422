/**
 * The cell watchdog: a wall-clock budget on a cell's own work that pauses while any
 * bridge call is in flight. Pauses nest; the resume that brings them to zero starts a
 * fresh full window. Output never extends the budget.
 */
import { Deferred, Duration, Effect, Fiber, type Scope } from "effect"

/** A running watchdog for one cell. */
export interface CellWatchdog {
  /** Suspends the budget; every pause needs its own resume. */
  readonly pause: Effect.Effect<void>
  /** Ends one pause; the last one starts a fresh full window. Unmatched resumes are ignored. */
  readonly resume: Effect.Effect<void>
  /** Completes when the budget runs out. */
  readonly expired: Effect.Effect<void>
  /** How many pauses are outstanding. */
  readonly pauses: Effect.Effect<number>
}

/**
 * Starts a watchdog with `budget`; `onExpire` runs once when it runs out. Closing the
 * scope disarms it. Pause and resume complete without suspending, so calls from
 * different fibers cannot interleave inside them.
 */
export const make = (
  budget: Duration.DurationInput,
  onExpire: Effect.Effect<void> = Effect.void
): Effect.Effect<CellWatchdog, never, Scope.Scope> =>
  Effect.gen(function*() {
    const window = Duration.decode(budget)
    const expired = yield* Deferred.make<void>()
    const scope = yield* Effect.scope
    let pauses = 0
    let timer: Fiber.RuntimeFiber<void> | undefined
    const ring = Effect.zipRight(Deferred.succeed(expired, undefined), onExpire)
    const arm = Effect.map(Effect.forkIn(Effect.zipRight(Effect.sleep(window), ring), scope), (fiber) => {
      timer = fiber
    })
    const disarm = Effect.suspend(() => {
      const fiber = timer
      timer = undefined
      return fiber === undefined ? Effect.void : Fiber.interruptFork(fiber)
    })
    yield* arm
    return {
      pause: Effect.suspend(() => {
        pauses++
        return pauses === 1 ? disarm : Effect.void
      }),
      resume: Effect.suspend(() => {
        if (pauses === 0) return Effect.void
        pauses--
        return pauses === 0 ? arm : Effect.void
      }),
      expired: Deferred.await(expired),
      pauses: Effect.sync(() => pauses)
    }
  })
