/**
 * Spare kernels: runners spawned ahead of need, per pool (a backend, interpreter and
 * confinement the registry names), that have run only the prelude, so a new session's
 * first cell skips the process start. A spare is handed out once (`take`) and then bound
 * by its taker (init with the session's cwd and env); until then nothing about a session
 * is in it.
 *
 * A take that finds none ready waits for the spares of its pool already spawning when it
 * came (a spawn is the process start alone, shorter than a fresh kernel's start up), so a
 * session's first cell sent right after the pool began filling still gets a spare; it does
 * not wait for spawns that began after it.
 *
 * Spares are supervised: one that dies before it is taken is dropped and replaced, and a
 * pool whose spares fail to spawn or die unclaimed `MAX_FAILURES` times in a row stops
 * refilling (a warning is logged). `shutdown` ends every spare; the layer's scope does too.
 */
import { Deferred, Effect, Exit, Option, Scope } from "effect"
import type { PendingKernel } from "../../kernel/Kernel.ts"

/** Spawn failures or unclaimed deaths in a row after which a pool stops refilling. */
export const MAX_FAILURES = 3

/** A spare as spawned: the runner, and what its taker needs to bind it. */
export interface SpawnedSpare<A> {
  readonly pending: PendingKernel
  readonly meta: A
}

/** A spare handed out: ending it (`release`: shut the runner down, close its scope) is now the taker's. */
export interface TakenSpare<A> extends SpawnedSpare<A> {
  readonly release: Effect.Effect<void>
}

/** One pool: its id, how many spares to keep, and how to spawn one (`undefined`: this pool cannot have spares). */
export interface PoolSpec<A> {
  readonly id: string
  readonly size: number
  readonly spawn: Effect.Effect<SpawnedSpare<A> | undefined, unknown, Scope.Scope>
}

/** The pools of one registry. */
export interface SparePool<A> {
  /** A live spare of pool `id`, removed from the pool, waiting for the spares spawning when it came; none when none of them is ready. */
  readonly take: (id: string) => Effect.Effect<Option.Option<TakenSpare<A>>>
  /** Starts spawning spares until the pool holds `spec.size` (ready or spawning); returns at once. */
  readonly fill: (spec: PoolSpec<A>) => Effect.Effect<void>
  /** How many spares of pool `id` are ready. */
  readonly ready: (id: string) => number
  /** The process ids of every ready spare. */
  readonly pids: Effect.Effect<ReadonlyArray<number>>
  /** Whether pool `id` was found unable to have spares, or stopped after failures. */
  readonly disabled: (id: string) => boolean
  /** Ends every spare, ready or spawning. */
  readonly shutdown: Effect.Effect<void>
}

interface Entry<A> extends SpawnedSpare<A> {
  readonly scope: Scope.Closeable
}

/** Shuts the runner down before its scope closes (closing the scope alone would stop its readers first). */
const release = <A>(entry: Entry<A>): Effect.Effect<void> => Effect.andThen(entry.pending.shutdown, Scope.close(entry.scope, Exit.void))

/** Builds the pools; closing the current scope ends every spare. */
export const make = <A>(): Effect.Effect<SparePool<A>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const owner = yield* Effect.scope
    const readyById = new Map<string, Array<Entry<A>>>()
    const failures = new Map<string, number>()
    const off = new Set<string>()
    /** Per pool, the serials of its spawns still running (a shutdown forgets them: they can no longer give a spare). */
    const inFlight = new Map<string, Set<number>>()
    /** Per pool, what a waiting take awaits: completed, and replaced, whenever a spawn of the pool ends. */
    const settles = new Map<string, Deferred.Deferred<void>>()
    let serial = 0
    let generation = 0

    const listOf = (id: string) => {
      let list = readyById.get(id)
      if (list === undefined) readyById.set(id, list = [])
      return list
    }

    const inFlightOf = (id: string) => {
      let spawns = inFlight.get(id)
      if (spawns === undefined) inFlight.set(id, spawns = new Set())
      return spawns
    }

    const settleOf = (id: string) => {
      let settle = settles.get(id)
      if (settle === undefined) settles.set(id, settle = Deferred.makeUnsafe<void>())
      return settle
    }

    const wake = (id: string) => {
      const settle = settleOf(id)
      settles.delete(id)
      Deferred.doneUnsafe(settle, Exit.void)
    }


    const failed = (spec: PoolSpec<A>, why: string) =>
      Effect.suspend(() => {
        const count = (failures.get(spec.id) ?? 0) + 1
        failures.set(spec.id, count)
        if (count < MAX_FAILURES) return fill(spec)
        off.add(spec.id)
        return Effect.logWarning(`spare kernels for ${spec.id.replaceAll("\u0000", " ")} stopped after ${count} failures in a row: ${why}`)
      })

    const watch = (spec: PoolSpec<A>, entry: Entry<A>) =>
      Effect.flatMap(entry.pending.dead, (cause) =>
        Effect.suspend(() => {
          // A spare taken, or ended by a take or a shutdown, has left its pool's list.
          const list = listOf(spec.id)
          const at = list.indexOf(entry)
          if (at < 0) return Effect.void
          list.splice(at, 1)
          return Effect.andThen(release(entry), failed(spec, `a spare died before it was used (${cause._tag})`))
        }))

    /** Uninterruptible, so a registry closing mid-spawn still gets the runner into the pool, which its close then ends. */
    const spawnOne = (spec: PoolSpec<A>, born: number, spawn: number) =>
      Effect.uninterruptible(Effect.ensuring(Effect.gen(function*() {
        const scope = yield* Scope.make("sequential")
        const exit = yield* Effect.exit(Scope.provide(spec.spawn, scope))
        // No longer in flight; one from before a shutdown already was not (the shutdown cleared the sets).
        inFlightOf(spec.id).delete(spawn)
        const spawned = Exit.isSuccess(exit) ? exit.value : undefined
        if (spawned === undefined || born !== generation) {
          if (spawned !== undefined) yield* spawned.pending.shutdown
          yield* Scope.close(scope, Exit.void)
          if (born !== generation) return
          if (Exit.isFailure(exit)) return yield* failed(spec, String(exit.cause))
          off.add(spec.id)
          return
        }
        const entry: Entry<A> = { ...spawned, scope }
        listOf(spec.id).push(entry)
        // Forked from the uninterruptible spawn, the watcher would inherit that and hold the pool's close until the spare died.
        yield* Effect.forkIn(Effect.interruptible(watch(spec, entry)), owner)
      }), Effect.sync(() => wake(spec.id))))

    const fill = (spec: PoolSpec<A>): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (spec.size <= 0 || off.has(spec.id)) return Effect.void
        const spawns = inFlightOf(spec.id)
        const missing = spec.size - listOf(spec.id).length - spawns.size
        if (missing <= 0) return Effect.void
        const born = generation
        const serials = Array.from({ length: missing }, () => ++serial)
        for (const spawn of serials) spawns.add(spawn)
        return Effect.forEach(serials, (spawn) => Effect.forkIn(spawnOne(spec, born, spawn), owner), { discard: true })
      })

    const take = Effect.fnUntraced(function*(id: string): Effect.fn.Return<Option.Option<TakenSpare<A>>> {
      const awaited = [...inFlightOf(id)]
      while (true) {
        const list = readyById.get(id)
        while (list !== undefined && list.length > 0) {
          const entry = list.shift()!
          if (yield* entry.pending.isAlive) {
            failures.set(id, 0)
            return Option.some({ pending: entry.pending, meta: entry.meta, release: release(entry) })
          }
          yield* release(entry)
        }
        const spawning = inFlightOf(id)
        if (!awaited.some((spawn) => spawning.has(spawn))) return Option.none()
        yield* Deferred.await(settleOf(id))
      }
    })

    const shutdown = Effect.suspend(() => {
      generation++
      const all = [...readyById.values()].flat()
      readyById.clear()
      inFlight.clear()
      for (const id of [...settles.keys()]) wake(id)
      return Effect.forEach(all, release, { discard: true, concurrency: "unbounded" })
    })
    yield* Effect.addFinalizer(() => shutdown)

    return {
      take,
      fill,
      ready: (id) => readyById.get(id)?.length ?? 0,
      pids: Effect.sync(() => [...readyById.values()].flat().map((entry) => entry.pending.pid)),
      disabled: (id) => off.has(id),
      shutdown
    } satisfies SparePool<A>
  })
