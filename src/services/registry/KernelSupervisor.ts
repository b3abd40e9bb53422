/**
 * Supervision of the registry's kernels: each started kernel is watched by a fiber that
 * wakes the moment the kernel dies. A death the registry did not ask for (the process
 * exited, or was killed after ignoring SIGINT) evicts the kernel's entry at once and is
 * recorded (a log line and a `kernel.evicted` span with the cause as an event), so the
 * next call starts a replacement instead of finding a corpse.
 */
import { Effect, FiberSet, MutableHashMap, type Scope } from "effect"
import type { Kernel } from "../../kernel/Kernel.ts"
import { describeExit } from "../../kernel/KernelProcess.ts"
import type { DeathCause } from "../../kernel/Lifecycle.ts"

/** Watches kernels by key and evicts the dead. */
export interface KernelSupervisor<K> {
  /** Records `kernel` as the live kernel of `key` and watches it until it dies. */
  readonly watch: (key: K, kernel: Kernel) => Effect.Effect<void>
  /** Evicts `key`'s entry, if `kernel` is still the live kernel there. */
  readonly evictIfCurrent: (key: K, kernel: Kernel) => Effect.Effect<void>
  /** Evicts `key`'s entry, whatever runs there. */
  readonly evict: (key: K) => Effect.Effect<void>
}

/** A sentence for a death the owner did not ask for, or undefined for a shutdown. */
export const unexpectedDeath = (cause: DeathCause): string | undefined => {
  switch (cause._tag) {
    case "Shutdown":
      return undefined
    case "Exited":
      return `its process exited (${describeExit(cause.exit)})`
    case "Killed":
      return `it was killed because cell ${cause.requestId} did not stop after SIGINT`
  }
}

/**
 * A supervisor (keys compared with `Equal`) whose watchers live in the current scope; `invalidate` removes a key's
 * entry (closing it once nobody holds it) and `label` names a key in logs and spans.
 */
export const make = <K>(options: {
  readonly invalidate: (key: K) => Effect.Effect<void>
  readonly label: (key: K) => string
}): Effect.Effect<KernelSupervisor<K>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const watchers = yield* FiberSet.make()
    const live = MutableHashMap.empty<K, Kernel>()

    const evict = (key: K) =>
      Effect.suspend(() => {
        MutableHashMap.remove(live, key)
        return options.invalidate(key)
      })

    const evictIfCurrent = (key: K, kernel: Kernel) =>
      Effect.suspend(() => {
        const current = MutableHashMap.get(live, key)
        return current._tag === "Some" && current.value === kernel ? evict(key) : Effect.void
      })

    const forgetIfCurrent = (key: K, kernel: Kernel) =>
      Effect.sync(() => {
        const current = MutableHashMap.get(live, key)
        if (current._tag === "Some" && current.value === kernel) MutableHashMap.remove(live, key)
      })

    const record = (key: K, kernel: Kernel, cause: DeathCause, why: string) =>
      Effect.gen(function*() {
        const span = yield* Effect.currentSpan
        span.event("kernel.died", BigInt(Date.now()) * 1_000_000n, { "kernel.death": cause._tag, "kernel.why": why })
        yield* Effect.logWarning(`kernel ${options.label(key)} (pid ${kernel.pid}) died: ${why}; evicted, the next call starts a fresh one`)
      }).pipe(
        Effect.withSpan(
          "kernel.evicted",
          { attributes: { "kernel.key": options.label(key), "kernel.pid": kernel.pid, "kernel.death": cause._tag } },
          { captureStackTrace: false }
        )
      )

    const onDeath = (key: K, kernel: Kernel) => (cause: DeathCause) => {
      const why = unexpectedDeath(cause)
      return why === undefined
        ? forgetIfCurrent(key, kernel)
        : Effect.andThen(evictIfCurrent(key, kernel), record(key, kernel, cause, why))
    }

    const watch = (key: K, kernel: Kernel) =>
      Effect.suspend(() => {
        MutableHashMap.set(live, key, kernel)
        return Effect.asVoid(FiberSet.run(watchers, Effect.interruptible(Effect.flatMap(kernel.dead, onDeath(key, kernel)))))
      })

    return { watch, evictIfCurrent, evict }
  })
