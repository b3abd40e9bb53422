import { describe, expect, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Fiber, TestClock } from "effect"
import * as CellWatchdog from "../../src/kernel/CellWatchdog.ts"

const isExpired = (watchdog: CellWatchdog.CellWatchdog) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(watchdog.expired)
    yield* Effect.yieldNow()
    const done = (yield* Fiber.poll(fiber))._tag === "Some"
    yield* Fiber.interrupt(fiber)
    return done
  })

/** How many sleeps wait on the test clock once forked fibers have had their turn. */
const pendingSleeps = Effect.zipRight(Effect.yieldNow(), Effect.map(TestClock.sleeps(), Chunk.size))

describe("CellWatchdog", () => {
  it.scoped("expires at exactly the budget", () =>
    Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.make(Duration.seconds(30))
      yield* TestClock.adjust(Duration.millis(29_999))
      expect(yield* isExpired(watchdog)).toBe(false)
      yield* TestClock.adjust(Duration.millis(1))
      expect(yield* isExpired(watchdog)).toBe(true)
    }))

  it.scoped("does not run while paused, and a resume starts a fresh full window", () =>
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

  it.scoped("counts pauses: two overlapping pauses need two resumes", () =>
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

  it.scoped("ignores a resume without a pause", () =>
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

  it.scopedLive("under the live clock, rings once after the budget and not while paused", () =>
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
    Effect.gen(function*() {
      let rings = 0
      const watchdog = yield* CellWatchdog.start(Duration.seconds(5), Effect.sync(() => rings++))
      yield* watchdog.pause
      yield* watchdog.stop
      yield* watchdog.resume
      expect(yield* pendingSleeps).toBe(0)
      yield* TestClock.adjust(Duration.hours(1))
      expect(rings).toBe(0)
      expect(yield* isExpired(watchdog)).toBe(false)
    }))

  it.effect("stop after a pause, and a second stop, complete (the window is already disarmed)", () =>
    Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.start(Duration.seconds(5))
      yield* watchdog.pause
      yield* watchdog.stop
      yield* watchdog.stop
      expect(yield* pendingSleeps).toBe(0)
    }))

  it.live("under the live clock a window is a host timer: an armed watchdog holds no fiber", () =>
    Effect.gen(function*() {
      const before = new Set(yield* Fiber.roots)
      const watchdog = yield* CellWatchdog.start(Duration.seconds(30))
      yield* watchdog.pause
      yield* watchdog.resume
      yield* Effect.yieldNow()
      const added = (yield* Fiber.roots).filter((fiber) => !before.has(fiber))
      yield* watchdog.stop
      expect(added).toEqual([])
    }))

  it.effect("under a test clock a window is a fiber sleeping on that clock", () =>
    Effect.gen(function*() {
      const watchdog = yield* CellWatchdog.start(Duration.seconds(5))
      expect(yield* pendingSleeps).toBe(1)
      yield* watchdog.stop
    }))
})
