/**
 * The cell watchdog: a wall-clock budget on a cell's own work that pauses while any
 * bridge call is in flight. Pauses nest; the resume that brings them to zero starts a
 * fresh full window. Output never extends the budget.
 */
import { Deferred, Duration, Effect, FiberHandle, type Scope } from "effect"

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

/** Starts a watchdog with `budget`; closing the scope disarms it. */
export const make = (budget: Duration.DurationInput): Effect.Effect<CellWatchdog, never, Scope.Scope> =>
  Effect.gen(function*() {
    const window = Duration.decode(budget)
    const expired = yield* Deferred.make<void>()
    const timer = yield* FiberHandle.make<void, never>()
    const lock = yield* Effect.makeSemaphore(1)
    let pauses = 0
    const arm = FiberHandle.run(timer, Effect.sleep(window).pipe(Effect.zipRight(Deferred.succeed(expired, undefined))))
    yield* arm
    return {
      pause: lock.withPermits(1)(
        Effect.suspend(() => {
          pauses++
          return pauses === 1 ? FiberHandle.clear(timer) : Effect.void
        })
      ),
      resume: lock.withPermits(1)(
        Effect.suspend(() => {
          if (pauses === 0) return Effect.void
          pauses--
          return pauses === 0 ? Effect.asVoid(arm) : Effect.void
        })
      ),
      expired: Deferred.await(expired),
      pauses: Effect.sync(() => pauses)
    }
  })

