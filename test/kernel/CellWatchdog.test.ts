import { describe, expect, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import * as CellWatchdog from "../../src/kernel/CellWatchdog.ts"

const isExpired = (watchdog: CellWatchdog.CellWatchdog) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(watchdog.expired)
    yield* Effect.yieldNow
    const done = fiber.pollUnsafe() !== undefined
    yield* Fiber.interrupt(fiber)
    return done
  })

/**
 * Runs `body` under the test clock with its sleeps counted; `body` gets how many sleeps
 * wait on the clock once forked fibers have had their turn.
 */
const withPendingSleeps = <A, E, R>(body: (pendingSleeps: Effect.Effect<number>) => Effect.Effect<A, E, R>) =>
  Clock.clockWith((clock) => {
    let sleeping = 0
    const counted: Clock.Clock = {
      ...clock,
      sleep: (duration) =>
        Effect.suspend(() => {
          sleeping++
          return Effect.ensuring(clock.sleep(duration), Effect.sync(() => sleeping--))
        })
    }
    const pendingSleeps = Effect.andThen(Effect.yieldNow, Effect.sync(() => sleeping))
    return Effect.provideService(body(pendingSleeps), Clock.Clock, counted)
  })

/** The id the next fiber gets (fiber ids count up): two reads differ by one when no fiber was made in between. */
const nextFiberId = Effect.flatMap(Effect.forkChild(Effect.fiberId), Fiber.join)

describe("CellWatchdog", () => {
  it.effect("expires at exactly the budget", () =>
    Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.make(Duration.seconds(30))
      yield* TestClock.adjust(Duration.millis(29_999))
      expect(yield* isExpired(watchdog)).toBe(false)
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* isExpired(watchdog)).toBe(true)
    }))

  it.effect("does not run while paused, and a resume starts a fresh full window", () =>
    Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.make(Duration.seconds(10))
      yield* TestClock.adjust(Duration.seconds(9))
      yield* watchdog.pause
      yield* TestClock.adjust(Duration.hours(1))
      expect(yield* isExpired(watchdog)).toBe(false)
      yield* watchdog.resume
      yield* TestClock.adjust(Duration.millis(9_999))
      expect(yield* isExpired(watchdog)).toBe(false)
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* isExpired(watchdog)).toBe(true)
    }))

  it.effect("counts pauses: two overlapping pauses need two resumes", () =>
    Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.make(Duration.seconds(5))
      yield* watchdog.pause
      yield* watchdog.pause
      yield* watchdog.resume
      expect(yield* watchdog.pauses).toBe(1)
      yield* TestClock.adjust(Duration.minutes(10))
      expect(yield* isExpired(watchdog)).toBe(false)
      yield* watchdog.resume
      expect(yield* watchdog.pauses).toBe(0)
      yield* TestClock.adjust(Duration.seconds(5))
      expect(yield* isExpired(watchdog)).toBe(true)
    }))

  it.effect("ignores a resume without a pause", () =>
    Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.make(Duration.seconds(5))
      yield* TestClock.adjust(Duration.seconds(3))
      yield* watchdog.resume
      expect(yield* watchdog.pauses).toBe(0)
      yield* TestClock.adjust(Duration.seconds(2))
      expect(yield* isExpired(watchdog)).toBe(true)
    }))

  it.effect("a stopped watchdog never rings, however far the clock moves", () =>
    Effect.gen(function*() {
      let rings = 0
      const watchdog = yield* CellWatchdog.start(Duration.seconds(5), Effect.sync(() => rings++))
      yield* TestClock.adjust(Duration.seconds(4))
      yield* watchdog.stop
      yield* watchdog.resume
      yield* TestClock.adjust(Duration.hours(1))
      expect(rings).toBe(0)
      expect(yield* isExpired(watchdog)).toBe(false)
    }))

  it.live("under the live clock, rings once after the budget and not while paused", () =>
    Effect.gen(function*() {
      let rings = 0
      const watchdog = yield* CellWatchdog.make(Duration.millis(40), Effect.sync(() => rings++))
      yield* watchdog.pause
      yield* Effect.sleep(Duration.millis(120))
      expect(rings).toBe(0)
      expect(yield* isExpired(watchdog)).toBe(false)
      yield* watchdog.resume
      yield* watchdog.expired.pipe(Effect.timeout(Duration.seconds(10)))
      yield* Effect.sleep(Duration.millis(100))
      expect(rings).toBe(1)
    }))

  it.live("under the live clock, closing the scope disarms it", () =>
    Effect.gen(function*() {
      let rings = 0
      yield* Effect.scoped(CellWatchdog.make(Duration.millis(30), Effect.sync(() => rings++)))
      yield* Effect.sleep(Duration.millis(150))
      expect(rings).toBe(0)
    }))

  it.effect("a stopped watchdog stays disarmed: a resume of a pause taken before the stop arms nothing", () =>
    withPendingSleeps((pendingSleeps) => Effect.gen(function*() {
      let rings = 0
      const watchdog = yield* CellWatchdog.start(Duration.seconds(5), Effect.sync(() => rings++))
      yield* watchdog.pause
      yield* watchdog.stop
      yield* watchdog.resume
      expect(yield* pendingSleeps).toBe(0)
      yield* TestClock.adjust(Duration.hours(1))
      expect(rings).toBe(0)
      expect(yield* isExpired(watchdog)).toBe(false)
    })))

  it.effect("stop after a pause, and a second stop, complete (the window is already disarmed)", () =>
    withPendingSleeps((pendingSleeps) => Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.start(Duration.seconds(5))
      yield* watchdog.pause
      yield* watchdog.stop
      yield* watchdog.stop
      expect(yield* pendingSleeps).toBe(0)
    })))

  it.live("under the live clock a window is a host timer: an armed watchdog holds no fiber", () =>
    Effect.gen(function*() {
      const before = yield* nextFiberId
      const watchdog = yield* CellWatchdog.start(Duration.seconds(30))
      yield* watchdog.pause
      yield* watchdog.resume
      yield* Effect.yieldNow
      const after = yield* nextFiberId
      yield* watchdog.stop
      expect(after - before).toBe(1)
    }))

  it.effect("under a test clock a window is a fiber sleeping on that clock", () =>
    withPendingSleeps((pendingSleeps) =>
      Effect.gen(function*() {
        const watchdog = yield* CellWatchdog.start(Duration.seconds(5))
        expect(yield* pendingSleeps).toBe(1)
        yield* watchdog.stop
      })
    ))
})
