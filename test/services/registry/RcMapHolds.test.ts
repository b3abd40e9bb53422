import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, RcMap, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as RcMapHolds from "../../../src/services/registry/RcMapHolds.ts"

/** A map whose values count their lookups and record when their entry closes. */
const counted = (ttlMs: number) =>
  Effect.gen(function*() {
    const log = { opened: 0, closed: 0 }
    let usable = true
    const map = yield* RcMap.make({
      lookup: (key: string) =>
        Effect.acquireRelease(Effect.sync(() => ({ key, n: ++log.opened })), () => Effect.sync(() => void log.closed++)),
      idleTimeToLive: Duration.millis(ttlMs)
    })
    const holds = yield* RcMapHolds.make(map, {
      idleTtlMs: () => ttlMs,
      usable: () => Effect.sync(() => usable)
    })
    return { log, holds, spoil: () => (usable = false) }
  })

describe("RcMapHolds", () => {
  it.effect("takes a key's value once and reuses it while it is used", () =>
    Effect.gen(function*() {
      const { log, holds } = yield* counted(1000)
      const seen: Array<number> = []
      for (let i = 0; i < 5; i++) yield* holds.use("a", (value) => Effect.sync(() => seen.push(value.n)))
      expect(seen).toEqual([1, 1, 1, 1, 1])
      expect(log).toEqual({ opened: 1, closed: 0 })
    }))

  it.effect("closes the entry once the key has been idle for its time-to-live, not a second one later", () =>
    Effect.gen(function*() {
      const { log, holds } = yield* counted(1000)
      yield* holds.use("a", () => Effect.void)
      yield* TestClock.adjust(Duration.millis(600))
      yield* holds.use("a", () => Effect.void)
      yield* TestClock.adjust(Duration.millis(600))
      expect(log.closed).toBe(0)
      yield* TestClock.adjust(Duration.millis(500))
      expect(log).toEqual({ opened: 1, closed: 1 })
      yield* holds.use("a", () => Effect.void)
      expect(log.opened).toBe(2)
    }))

  it.effect("never closes an entry while a use runs, however long", () =>
    Effect.gen(function*() {
      const { log, holds } = yield* counted(100)
      const release = yield* Deferred.make<void>()
      const user = yield* Effect.forkChild(holds.use("a", () => Deferred.await(release)))
      yield* TestClock.adjust(Duration.millis(1000))
      expect(log.closed).toBe(0)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(user)
      yield* TestClock.adjust(Duration.millis(99))
      expect(log.closed).toBe(0)
      yield* TestClock.adjust(Duration.millis(2))
      expect(log.closed).toBe(1)
    }))

  it.effect("drop ends the hold; the entry closes when the uses running at that moment end", () =>
    Effect.gen(function*() {
      const { log, holds } = yield* counted(1000)
      const release = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      const user = yield* Effect.forkChild(holds.use("a", () => Effect.andThen(Deferred.succeed(started, undefined), Deferred.await(release))))
      yield* Deferred.await(started)
      yield* holds.drop("a")
      expect(log.closed).toBe(0)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(user)
      expect(log.closed).toBe(1)
      yield* holds.use("a", () => Effect.void)
      expect(log.opened).toBe(2)
    }))

  it.effect("a held value that is no longer usable is replaced by a fresh one", () =>
    Effect.gen(function*() {
      const { log, holds, spoil } = yield* counted(1000)
      yield* holds.use("a", () => Effect.void)
      spoil()
      const value = yield* holds.use("a", (v) => Effect.succeed(v.n))
      expect(value).toBe(2)
      expect(log).toEqual({ opened: 2, closed: 1 })
    }))

  it.effect("with a time-to-live of zero nothing is held: each use gets and closes its own entry", () =>
    Effect.gen(function*() {
      const { log, holds } = yield* counted(0)
      yield* holds.use("a", () => Effect.void)
      yield* holds.use("a", () => Effect.void)
      expect(log).toEqual({ opened: 2, closed: 2 })
    }))

  it.effect("closing the scope ends every hold and its sweeper", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const { log, holds } = yield* Scope.provide(counted(60_000), scope)
      yield* holds.use("a", () => Effect.void)
      yield* holds.use("b", () => Effect.void)
      yield* Scope.close(scope, Exit.void)
      expect(log).toEqual({ opened: 2, closed: 2 })
    }))

  it.effect("concurrent first uses of a key share one hold", () =>
    Effect.gen(function*() {
      const { log, holds } = yield* counted(1000)
      const values = yield* Effect.all(Array.from({ length: 4 }, () => holds.use("a", (v) => Effect.succeed(v.n))), { concurrency: 4 })
      expect(values).toEqual([1, 1, 1, 1])
      yield* TestClock.adjust(Duration.millis(1001))
      expect(log).toEqual({ opened: 1, closed: 1 })
    }))
})
