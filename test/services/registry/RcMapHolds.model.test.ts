/**
 * The holds against a reference model written here, independently of the module: plain
 * records of which entries are open, which entry each use got, which hold each key has and
 * until when it stays idle, with a rule per event (a use starts, alone or with others at
 * once, or with its lookup failing; a use ends, fails or is interrupted; time passes; a held
 * value goes bad; a key or every key is dropped; the holds' scope closes). Compared after
 * every event over random sequences under the test clock, so each entry's closing time is
 * exact, plus progress properties a do-nothing holder fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Clock, Data, Deferred, Duration, Effect, Exit, Fiber, RcMap, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as RcMapHolds from "../../../src/services/registry/RcMapHolds.ts"
import { constantFrom, integer, oneOf } from "../../kernel/arbitraries.ts"

type Name = "a" | "b" | "z" | "inf"

/** Each key's idle time-to-live: two held keys, one never held (zero), one held until dropped. */
const TTL: Record<Name, number> = { a: 100, b: 250, z: 0, inf: Infinity }
const NAMES = Object.keys(TTL) as ReadonlyArray<Name>

class Key extends Data.Class<{ readonly name: Name }> {}

/** The keys uses pass (callers reuse their key objects); drops pass equal copies. */
const KEYS: Record<Name, Key> = { a: new Key({ name: "a" }), b: new Key({ name: "b" }), z: new Key({ name: "z" }), inf: new Key({ name: "inf" }) }

type Ending = "succeed" | "fail" | "interrupt"
type Step =
  | { readonly _tag: "start"; readonly key: Name; readonly count: number }
  | { readonly _tag: "broken"; readonly key: Name }
  | { readonly _tag: "finish"; readonly pick: number; readonly how: Ending }
  | { readonly _tag: "advance"; readonly ms: number }
  | { readonly _tag: "spoil"; readonly key: Name }
  | { readonly _tag: "drop"; readonly key: Name }
  | { readonly _tag: "dropAll" }

/** What the model and the implementation are compared on. */
interface Seen {
  /** Per entry, in the order the map opened them: its key and when it closed. */
  readonly entries: ReadonlyArray<{ readonly key: Name; readonly closedAt: number | undefined }>
  /** Per use, in the order they started: the entry it got (1-based), or "failed" when its lookup failed. */
  readonly uses: ReadonlyArray<number | "failed">
}

interface ModelEntry {
  readonly n: number
  readonly key: Name
  readonly users: Set<number>
  inMap: boolean
  spoiled: boolean
  closedAt: number | undefined
}

/** The reference model, on plain records. */
class Model {
  now: number
  readonly entries: Array<ModelEntry> = []
  readonly holds = new Map<Name, { readonly entry: ModelEntry; idleUntil: number }>()
  readonly uses: Array<number | "failed"> = []
  readonly running: Array<number> = []
  open = true

  constructor(now: number) {
    this.now = now
  }

  /** An entry closes once no use runs on it and no hold keeps it. */
  private settle(entry: ModelEntry): void {
    if (entry.closedAt !== undefined || entry.users.size > 0 || this.holds.get(entry.key)?.entry === entry) return
    entry.closedAt = this.now
    entry.inMap = false
  }

  private end(key: Name): void {
    const hold = this.holds.get(key)
    if (hold === undefined) return
    this.holds.delete(key)
    hold.entry.inMap = false
    this.settle(hold.entry)
  }

  private fresh(key: Name): ModelEntry {
    const entry: ModelEntry = { n: this.entries.length + 1, key, users: new Set(), inMap: true, spoiled: false, closedAt: undefined }
    this.entries.push(entry)
    return entry
  }

  /** `count` uses of `key` start at once; with `broken`, the map's next lookup fails and the one use ends at once. */
  start(key: Name, count: number, broken: boolean): void {
    let entry: ModelEntry | undefined
    if (TTL[key] === 0) {
      entry = this.entries.find((candidate) => candidate.key === key && candidate.inMap)
    } else {
      const hold = this.holds.get(key)
      if (hold !== undefined && hold.entry.spoiled) this.end(key)
      entry = this.holds.get(key)?.entry
    }
    if (entry === undefined) {
      if (broken) {
        this.uses.push("failed")
        return
      }
      entry = this.fresh(key)
      if (TTL[key] > 0) this.holds.set(key, { entry, idleUntil: this.now + TTL[key] })
    }
    for (let i = 0; i < count; i++) {
      const id = this.uses.length
      this.uses.push(entry.n)
      entry.users.add(id)
      this.running.push(id)
      if (broken) this.finish(this.running.length - 1)
    }
  }

  /** The running use at `index` (of those running, oldest first) ends, however it ends. */
  finish(index: number): void {
    const [id] = this.running.splice(index, 1)
    const entry = this.entries[(this.uses[id!] as number) - 1]!
    entry.users.delete(id!)
    const hold = this.holds.get(entry.key)
    if (hold?.entry === entry) hold.idleUntil = this.now + TTL[entry.key]
    this.settle(entry)
  }

  /** Time passes: each hold idle with no use running ends at the instant its idle time-to-live runs out. */
  advance(ms: number): void {
    const until = this.now + ms
    for (const [key, hold] of [...this.holds]) {
      if (hold.entry.users.size === 0 && hold.idleUntil <= until) {
        this.now = hold.idleUntil
        this.end(key)
      }
    }
    this.now = until
  }

  spoil(key: Name): void {
    const hold = this.holds.get(key)
    if (hold !== undefined) hold.entry.spoiled = true
  }

  /** A held key's hold ends; a key without one leaves the map, so its next use gets a new entry. */
  drop(key: Name): void {
    if (this.holds.has(key)) return this.end(key)
    for (const entry of this.entries) if (entry.key === key) entry.inMap = false
  }

  dropAll(): void {
    for (const key of [...this.holds.keys()]) this.end(key)
  }

  seen(): Seen {
    return { entries: this.entries.map(({ closedAt, key }) => ({ key, closedAt })), uses: [...this.uses] }
  }
}

/** Lets forked fibers (a lookup, a sweeper, a finalizer) run to their next wait. */
const settle = Effect.repeat(Effect.yieldNow, { times: 20 })

/** The implementation side: a real RcMap with the registry's per-key time-to-live, holds in their own scope, uses as fibers. */
const makeSystem = Effect.gen(function*() {
  const entries: Array<{ key: Name; closedAt: number | undefined }> = []
  const uses: Array<number | "failed"> = []
  const running: Array<{ readonly fiber: Fiber.Fiber<void, string>; readonly gate: Deferred.Deferred<Ending> }> = []
  const spoiled = new Set<number>()
  let failNext = false
  const map = yield* RcMap.make({
    // A lookup takes a turn of the scheduler, as a kernel's start does, so uses starting together race for it.
    lookup: (key: Key) =>
      Effect.andThen(Effect.yieldNow, () => {
        if (failNext) {
          failNext = false
          return Effect.fail("lookup failed")
        }
        const entry = { key: key.name, closedAt: undefined as number | undefined }
        entries.push(entry)
        const n = entries.length
        return Effect.as(Effect.addFinalizer(() => Effect.map(Clock.currentTimeMillis, (now) => void (entry.closedAt = now))), { n })
      }),
    idleTimeToLive: (key: Key) => Duration.millis(TTL[key.name])
  })
  const scope = yield* Scope.make()
  const holds = yield* Scope.provide(
    RcMapHolds.make(map, { idleTtlMs: (key) => TTL[key.name], usable: (value) => Effect.sync(() => !spoiled.has(value.n)) }),
    scope
  )

  const start = (name: Name, count: number) =>
    Effect.gen(function*() {
      const started: Array<Effect.Effect<unknown>> = []
      for (let i = 0; i < count; i++) {
        const id = uses.length
        uses.push("failed")
        const gate = yield* Deferred.make<Ending>()
        const begun = yield* Deferred.make<void>()
        const fiber = yield* Effect.forkChild(holds.use(KEYS[name], (value) =>
          Effect.gen(function*() {
            uses[id] = value.n
            yield* Deferred.succeed(begun, undefined)
            if ((yield* Deferred.await(gate)) === "fail") return yield* Effect.fail("cell failed")
          })))
        running.push({ fiber, gate })
        started.push(Effect.raceFirst(Deferred.await(begun), Fiber.await(fiber)))
      }
      for (const begun of started) yield* begun
    })

  const broken = (name: Name) =>
    Effect.gen(function*() {
      const id = uses.length
      uses.push("failed")
      failNext = true
      yield* Effect.exit(holds.use(KEYS[name], (value) => Effect.sync(() => void (uses[id] = value.n))))
      failNext = false
    })

  const finish = (index: number, how: Ending) =>
    Effect.gen(function*() {
      const [use] = running.splice(index, 1)
      if (how === "interrupt") return yield* Fiber.interrupt(use!.fiber)
      yield* Deferred.succeed(use!.gate, how)
      yield* Fiber.await(use!.fiber)
    })

  const apply = (step: Step, model: Model): Effect.Effect<void> =>
    Effect.gen(function*() {
      switch (step._tag) {
        case "start":
          model.start(step.key, step.count, false)
          return yield* start(step.key, step.count)
        case "broken":
          model.start(step.key, 1, true)
          return yield* broken(step.key)
        case "finish": {
          if (running.length === 0) return
          const index = step.pick % running.length
          model.finish(index)
          return yield* finish(index, step.how)
        }
        case "advance":
          model.advance(step.ms)
          return yield* TestClock.adjust(Duration.millis(step.ms))
        case "spoil": {
          model.spoil(step.key)
          for (let n = 1; n <= entries.length; n++) if (entries[n - 1]!.key === step.key) spoiled.add(n)
          return
        }
        case "drop":
          model.drop(step.key)
          return expect(yield* holds.drop(new Key({ name: step.key }))).toBeUndefined()
        case "dropAll":
          model.dropAll()
          return expect(yield* holds.dropAll).toBeUndefined()
      }
    }).pipe(Effect.andThen(settle))

  const seen = (): Seen => ({ entries: entries.map(({ closedAt, key }) => ({ key, closedAt })), uses: [...uses] })
  return { holds, scope, running, apply, finish, seen }
})

const name = constantFrom<Name>(...NAMES)
const steps: Arbitrary.Arbitrary<Array<Step>> = Arbitrary.array(
  oneOf<Step>(
    Arbitrary.map(Arbitrary.all([name, integer(1, 3)]), ([key, count]) => ({ _tag: "start", key, count: count === 3 ? 1 : count })),
    Arbitrary.map(name, (key) => ({ _tag: "start", key, count: 1 })),
    Arbitrary.map(name, (key) => ({ _tag: "broken", key })),
    Arbitrary.map(Arbitrary.all([integer(0, 7), constantFrom<Ending>("succeed", "succeed", "fail", "interrupt")]), ([pick, how]) => ({ _tag: "finish", pick, how })),
    Arbitrary.map(Arbitrary.all([integer(0, 7), constantFrom<Ending>("succeed", "fail")]), ([pick, how]) => ({ _tag: "finish", pick, how })),
    Arbitrary.map(oneOf(constantFrom(1, 99, 100, 101, 150, 249, 250, 251), integer(1, 400)), (ms) => ({ _tag: "advance", ms })),
    Arbitrary.map(oneOf(constantFrom(1, 99, 100, 101, 150, 249, 250, 251), integer(1, 400)), (ms) => ({ _tag: "advance", ms })),
    Arbitrary.map(name, (key) => ({ _tag: "spoil", key })),
    Arbitrary.map(name, (key) => ({ _tag: "drop", key })),
    Arbitrary.Constant({ _tag: "dropAll" } as const)
  ),
  { maxLength: 40 }
)

describe("RcMapHolds against its model", () => {
  it.effect.prop("agrees after every event, closing times exact, and leaves nothing open once its scope closes", [steps], ([life]) =>
    Effect.gen(function*() {
      const system = yield* makeSystem
      const model = new Model(yield* Clock.currentTimeMillis)
      for (const step of life) {
        yield* system.apply(step, model)
        expect(system.seen(), JSON.stringify(step)).toEqual(model.seen())
      }
      yield* Scope.close(system.scope, Exit.void)
      yield* settle
      model.dropAll()
      expect(system.seen(), "scope closed").toEqual(model.seen())
      while (system.running.length > 0) {
        model.finish(0)
        yield* system.finish(0, "succeed")
        yield* settle
        expect(system.seen(), "a use ended after the scope closed").toEqual(model.seen())
      }
      expect(system.seen().entries.every((entry) => entry.closedAt !== undefined), "an entry left open").toBe(true)
    }), { arbitrary: { size: 40, runs: 200 } })
})

/** The hold's time-to-live in the progress properties; the map's own is ten times longer, so only the hold can close an entry on time. */
const HOLD_TTL = 100

/** One key's holds over a map whose own idle time-to-live is far longer, logging each entry's opening and closing time. */
const progressSystem = Effect.gen(function*() {
  const entries: Array<{ readonly openedAt: number; closedAt: number | undefined }> = []
  const spoiled = new Set<number>()
  const map = yield* RcMap.make({
    lookup: (_: string) =>
      Effect.gen(function*() {
        const entry = { openedAt: yield* Clock.currentTimeMillis, closedAt: undefined as number | undefined }
        entries.push(entry)
        yield* Effect.addFinalizer(() => Effect.map(Clock.currentTimeMillis, (now) => void (entry.closedAt = now)))
        return entries.length
      }),
    idleTimeToLive: Duration.millis(HOLD_TTL * 10)
  })
  const scope = yield* Scope.make()
  const holds = yield* Scope.provide(RcMapHolds.make(map, { idleTtlMs: () => HOLD_TTL, usable: (n) => Effect.sync(() => !spoiled.has(n)) }), scope)
  /** Starts a use of `key` that runs until its returned `end` runs; resolves once it has its value. */
  const begin = (key = "k") =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const got = yield* Deferred.make<number>()
      const fiber = yield* Effect.forkChild(holds.use(key, (n) => Effect.andThen(Deferred.succeed(got, n), Deferred.await(gate))))
      const value = yield* Deferred.await(got)
      return { value, end: Effect.andThen(Deferred.succeed(gate, undefined), Fiber.await(fiber)) }
    })
  const closed = () => entries.filter((entry) => entry.closedAt !== undefined).length
  return { holds, scope, entries, spoiled, begin, closed }
})

const advance = (ms: number) => TestClock.adjust(Duration.millis(ms))

describe("RcMapHolds progress", () => {
  it.effect.prop(
    "one value serves uses that start within the time-to-live of the last one's end; it closes exactly that long after the last, never while a use runs",
    [Arbitrary.array(Arbitrary.all([integer(0, HOLD_TTL - 1), integer(0, HOLD_TTL * 3)]), { minLength: 1, maxLength: 8 })],
    ([uses]) =>
      Effect.gen(function*() {
        const system = yield* progressSystem
        for (const [gap, duration] of uses) {
          yield* advance(gap)
          const use = yield* system.begin()
          expect(use.value).toBe(1)
          yield* advance(duration)
          expect(system.closed(), "closed while a use ran").toBe(0)
          yield* use.end
        }
        const lastEnd = yield* Clock.currentTimeMillis
        yield* advance(HOLD_TTL - 1)
        expect(system.closed()).toBe(0)
        yield* advance(1)
        expect(system.entries).toEqual([{ openedAt: uses[0]![0], closedAt: lastEnd + HOLD_TTL }])
      })
  )

  it.effect.prop(
    "a drop closes the value the instant the last use running at that moment ends, and the next use gets a fresh one",
    [integer(1, 4), integer(0, 4), Arbitrary.array(integer(0, HOLD_TTL * 3), { minLength: 4, maxLength: 4 })],
    ([running, droppedAfter, waits]) =>
      Effect.gen(function*() {
        const system = yield* progressSystem
        const uses = []
        for (let i = 0; i < running; i++) uses.push(yield* system.begin())
        for (const [i, use] of uses.entries()) {
          if (i === Math.min(droppedAfter, running - 1)) {
            yield* system.holds.drop("k")
            expect((yield* system.begin()).value, "a use after the drop").toBe(2)
          }
          yield* advance(waits[i]!)
          expect(system.entries[0]!.closedAt, "closed while a use ran").toBeUndefined()
          yield* use.end
        }
        expect(system.entries[0]!.closedAt).toBe(yield* Clock.currentTimeMillis)
      })
  )

  it.effect.prop(
    "a value found unusable is replaced at the next use, and closes once the uses already running on it end",
    [integer(0, 3), integer(1, HOLD_TTL * 3)],
    ([running, wait]) =>
      Effect.gen(function*() {
        const system = yield* progressSystem
        yield* Effect.flatMap(system.begin(), (use) => use.end)
        const uses = []
        for (let i = 0; i < running; i++) uses.push(yield* system.begin())
        system.spoiled.add(1)
        const fresh = yield* system.begin()
        expect(fresh.value).toBe(2)
        expect(system.entries[0]!.closedAt === undefined).toBe(running > 0)
        yield* advance(wait)
        for (const use of uses) yield* use.end
        expect(system.entries[0]!.closedAt).toBe(running === 0 ? 0 : wait)
        expect(system.entries[1]!.closedAt).toBeUndefined()
        yield* fresh.end
      })
  )

  it.effect.prop(
    "closing the holds' scope ends every hold: each value closes once its running uses end, none is left open",
    [Arbitrary.array(Arbitrary.all([constantFrom("a", "b", "c"), constantFrom(true, false)]), { minLength: 1, maxLength: 8 })],
    ([uses]) =>
      Effect.gen(function*() {
        const system = yield* progressSystem
        const running = []
        for (const [key, keep] of uses) {
          const use = yield* system.begin(key)
          if (keep) running.push(use)
          else yield* use.end
        }
        yield* Scope.close(system.scope, Exit.void)
        const closedBefore = system.closed()
        expect(closedBefore).toBe(system.entries.length - new Set(uses.filter(([, keep]) => keep).map(([key]) => key)).size)
        for (const use of running) yield* use.end
        expect(system.closed()).toBe(system.entries.length)
        expect(system.entries.every((entry) => entry.closedAt === 0)).toBe(true)
      })
  )

  it.effect("a lookup that fails is not kept: the next use looks the key up again", () =>
    Effect.gen(function*() {
      let lookups = 0
      const map = yield* RcMap.make({
        lookup: (_: string) => Effect.suspend(() => ++lookups === 1 ? Effect.fail("cannot start") : Effect.succeed(lookups)),
        idleTimeToLive: Duration.minutes(10)
      })
      const holds = yield* RcMapHolds.make(map, { idleTtlMs: () => 600_000, usable: () => Effect.succeed(true) })
      expect(yield* Effect.flip(holds.use("k", Effect.succeed))).toBe("cannot start")
      expect(yield* holds.use("k", Effect.succeed)).toBe(2)
      expect(yield* holds.use("k", Effect.succeed)).toBe(2)
    }))

  it.effect("a hold's sweeper ends with the hold, and a hold kept until dropped has none", () =>
    Effect.gen(function*() {
      const clock = yield* Clock.Clock
      let sleeping = 0
      const counting: Clock.Clock = {
        ...clock,
        sleep: (duration) => Effect.suspend(() => (sleeping++, Effect.ensuring(clock.sleep(duration), Effect.sync(() => sleeping--))))
      }
      yield* Effect.gen(function*() {
        const map = yield* RcMap.make({ lookup: (key: string) => Effect.succeed(key), idleTimeToLive: (key: string) => Duration.millis(key === "kept" ? Infinity : 100) })
        const holds = yield* RcMapHolds.make(map, { idleTtlMs: (key) => (key === "kept" ? Infinity : 100), usable: () => Effect.succeed(true) })
        yield* holds.use("kept", Effect.succeed)
        yield* settle
        expect(sleeping, "a hold without a time-to-live").toBe(0)
        yield* holds.use("k", Effect.succeed)
        yield* settle
        expect(sleeping, "a hold with a time-to-live").toBe(1)
        yield* holds.drop("k")
        yield* settle
        expect(sleeping, "after the drop").toBe(0)
      }).pipe(Effect.provideService(Clock.Clock, counting))
    }))

  it.effect("a dropAll waiting on a slow close leaves alone a hold taken meanwhile under a key it had already ended", () =>
    Effect.gen(function*() {
      const slow = yield* Deferred.make<void>()
      let opened = 0
      const map = yield* RcMap.make({
        lookup: (key: string) =>
          Effect.as(Effect.addFinalizer(() => (key === "a" ? Deferred.await(slow) : Effect.void)), `${key}${++opened}`),
        idleTimeToLive: Duration.seconds(1)
      })
      const holds = yield* RcMapHolds.make(map, { idleTtlMs: () => 1000, usable: () => Effect.succeed(true) })
      yield* holds.use("a", Effect.succeed)
      yield* holds.use("b", Effect.succeed)
      const dropping = yield* Effect.forkChild(holds.dropAll)
      yield* settle
      yield* holds.drop("b")
      expect(yield* holds.use("b", Effect.succeed)).toBe("b3")
      yield* Deferred.succeed(slow, undefined)
      yield* Fiber.join(dropping)
      expect(yield* RcMap.has(map, "b")).toBe(true)
      expect(yield* holds.use("b", Effect.succeed)).toBe("b3")
    }))
})
