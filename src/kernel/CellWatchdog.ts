/**
 * The cell watchdog: a wall-clock budget on a cell's own work that pauses while any
 * bridge call is in flight. Pauses nest; the resume that brings them to zero starts a
 * fresh full window (see `WatchdogBudget`). Output never extends the budget.
 *
 * A window is one fiber sleeping on the fiber's `Clock`: the live clock in production,
 * a `TestClock` in tests, the same code either way. It is not tied to a scope, so a cell
 * starts and stops its watchdog without a finalizer.
 */
import { Deferred, Duration, Effect, Exit, type Fiber, FiberId, type Scope } from "effect"
import * as WatchdogBudget from "./WatchdogBudget.ts"

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
  /** Disarms the watchdog for good (idempotent); it never rings after this. */
  readonly stop: Effect.Effect<void>
}

/**
 * Starts a watchdog with `budget`; `onExpire` runs once when it runs out, unless `stop`
 * ran first. Pause, resume and stop complete without suspending, so calls from different
 * fibers cannot interleave inside them.
 */
export const start = (
  budget: Duration.DurationInput,
  onExpire: Effect.Effect<void> = Effect.void
): Effect.Effect<CellWatchdog> =>
  Effect.suspend(() => {
    const window = Duration.decode(budget)
    const expired = Deferred.unsafeMake<void>(FiberId.none)
    let stopped = false
    let state = WatchdogBudget.running
    let fiber: Fiber.RuntimeFiber<void> | undefined
    const ring = Effect.suspend(() => {
      fiber = undefined
      return stopped ? Effect.void : Effect.zipRight(Deferred.done(expired, Exit.void), onExpire)
    })
    const arm = Effect.map(Effect.forkDaemon(Effect.interruptible(Effect.zipRight(Effect.sleep(window), ring))), (started) => {
      fiber = started
    })
    const disarm = Effect.sync(() => {
      const running = fiber
      fiber = undefined
      running?.unsafeInterruptAsFork(FiberId.none)
    })
    const apply = (step: WatchdogBudget.BudgetStep) =>
      Effect.suspend(() => {
        state = step.budget
        if (stopped) return Effect.void
        return step.action === "arm" ? arm : step.action === "disarm" ? disarm : Effect.void
      })
    const watchdog: CellWatchdog = {
      pause: Effect.suspend(() => apply(WatchdogBudget.pause(state))),
      resume: Effect.suspend(() => apply(WatchdogBudget.resume(state))),
      expired: Deferred.await(expired),
      pauses: Effect.sync(() => state.pauses),
      stop: Effect.suspend(() => {
        stopped = true
        return disarm
      })
    }
    return Effect.as(arm, watchdog)
  })

/** `start`, stopped when the scope closes. */
export const make = (
  budget: Duration.DurationInput,
  onExpire: Effect.Effect<void> = Effect.void
): Effect.Effect<CellWatchdog, never, Scope.Scope> =>
  Effect.acquireRelease(start(budget, onExpire), (watchdog) => watchdog.stop)
