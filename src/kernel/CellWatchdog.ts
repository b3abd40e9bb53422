/**
 * The cell watchdog: a wall-clock budget on a cell's own work that pauses while any
 * bridge call is in flight. Pauses nest; the resume that brings them to zero starts a
 * fresh full window. Output never extends the budget.
 */
import { Deferred, Duration, Effect, Exit, Fiber, type Scope } from "effect"

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

/** Starts and stops the window's timer. */
interface Timer {
  readonly arm: Effect.Effect<void>
  readonly disarm: Effect.Effect<void>
}

/** The clock of a runtime nobody configured, whose sleeps are plain host timers. */
const liveClock = Effect.runSync(Effect.clock)

/** Under the live clock a window is a host timer: arming it costs no fiber. */
const hostTimer = (window: Duration.Duration, ring: Effect.Effect<void>) =>
  Effect.gen(function*() {
    let handle: ReturnType<typeof setTimeout> | undefined
    const disarm = Effect.sync(() => {
      if (handle !== undefined) clearTimeout(handle)
      handle = undefined
    })
    yield* Effect.addFinalizer(() => disarm)
    const arm = Effect.sync(() => {
      handle = setTimeout(() => {
        handle = undefined
        Effect.runFork(ring)
      }, Duration.toMillis(window))
    })
    return { arm, disarm } satisfies Timer
  })

/** Under any other clock (a `TestClock`) a window is a fiber sleeping on that clock. */
const clockTimer = (window: Duration.Duration, ring: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    let fiber: Fiber.RuntimeFiber<void> | undefined
    const arm = Effect.map(Effect.forkIn(Effect.zipRight(Effect.sleep(window), ring), scope), (started) => {
      fiber = started
    })
    const disarm = Effect.suspend(() => {
      const running = fiber
      fiber = undefined
      return running === undefined ? Effect.void : Fiber.interruptFork(running)
    })
    return { arm, disarm } satisfies Timer
  })

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
    const ring = Effect.zipRight(Deferred.done(expired, Exit.void), onExpire)
    const clock = yield* Effect.clock
    const timer = clock === liveClock ? yield* hostTimer(window, ring) : yield* clockTimer(window, ring)
    let pauses = 0
    yield* timer.arm
    return {
      pause: Effect.suspend(() => {
        pauses++
        return pauses === 1 ? timer.disarm : Effect.void
      }),
      resume: Effect.suspend(() => {
        if (pauses === 0) return Effect.void
        pauses--
        return pauses === 0 ? timer.arm : Effect.void
      }),
      expired: Deferred.await(expired),
      pauses: Effect.sync(() => pauses)
    }
  })
