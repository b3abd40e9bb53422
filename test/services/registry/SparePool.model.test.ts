/**
 * The spare pools against a reference model written here, independently of the module:
 * plain records of each pool (its size, ready spares in order, spawns in flight, failures
 * in a row, whether it stopped, the takes waiting for the spawns in flight when they came)
 * and of each spare (ready, taken or gone; alive; how often it
 * was shut down; whether its scope closed), with a rule per event: a pool is filled, a spawn
 * ends (a runner, a failure, or "this pool cannot have spares"), a spare is taken, dies (seen
 * by its watcher, or only by `isAlive`), a taken spare is released, the pools shut down.
 * Compared after every event over random sequences, then the pools' scope closes with spawns
 * still in flight; plus progress properties a do-nothing pool fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Deferred, Duration, Effect, Exit, Fiber, Logger, Option, References, Scope } from "effect"
import { TestClock } from "effect/testing"
import { DeathCause } from "../../../src/kernel/Lifecycle.ts"
import * as SparePool from "../../../src/services/registry/SparePool.ts"
import { constantFrom, integer, oneOf } from "../../kernel/arbitraries.ts"

type PoolId = "p" | "q"
type Outcome = "ok" | "fail" | "none"

/** Pool p keeps two spares, q one. */
const SIZE: Record<PoolId, number> = { p: 2, q: 1 }
const POOLS = Object.keys(SIZE) as ReadonlyArray<PoolId>

type Step =
  | { readonly _tag: "fill"; readonly pool: PoolId }
  | { readonly _tag: "spawned"; readonly pick: number; readonly outcome: Outcome }
  | { readonly _tag: "take"; readonly pool: PoolId }
  | { readonly _tag: "die"; readonly pick: number; readonly watched: boolean }
  | { readonly _tag: "release"; readonly pick: number }
  | { readonly _tag: "shutdown" }

/** What model and implementation are compared on. */
interface Seen {
  /** Per spawn, in the order they started: its pool, how often its runner was shut down, whether its scope closed. */
  readonly spares: ReadonlyArray<{ readonly pool: PoolId; readonly shutdowns: number; readonly closed: boolean }>
  readonly ready: Record<PoolId, number>
  readonly disabled: Record<PoolId, boolean>
  /** The pids `pids` lists, sorted. */
  readonly pids: ReadonlyArray<number>
  /** Per pool, per take in the order they ended, the spare it handed out (its spawn's index), or null. */
  readonly takes: Record<PoolId, ReadonlyArray<number | null>>
  /** Per pool, the takes still waiting. */
  readonly waiting: Record<PoolId, number>
  readonly warnings: number
}

const pidOf = (index: number) => 1000 + index

interface ModelSpare {
  readonly pool: PoolId
  readonly born: number
  phase: "spawning" | "ready" | "taken" | "gone"
  alive: boolean
  /** Whether its death was announced (`dead` completed). */
  announced: boolean
  shutdowns: number
  closed: boolean
}

/** The reference model, on plain records. */
class Model {
  readonly spares: Array<ModelSpare> = []
  readonly pools: Record<PoolId, { ready: Array<number>; spawning: number; failures: number; off: boolean; inFlight: Set<number>; waiting: Array<Set<number>> }> = {
    p: { ready: [], spawning: 0, failures: 0, off: false, inFlight: new Set(), waiting: [] },
    q: { ready: [], spawning: 0, failures: 0, off: false, inFlight: new Set(), waiting: [] }
  }
  readonly takes: Record<PoolId, Array<number | null>> = { p: [], q: [] }
  generation = 0
  warnings = 0

  /** Ends a spare that has a runner: shut down (which announces its death), then its scope closed. */
  private end(spare: ModelSpare): void {
    spare.shutdowns++
    spare.alive = false
    spare.announced = true
    spare.closed = true
    spare.phase = "gone"
  }

  fill(id: PoolId): void {
    const pool = this.pools[id]
    if (pool.off) return
    const missing = SIZE[id] - pool.ready.length - pool.spawning
    for (let i = 0; i < missing; i++) {
      pool.spawning++
      pool.inFlight.add(this.spares.length)
      this.spares.push({ pool: id, born: this.generation, phase: "spawning", alive: true, announced: false, shutdowns: 0, closed: false })
    }
  }

  private failed(id: PoolId): void {
    const pool = this.pools[id]
    pool.failures++
    if (pool.failures < SparePool.MAX_FAILURES) return this.fill(id)
    pool.off = true
    this.warnings++
  }

  /** A spawn ends; then the takes waiting on its pool try again, in the order they came. */
  spawned(index: number, outcome: Outcome): void {
    this.settle(index, outcome)
    const pool = this.pools[this.spares[index]!.pool]
    pool.inFlight.delete(index)
    this.wake(this.spares[index]!.pool)
  }

  private wake(id: PoolId): void {
    const pool = this.pools[id]
    const waiting = pool.waiting
    pool.waiting = []
    for (const awaited of waiting) if (!this.tryTake(id, awaited)) pool.waiting.push(awaited)
  }

  private settle(index: number, outcome: Outcome): void {
    const spare = this.spares[index]!
    const pool = this.pools[spare.pool]
    const current = spare.born === this.generation
    if (current) pool.spawning--
    if (outcome === "ok" && current) {
      spare.phase = "ready"
      pool.ready.push(index)
      return
    }
    if (outcome === "ok") this.end(spare)
    spare.closed = true
    spare.phase = "gone"
    if (!current) return
    if (outcome === "none") pool.off = true
    else this.failed(spare.pool)
  }

  /** A take: a ready spare, else it waits for the spawns in flight now, else none. */
  take(id: PoolId): void {
    const awaited = new Set(this.pools[id].inFlight)
    if (!this.tryTake(id, awaited)) this.pools[id].waiting.push(awaited)
  }

  /** Whether a take awaiting `awaited` ends now, with a live ready spare or with none. */
  private tryTake(id: PoolId, awaited: Set<number>): boolean {
    const pool = this.pools[id]
    for (let index = pool.ready.shift(); index !== undefined; index = pool.ready.shift()) {
      const spare = this.spares[index]!
      if (spare.alive) {
        spare.phase = "taken"
        pool.failures = 0
        this.takes[id].push(index)
        return true
      }
      this.end(spare)
    }
    if ([...awaited].some((index) => pool.inFlight.has(index))) return false
    this.takes[id].push(null)
    return true
  }

  /** A spare's process dies; with `watched`, its death is announced too, else only `isAlive` says so. */
  die(index: number, watched: boolean): void {
    const spare = this.spares[index]!
    spare.alive = false
    if (!watched) return
    spare.announced = true
    if (spare.phase !== "ready") return
    const ready = this.pools[spare.pool].ready
    ready.splice(ready.indexOf(index), 1)
    this.end(spare)
    this.failed(spare.pool)
  }

  release(index: number): void {
    this.end(this.spares[index]!)
  }

  shutdown(): void {
    this.generation++
    for (const pool of Object.values(this.pools)) {
      for (const index of pool.ready) this.end(this.spares[index]!)
      pool.ready = []
      pool.spawning = 0
      pool.inFlight.clear()
    }
    for (const id of POOLS) this.wake(id)
  }

  seen(): Seen {
    return {
      spares: this.spares.map(({ closed, pool, shutdowns }) => ({ pool, shutdowns, closed })),
      ready: { p: this.pools.p.ready.length, q: this.pools.q.ready.length },
      disabled: { p: this.pools.p.off, q: this.pools.q.off },
      pids: POOLS.flatMap((id) => this.pools[id].ready).map(pidOf).sort((a, b) => a - b),
      takes: { p: [...this.takes.p], q: [...this.takes.q] },
      waiting: { p: this.pools.p.waiting.length, q: this.pools.q.waiting.length },
      warnings: this.warnings
    }
  }
}

/** Lets forked fibers (spawns, watchers, refills) run to their next wait. */
const settle = Effect.repeat(Effect.yieldNow, { times: 20 })

interface Fake {
  readonly pool: PoolId
  readonly outcome: Deferred.Deferred<Outcome>
  readonly dead: Deferred.Deferred<DeathCause>
  given: Outcome | undefined
  alive: boolean
  shutdowns: number
  closed: boolean
}

/** Fake runner `index` as a spawned spare: alive until killed or shut down (after `delay`), counting its shutdowns. */
const fakeSpare = (
  index: number,
  fake: { alive: boolean; shutdowns: number; readonly dead: Deferred.Deferred<DeathCause> },
  delay: Effect.Effect<void> = Effect.void
): SparePool.SpawnedSpare<number> => ({
  meta: index,
  pending: {
    pid: pidOf(index),
    isAlive: Effect.sync(() => fake.alive),
    dead: Deferred.await(fake.dead),
    shutdown: Effect.andThen(
      delay,
      Effect.suspend(() => {
        fake.shutdowns++
        fake.alive = false
        return Deferred.succeed(fake.dead, DeathCause.Shutdown())
      })
    ),
    start: () => Effect.die("a spare is not started in these tests")
  }
})

/** The implementation side: pools whose spawns are fake runners the test ends, dies and watches. */
const makeSystem = Effect.gen(function*() {
  const fakes: Array<Fake> = []
  const takes: Record<PoolId, Array<number | null>> = { p: [], q: [] }
  const waiting: Record<PoolId, number> = { p: 0, q: 0 }
  const taken = new Map<number, SparePool.TakenSpare<number>>()
  let warnings = 0
  const scope = yield* Scope.make()
  const pool = yield* Scope.provide(SparePool.make<number>(), scope)

  const spawn = (id: PoolId): Effect.Effect<SparePool.SpawnedSpare<number> | undefined, string, Scope.Scope> =>
    Effect.gen(function*() {
      const index = fakes.length
      const fake: Fake = {
        pool: id,
        outcome: yield* Deferred.make<Outcome>(),
        dead: yield* Deferred.make<DeathCause>(),
        given: undefined,
        alive: true,
        shutdowns: 0,
        closed: false
      }
      fakes.push(fake)
      yield* Effect.addFinalizer(() => Effect.sync(() => void (fake.closed = true)))
      const outcome = yield* Deferred.await(fake.outcome)
      if (outcome === "fail") return yield* Effect.fail("the runner did not start")
      if (outcome === "none") return undefined
      return fakeSpare(index, fake)
    })
  const specs: Record<PoolId, SparePool.PoolSpec<number>> = {
    p: { id: "p", size: SIZE.p, spawn: spawn("p") },
    q: { id: "q", size: SIZE.q, spawn: spawn("q") }
  }

  const spawning = () => fakes.flatMap((fake, index) => (fake.given === undefined ? [index] : []))
  const living = () => fakes.flatMap((fake, index) => (fake.given === "ok" && !Deferred.isDoneUnsafe(fake.dead) && !fake.closed ? [index] : []))
  const pickFrom = (indices: ReadonlyArray<number>, pick: number) => (indices.length === 0 ? undefined : indices[pick % indices.length])

  const resolve = (index: number, outcome: Outcome) =>
    Effect.suspend(() => {
      fakes[index]!.given = outcome
      return Deferred.succeed(fakes[index]!.outcome, outcome)
    })

  const apply = (step: Step, model: Model): Effect.Effect<void> =>
    Effect.gen(function*() {
      switch (step._tag) {
        case "fill":
          model.fill(step.pool)
          return expect(yield* pool.fill(specs[step.pool])).toBeUndefined()
        case "spawned": {
          const index = pickFrom(spawning(), step.pick)
          if (index === undefined) return
          model.spawned(index, step.outcome)
          return yield* resolve(index, step.outcome)
        }
        case "take": {
          model.take(step.pool)
          const id = step.pool
          waiting[id]++
          yield* Effect.forkChild(Effect.flatMap(pool.take(id), (got) =>
            Effect.sync(() => {
              waiting[id]--
              if (Option.isNone(got)) return void takes[id].push(null)
              takes[id].push(got.value.meta)
              taken.set(got.value.meta, got.value)
            })))
          return
        }
        case "die": {
          const index = pickFrom(living(), step.pick)
          if (index === undefined) return
          model.die(index, step.watched)
          fakes[index]!.alive = false
          if (step.watched) yield* Deferred.succeed(fakes[index]!.dead, DeathCause.Exited({ exit: { code: 1, signal: null } }))
          return
        }
        case "release": {
          const index = pickFrom([...taken.keys()], step.pick)
          if (index === undefined) return
          model.release(index)
          const spare = taken.get(index)!
          taken.delete(index)
          return yield* spare.release
        }
        case "shutdown":
          model.shutdown()
          return expect(yield* pool.shutdown).toBeUndefined()
      }
    }).pipe(Effect.andThen(settle))

  const seen = (): Seen => ({
    spares: fakes.map(({ closed, pool, shutdowns }) => ({ pool, shutdowns, closed })),
    ready: { p: pool.ready("p"), q: pool.ready("q") },
    disabled: { p: pool.disabled("p"), q: pool.disabled("q") },
    pids: [...Effect.runSync(pool.pids)].sort((a, b) => a - b),
    takes: { p: [...takes.p], q: [...takes.q] },
    waiting: { ...waiting },
    warnings
  })
  const logger = Logger.layer([Logger.make(({ logLevel }) => void (logLevel === "Warn" && warnings++))])
  return { pool, scope, fakes, taken, waiting, specs, spawning, resolve, apply, seen, logger }
})

const pool = constantFrom<PoolId>(...POOLS)
const pick = integer(0, 7)
const steps: Arbitrary.Arbitrary<Array<Step>> = Arbitrary.array(
  oneOf<Step>(
    Arbitrary.map(pool, (id) => ({ _tag: "fill", pool: id })),
    Arbitrary.map(Arbitrary.all([pick, constantFrom<Outcome>("ok", "ok", "ok", "fail", "fail", "none")]), ([p, outcome]) => ({ _tag: "spawned", pick: p, outcome })),
    Arbitrary.map(pick, (p) => ({ _tag: "spawned", pick: p, outcome: "ok" })),
    Arbitrary.map(pool, (id) => ({ _tag: "take", pool: id })),
    Arbitrary.map(Arbitrary.all([pick, constantFrom(true, true, false)]), ([p, watched]) => ({ _tag: "die", pick: p, watched })),
    Arbitrary.map(pick, (p) => ({ _tag: "release", pick: p })),
    Arbitrary.Constant({ _tag: "shutdown" } as const)
  ),
  { maxLength: 40 }
)

describe("SparePool against its model", () => {
  it.effect.prop("agrees after every event, and its scope's close ends every spare, even one spawning then", [steps], ([life]) =>
    Effect.gen(function*() {
      const system = yield* makeSystem
      const model = new Model()
      yield* Effect.gen(function*() {
        for (const step of life) {
          yield* system.apply(step, model)
          expect(system.seen(), JSON.stringify(step)).toEqual(model.seen())
        }
        const closing = yield* Effect.forkChild(Scope.close(system.scope, Exit.void))
        yield* settle
        for (const index of system.spawning()) yield* system.resolve(index, "ok")
        yield* Fiber.join(closing)
        yield* settle
        expect(system.waiting).toEqual({ p: 0, q: 0 })
        for (const spare of system.taken.values()) yield* spare.release
        expect(system.fakes.map(({ closed, given, shutdowns }) => ({ given, closed, shutdowns }))).toEqual(
          system.fakes.map(({ given }) => ({ given, closed: true, shutdowns: given === "ok" ? 1 : 0 }))
        )
      }).pipe(Effect.provide(system.logger), Effect.provideService(References.MinimumLogLevel, "All"))
    }), { arbitrary: { size: 40, runs: 200 } })
})

/** A pool of `size` whose n-th spawn ends at once as `script[n]` says (a runner when the script has run out). */
const scriptedPool = (size: number, script: ReadonlyArray<Outcome> = [], options: { readonly id?: string; readonly shutdownMs?: number } = {}) =>
  Effect.gen(function*() {
    const fakes: Array<{ alive: boolean; shutdowns: number; closed: boolean; readonly dead: Deferred.Deferred<DeathCause>; readonly closing: Array<string> }> = []
    const scope = yield* Scope.make()
    const pool = yield* Scope.provide(SparePool.make<number>(), scope)
    const spawn = Effect.gen(function*() {
      const index = fakes.length
      const fake = { alive: true, shutdowns: 0, closed: false, dead: yield* Deferred.make<DeathCause>(), closing: [] as Array<string> }
      fakes.push(fake)
      yield* Effect.addFinalizer(() => Effect.sync(() => void (fake.closed = true, fake.closing.push("acquired first"))))
      yield* Effect.addFinalizer(() => Effect.andThen(Effect.yieldNow, Effect.sync(() => void fake.closing.push("acquired last"))))
      const outcome = script[index] ?? "ok"
      if (outcome === "fail") return yield* Effect.fail("the runner did not start")
      if (outcome === "none") return undefined
      return fakeSpare(index, fake, options.shutdownMs === undefined ? Effect.void : Effect.sleep(options.shutdownMs))
    })
    const spec: SparePool.PoolSpec<number> = { id: options.id ?? "p", size, spawn }
    const kill = (index: number) =>
      Effect.andThen(Effect.sync(() => void (fakes[index]!.alive = false)), Deferred.succeed(fakes[index]!.dead, DeathCause.Exited({ exit: { code: 1, signal: null } })))
    return { pool, scope, fakes, spec, fill: Effect.andThen(pool.fill(spec), settle), kill, ready: () => pool.ready(spec.id) }
  })

/** A pool id as the registry makes them: backend, interpreter and bin dir joined by NUL. */
const POOL_ID = "python\u0000/usr/bin/python3\u0000/srv/venv/bin"

describe("SparePool progress", () => {
  it.effect.prop(
    "a taken spare is replaced at the next fill, up to the configured count and never past it",
    [integer(1, 3), integer(1, 6), integer(0, 3)],
    ([size, taking, extraFills]) =>
      Effect.gen(function*() {
        const { fakes, fill, pool } = yield* scriptedPool(size)
        yield* fill
        expect(pool.ready("p")).toBe(size)
        const handed = new Set<number>()
        for (let i = 0; i < taking; i++) {
          const taken = yield* pool.take("p")
          expect(Option.isSome(taken)).toBe(true)
          handed.add(Option.getOrThrow(taken).meta)
          expect(pool.ready("p")).toBe(size - 1)
          yield* fill
          expect(pool.ready("p")).toBe(size)
        }
        for (let i = 0; i < extraFills; i++) yield* fill
        expect(handed.size).toBe(taking)
        expect(fakes).toHaveLength(size + taking)
        expect(pool.ready("p")).toBe(size)
        expect([...(yield* pool.pids)].sort((a, b) => a - b)).toEqual(Array.from({ length: size }, (_, i) => pidOf(taking + i)))
      })
  )

  it.effect("spawns still running at a shutdown are ended when they finish and do not count against the next fill", () =>
    Effect.gen(function*() {
      const system = yield* makeSystem
      yield* Effect.andThen(system.pool.fill(system.specs.p), settle)
      const before = system.spawning()
      expect(before).toHaveLength(SIZE.p)
      yield* system.pool.shutdown
      for (const index of before) yield* system.resolve(index, "ok")
      yield* settle
      expect(system.fakes.map(({ closed, shutdowns }) => ({ closed, shutdowns }))).toEqual(before.map(() => ({ closed: true, shutdowns: 1 })))
      yield* Effect.andThen(system.pool.fill(system.specs.p), settle)
      expect(system.spawning()).toHaveLength(SIZE.p)
      for (const index of system.spawning()) yield* system.resolve(index, "ok")
      yield* Effect.andThen(system.pool.fill(system.specs.p), settle)
      expect(system.pool.ready("p")).toBe(SIZE.p)
      expect(system.spawning()).toEqual([])
    }))

  it.effect.prop(
    "shutdown ends every ready spare once and closes its scope, a taken spare stays with its taker, and the next fill starts afresh",
    [integer(1, 3), integer(0, 3)],
    ([size, taking]) =>
      Effect.gen(function*() {
        const { fakes, fill, pool } = yield* scriptedPool(size)
        yield* fill
        const taken: Array<SparePool.TakenSpare<number>> = []
        for (let i = 0; i < Math.min(taking, size); i++) taken.push(Option.getOrThrow(yield* pool.take("p")))
        yield* pool.shutdown
        yield* settle
        expect(pool.ready("p")).toBe(0)
        expect(yield* pool.pids).toEqual([])
        expect(fakes.map(({ closed, shutdowns }) => ({ closed, shutdowns }))).toEqual(
          fakes.map((_, index) => (taken.some((spare) => spare.meta === index) ? { closed: false, shutdowns: 0 } : { closed: true, shutdowns: 1 }))
        )
        for (const spare of taken) yield* spare.release
        expect(fakes.every((fake) => fake.closed && fake.shutdowns === 1)).toBe(true)
        yield* fill
        expect(pool.ready("p")).toBe(size)
        expect(fakes).toHaveLength(size * 2)
      })
  )

  it.effect.prop(
    "a spare that dies unclaimed or fails to spawn is replaced, until MAX_FAILURES in a row stop the pool with one warning; a take resets the count",
    [Arbitrary.array(constantFrom("die", "fail", "take"), { maxLength: 10 })],
    ([events]) =>
      Effect.gen(function*() {
        // events[n] is what becomes of the pool's n-th spawn: it fails, or its spare dies unclaimed, or is taken.
        let inARow = 0
        let stoppedAt: number | undefined
        for (const [n, event] of events.entries()) {
          inARow = event === "take" ? 0 : inARow + 1
          if (inARow === SparePool.MAX_FAILURES) {
            stoppedAt = n
            break
          }
        }
        const warnings: Array<string> = []
        const { fakes, fill, kill, pool } = yield* scriptedPool(1, events.map((event) => (event === "fail" ? "fail" : "ok")), { id: POOL_ID })
        yield* Effect.gen(function*() {
          yield* fill
          for (const [n, event] of events.entries()) {
            if (n === stoppedAt) break
            if (event === "fail") continue
            if (event === "die") yield* Effect.andThen(kill(n), settle)
            if (event === "take") {
              expect(Option.getOrThrow(yield* pool.take(POOL_ID)).meta).toBe(n)
              yield* fill
            }
            let next = n + 1
            while (events[next] === "fail") next++
            const stopped = stoppedAt !== undefined && stoppedAt < next
            expect(yield* pool.pids, `after spawn ${n}`).toEqual(stopped ? [] : [pidOf(next)])
          }
          if (stoppedAt !== undefined && events[stoppedAt] === "die") yield* Effect.andThen(kill(stoppedAt), settle)
        }).pipe(
          Effect.provide(Logger.layer([Logger.make(({ logLevel, message }) => void (logLevel === "Warn" && warnings.push(String(message))))])),
          Effect.provideService(References.MinimumLogLevel, "All")
        )
        expect(pool.disabled(POOL_ID)).toBe(stoppedAt !== undefined)
        expect(warnings).toHaveLength(stoppedAt === undefined ? 0 : 1)
        if (stoppedAt !== undefined) {
          const why = events[stoppedAt] === "die" ? "a spare died before it was used \\(Exited\\)" : ".*the runner did not start"
          expect(warnings[0]).toMatch(new RegExp(`^spare kernels for python /usr/bin/python3 /srv/venv/bin stopped after ${SparePool.MAX_FAILURES} failures in a row: ${why}`, "s"))
        }
        expect(fakes).toHaveLength(stoppedAt === undefined ? events.length + 1 : stoppedAt + 1)
        expect(pool.ready(POOL_ID)).toBe(stoppedAt === undefined ? 1 : 0)
        yield* fill
        expect(fakes).toHaveLength(stoppedAt === undefined ? events.length + 1 : stoppedAt + 1)
      })
  )

  it.effect("a take finding none ready waits, suspended, for the spawns in flight when it came, and takes the first to be ready", () =>
    Effect.gen(function*() {
      const system = yield* makeSystem
      // A take that polled instead of waiting would never give the thread back here.
      const take = (id: PoolId) => Effect.forkChild(system.pool.take(id).pipe(Effect.provideService(References.PreventSchedulerYield, true)))
      yield* Effect.andThen(system.pool.fill(system.specs.p), settle)
      const first = yield* take("p")
      yield* settle
      expect(first.pollUnsafe()).toBeUndefined()
      yield* Effect.andThen(system.resolve(1, "ok"), settle)
      expect(Option.getOrThrow(yield* Fiber.join(first)).meta).toBe(1)
      const second = yield* take("p")
      yield* settle
      expect(second.pollUnsafe()).toBeUndefined()
      yield* Effect.andThen(system.resolve(0, "ok"), settle)
      expect(Option.getOrThrow(yield* Fiber.join(second)).meta).toBe(0)
      expect(system.pool.ready("p")).toBe(0)
    }))

  it.effect("a waiting take does not wait for the spawn that replaces a failed one, nor past a shutdown", () =>
    Effect.gen(function*() {
      const system = yield* makeSystem
      yield* Effect.andThen(system.pool.fill(system.specs.q), settle)
      const first = yield* Effect.forkChild(system.pool.take("q"))
      yield* settle
      expect(first.pollUnsafe()).toBeUndefined()
      yield* Effect.andThen(system.resolve(0, "fail"), settle)
      expect(Option.isNone(yield* Fiber.join(first))).toBe(true)
      expect(system.spawning()).toEqual([1])
      const second = yield* Effect.forkChild(system.pool.take("q"))
      yield* settle
      expect(second.pollUnsafe()).toBeUndefined()
      yield* Effect.andThen(system.pool.shutdown, settle)
      expect(Option.isNone(yield* Fiber.join(second))).toBe(true)
    }))

  it.effect("a take ends a ready spare found dead whose death was not announced, and hands out the next", () =>
    Effect.gen(function*() {
      const { fakes, fill, pool } = yield* scriptedPool(2)
      yield* fill
      const [front, next] = (yield* pool.pids).map((pid) => pid - pidOf(0))
      fakes[front!]!.alive = false
      expect(Option.getOrThrow(yield* pool.take("p")).meta).toBe(next)
      expect(fakes[front!]).toMatchObject({ shutdowns: 1, closed: true })
      expect(pool.ready("p")).toBe(0)
    }))

  it.effect("a fill with a smaller size ends no spare and does not count the surplus against a later fill", () =>
    Effect.gen(function*() {
      const { fakes, pool, ready, spec } = yield* scriptedPool(3)
      yield* Effect.andThen(pool.fill(spec), settle)
      yield* Effect.andThen(pool.fill({ ...spec, size: 1 }), settle)
      expect(ready()).toBe(3)
      yield* Effect.andThen(pool.fill(spec), settle)
      expect(fakes).toHaveLength(3)
      expect(fakes.every((fake) => fake.shutdowns === 0)).toBe(true)
    }))

  it.effect("shutdown ends the ready spares together, not one after another, each closing what it acquired last first", () =>
    Effect.gen(function*() {
      const { fakes, fill, pool } = yield* scriptedPool(3, [], { shutdownMs: 1000 })
      yield* fill
      const shutting = yield* Effect.forkChild(pool.shutdown)
      yield* settle
      yield* TestClock.adjust(Duration.millis(1000))
      yield* settle
      expect(fakes.map((fake) => fake.shutdowns)).toEqual([1, 1, 1])
      yield* Fiber.join(shutting)
      for (const fake of fakes) expect(fake.closing).toEqual(["acquired last", "acquired first"])
    }))
})
