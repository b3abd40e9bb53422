/**
 * The library's runner storage (shard locks and the runner list in Postgres) as a runner
 * uses it. Shard releases reach Postgres one at a time, queued here before the library's
 * lock deadline starts: a rebalance releases many shards at once, and queued behind each
 * other on the runner's one lock connection their deadlines (a third of the lock expiry)
 * ran out on a busy machine; the library then replaced the connection, which let go of
 * every lock the runner held, and the runner dropped all its shards. The lock refresh
 * is not queued behind them. Every move of this runner's shards is logged with its
 * reason (a runner joined, left or failed its health check, a lock was lost, the runner
 * is stopping).
 */
import { Context, Effect, Layer, Scope, Semaphore } from "effect"
import type { Runner } from "effect/cluster/Runner"
import { RunnerStorage } from "effect/cluster/RunnerStorage"
import type { ShardId } from "effect/cluster/ShardId"
import { type Membership, membershipChanges, shardRanges } from "./ShardMoves.ts"

/** How long a change of the runner list stays the reason given for the shard moves after it. */
const REASON_MS = 30_000

/** Releases this close together are logged as one line. */
const RELEASE_LOG_MS = 250

/** Tells the shard log that the runner is stopping, so the releases that follow say so. */
export class ShardMoveLog extends Context.Service<ShardMoveLog, {
  /** Marks the runner as stopping: the shard releases from now on are its hand-off. */
  readonly stopping: Effect.Effect<void>
}>()("veyyon-eval/ShardMoveLog") {}

const membershipOf = (runners: ReadonlyArray<readonly [Runner, boolean]>): Membership => {
  const healthy = new Set<string>()
  const unhealthy = new Set<string>()
  for (const [runner, isHealthy] of runners) (isHealthy ? healthy : unhealthy).add(`${runner.address.host}:${runner.address.port}`)
  return { healthy, unhealthy }
}

/** The runner storage below wrapped as described above, and the log's stop marker. */
export const layerShardLockStorage: Layer.Layer<RunnerStorage | ShardMoveLog, never, RunnerStorage> = Layer.effectContext(
  Effect.gen(function*() {
    const storage = yield* RunnerStorage
    const scope = yield* Effect.scope
    const releases = Semaphore.makeUnsafe(1)
    let membership: Membership | undefined
    let change: { readonly text: string; readonly at: number } | undefined
    let stopping = false
    let everAcquired = false
    let released: Array<number> = []

    const reason = (): string => {
      if (stopping) return "this runner is stopping"
      if (change !== undefined && Date.now() - change.at < REASON_MS) return change.text
      return "the shard assignments changed"
    }

    const flushReleases = Effect.suspend(() => {
      const shards = released
      released = []
      return shards.length === 0
        ? Effect.void
        : Effect.logInfo(`released ${shards.length} shard${shards.length === 1 ? "" : "s"} (${reason()})`).pipe(Effect.annotateLogs({ shards: shardRanges(shards) }))
    })

    const noteRelease = (shardId: ShardId) =>
      Effect.suspend(() => {
        released.push(shardId.id)
        return released.length > 1 ? Effect.void : Effect.asVoid(Effect.forkIn(Effect.delay(flushReleases, RELEASE_LOG_MS), scope))
      })

    const wrapped = RunnerStorage.of({
      ...storage,
      getRunners: storage.getRunners.pipe(
        Effect.tap((runners) =>
          Effect.suspend(() => {
            const next = membershipOf(runners)
            const changes = membershipChanges(membership, next)
            membership = next
            if (changes.length === 0) return Effect.void
            change = { text: changes.join("; "), at: Date.now() }
            return Effect.logInfo(`the runners changed: ${change.text}`)
          }))
      ),
      acquire: (address, shardIds) =>
        storage.acquire(address, shardIds).pipe(
          Effect.tap((acquired) =>
            Effect.suspend(() => {
              if (acquired.length === 0) return Effect.void
              const why = everAcquired ? reason() : "this runner joined the cluster"
              everAcquired = true
              return Effect.logInfo(`acquired ${acquired.length} shard${acquired.length === 1 ? "" : "s"} (${why})`).pipe(
                Effect.annotateLogs({ shards: shardRanges(acquired.map((shardId) => shardId.id)) })
              )
            }))
        ),
      refresh: (address, shardIds) => {
        const asked = [...shardIds]
        return storage.refresh(address, asked).pipe(
          Effect.tap((held) => {
            const kept = new Set(held.map((shardId) => shardId.id))
            const lost = asked.filter((shardId) => !kept.has(shardId.id)).map((shardId) => shardId.id)
            return lost.length === 0
              ? Effect.void
              : Effect.logWarning(`lost the locks of ${lost.length} shard${lost.length === 1 ? "" : "s"} (the lock refresh no longer holds them; their sessions move)`).pipe(
                Effect.annotateLogs({ shards: shardRanges(lost) })
              )
          }),
          Effect.tapError((error) => Effect.logWarning(`the shard lock refresh failed (${error.message}); the library drops this runner's shards if it keeps failing`))
        )
      },
      release: (address, shardId) => releases.withPermits(1)(storage.release(address, shardId)).pipe(Effect.tap(() => noteRelease(shardId))),
      releaseAll: (address) =>
        releases.withPermits(1)(storage.releaseAll(address)).pipe(
          Effect.tap(() => Effect.logInfo(`released every shard lock of this runner (${reason()})`))
        )
    })

    const log = ShardMoveLog.of({ stopping: Effect.sync(() => (stopping = true)) })
    yield* Scope.addFinalizer(scope, flushReleases)
    return Context.make(RunnerStorage, wrapped).pipe(Context.add(ShardMoveLog, log))
  })
)
