/**
 * One reference to an `RcMap` entry held between uses of its key, so the next use takes
 * the value without a scope or a lease of its own: per use, `Effect.scoped(RcMap.get)`
 * (a scope, a finalizer, the map's reference count and lookup) costs more than the rest
 * of a warm cell's bookkeeping. A hold ends when its key has been idle for its
 * time-to-live with no use running, or when dropped; its entry is invalidated first, so
 * the entry closes then (once the uses running at that moment end) rather than after a
 * second time-to-live of the map's own. A lookup that fails is not kept: the key's next
 * use looks it up again. A key whose time-to-live is zero is not held.
 */
import { Clock, Effect, Equal, Exit, type Fiber, RcMap, Scope } from "effect"

interface Hold<A> {
  readonly value: A
  readonly scope: Scope.Closeable
  readonly idleTtlMs: number
  using: number
  idleUntil: number
  dropped: boolean
  sweeper: Fiber.Fiber<void> | undefined
}

/** The holds over one map. */
export interface RcMapHolds<K, A, E> {
  /** Runs `use` with `key`'s value: the held one when it is still usable, else one taken from the map (and held). */
  readonly use: <B, E2, R>(key: K, use: (value: A) => Effect.Effect<B, E2, R>) => Effect.Effect<B, E | E2, R>
  /** Ends `key`'s hold and invalidates its entry, which closes once the uses running now end. */
  readonly drop: (key: K) => Effect.Effect<void>
  /** Ends every hold. */
  readonly dropAll: Effect.Effect<void>
}

/** What a map's holds need: each key's idle time-to-live, and whether a held value may still be used. */
export interface RcMapHoldsOptions<K, A> {
  readonly idleTtlMs: (key: K) => number
  readonly usable: (value: A) => Effect.Effect<boolean>
}

/**
 * Holds over `map`, keyed by identity for the hot lookup (callers reuse their key objects)
 * and by `Equal` when dropping; idle holds are swept by fibers in the current scope.
 */
export const make = <K, A, E>(
  map: RcMap.RcMap<K, A, E>,
  options: RcMapHoldsOptions<K, A>
): Effect.Effect<RcMapHolds<K, A, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const owner = yield* Effect.scope
    const clock = yield* Clock.Clock
    const holds = new Map<K, Hold<A>>()

    const release = (hold: Hold<A>): Effect.Effect<void> =>
      hold.dropped && hold.using === 0 ? Scope.close(hold.scope, Exit.void) : Effect.void

    const end = (key: K, hold: Hold<A>): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (hold.dropped) return Effect.void
        hold.dropped = true
        if (holds.get(key) === hold) holds.delete(key)
        const sweeper = hold.sweeper
        hold.sweeper = undefined
        if (sweeper !== undefined) sweeper.interruptUnsafe()
        return Effect.andThen(RcMap.invalidate(map, key), release(hold))
      })

    const sweep = (key: K, hold: Hold<A>): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (hold.dropped) return Effect.void
        const remaining = hold.idleUntil - clock.currentTimeMillisUnsafe()
        if (hold.using === 0 && remaining <= 0) {
          hold.sweeper = undefined
          return Effect.uninterruptible(end(key, hold))
        }
        return Effect.flatMap(Effect.sleep(hold.using > 0 ? hold.idleTtlMs : remaining), () => sweep(key, hold))
      })

    const take = (key: K): Effect.Effect<Hold<A>, E> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Scope.make(), (scope) =>
          restore(Scope.provide(RcMap.get(map, key), scope)).pipe(
            // The map keeps a failed lookup for the key's time-to-live; dropped here, the next use looks again.
            Effect.onError(() => Effect.andThen(RcMap.invalidate(map, key), Scope.close(scope, Exit.void))),
            Effect.flatMap((value) => {
              const raced = holds.get(key)
              if (raced !== undefined) return Effect.as(Scope.close(scope, Exit.void), raced)
              const idleTtlMs = options.idleTtlMs(key)
              const idleUntil = clock.currentTimeMillisUnsafe() + idleTtlMs
              const hold: Hold<A> = { value, scope, idleTtlMs, using: 0, idleUntil, dropped: false, sweeper: undefined }
              holds.set(key, hold)
              if (!Number.isFinite(idleTtlMs)) return Effect.succeed(hold)
              return Effect.as(
                Effect.tap(Effect.forkIn(Effect.interruptible(sweep(key, hold)), owner), (fiber) => Effect.sync(() => (hold.sweeper = fiber))),
                hold
              )
            })
          ))
      )

    const useHold = <B, E2, R>(hold: Hold<A>, use: (value: A) => Effect.Effect<B, E2, R>): Effect.Effect<B, E2, R> =>
      Effect.suspend(() => {
        hold.using++
        return Effect.onExit(use(hold.value), () =>
          Effect.suspend(() => {
            hold.using--
            hold.idleUntil = clock.currentTimeMillisUnsafe() + hold.idleTtlMs
            return release(hold)
          }))
      })

    const use = <B, E2, R>(key: K, use: (value: A) => Effect.Effect<B, E2, R>): Effect.Effect<B, E | E2, R> =>
      Effect.suspend(() => {
        const held = holds.get(key)
        if (held === undefined) {
          return options.idleTtlMs(key) > 0
            ? Effect.flatMap(take(key), (hold) => useHold(hold, use))
            : Effect.scoped(Effect.flatMap(RcMap.get(map, key), use))
        }
        return Effect.flatMap(options.usable(held.value), (usable) =>
          usable
            ? useHold(held, use)
            : Effect.andThen(end(key, held), Effect.flatMap(take(key), (hold) => useHold(hold, use))))
      })

    const drop = (key: K): Effect.Effect<void> =>
      Effect.suspend(() => {
        const found = [...holds].filter(([held]) => Equal.equals(held, key))
        return found.length === 0
          ? RcMap.invalidate(map, key)
          : Effect.forEach(found, ([held, hold]) => end(held, hold), { discard: true })
      })

    const dropAll = Effect.suspend(() => Effect.forEach([...holds], ([key, hold]) => end(key, hold), { discard: true }))

    yield* Effect.addFinalizer(() => dropAll)
    return { use, drop, dropAll } satisfies RcMapHolds<K, A, E>
  })
