/**
 * The cell watchdog: a wall-clock budget on a cell's own work that pauses while any
 * bridge call is in flight. Pauses nest; the resume that brings them to zero starts a
 * fresh full window (see `WatchdogBudget`). Output never extends the budget.
 *
 * Under the live clock a window is a host timer (arming it costs no fiber: a forked
 * sleeper and its interruption were a tenth of a warm cell's host work); under any other
 * clock (a `TestClock`) it is a fiber sleeping on that clock. Neither is tied to a scope,
 * so a cell starts and stops its watchdog without a finalizer.
 */
import { Clock, Deferred, Duration, Effect, Exit, type Fiber, type Scope } from "effect"
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

/** Starts and stops one window. */
interface Window {
  readonly arm: Effect.Effect<void>
  readonly disarm: Effect.Effect<void>
}

/** The clock of a runtime nobody configured, whose sleeps are plain host timers. */
const liveClock = Effect.runSync(Clock.clockWith(Effect.succeed))

const hostWindow = (millis: number, ring: Effect.Effect<void>): Window => {
  let handle: ReturnType<typeof setTimeout> | undefined
  return {
    arm: Effect.sync(() => {
      handle = setTimeout(() => {
        handle = undefined
        Effect.runFork(ring)
      }, millis)
    }),
    disarm: Effect.sync(() => {
      if (handle !== undefined) clearTimeout(handle)
      handle = undefined
    })
  }
}

const fiberWindow = (window: Duration.Duration, ring: Effect.Effect<void>): Window => {
  let fiber: Fiber.Fiber<void> | undefined
  return {
    arm: Effect.map(Effect.forkDetach(Effect.interruptible(Effect.andThen(Effect.sleep(window), ring))), (started) => {
      fiber = started
    }),
    disarm: Effect.sync(() => {
      const running = fiber
      fiber = undefined
      running?.interruptUnsafe()
    })
  }
}

/**
 * Starts a watchdog with `budget`; `onExpire` runs once when it runs out, unless `stop`
 * ran first. Pause, resume and stop complete without suspending, so calls from different
 * fibers cannot interleave inside them.
 */
export const start = (
  budget: Duration.Input,
  onExpire: Effect.Effect<void> = Effect.void
): Effect.Effect<CellWatchdog> =>
  Clock.clockWith((clock) => {
    const window = Duration.fromInputUnsafe(budget)
    const expired = Deferred.makeUnsafe<void>()
    let stopped = false
    let state = WatchdogBudget.running
    const ring = Effect.suspend(() => (stopped ? Effect.void : Effect.andThen(Deferred.done(expired, Exit.void), onExpire)))
    const { arm, disarm } = clock === liveClock ? hostWindow(Duration.toMillis(window), ring) : fiberWindow(window, ring)
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
  budget: Duration.Input,
  onExpire: Effect.Effect<void> = Effect.void
): Effect.Effect<CellWatchdog, never, Scope.Scope> =>
  Effect.acquireRelease(start(budget, onExpire), (watchdog) => watchdog.stop)
