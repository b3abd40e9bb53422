/**
 * The runner storage wrapper: shard releases reach the storage one at a time (queued
 * before the library's per-operation deadline starts), a lock refresh is not queued
 * behind them, and shard moves are logged with their reason.
 */
import { Effect, Layer, Logger } from "effect"
import { Runner } from "effect/cluster/Runner"
import { RunnerAddress } from "effect/cluster/RunnerAddress"
import { RunnerStorage } from "effect/cluster/RunnerStorage"
import * as ShardId from "effect/cluster/ShardId"
import { describe, expect, it } from "vitest"
import { layerShardLockStorage, ShardMoveLog } from "../../src/cluster/ShardLockStorage.ts"
import { membershipChanges, shardRanges } from "../../src/cluster/ShardMoves.ts"

const self = RunnerAddress.make({ host: "127.0.0.1", port: 4000 })
const runner = (port: number) => Runner.make({ address: RunnerAddress.make({ host: "127.0.0.1", port }), groups: ["default"], weight: 1 })

/** A storage whose releases take 30 ms each, counting how many run at once. */
const slowStorage = () => {
  const state = { inRelease: 0, maxInRelease: 0, runners: [[runner(4000), true]] as Array<readonly [Runner, boolean]> }
  const storage = RunnerStorage.of({
    register: () => Effect.succeed(1 as never),
    unregister: () => Effect.void,
    getRunners: Effect.sync(() => state.runners),
    setRunnerHealth: () => Effect.void,
    acquire: (_address, shardIds) => Effect.succeed([...shardIds]),
    refresh: (_address, shardIds) => Effect.succeed([...shardIds].filter((shardId) => shardId.id !== 13)),
    release: () =>
      Effect.sync(() => {
        state.inRelease++
        state.maxInRelease = Math.max(state.maxInRelease, state.inRelease)
      }).pipe(Effect.andThen(Effect.sleep(30)), Effect.ensuring(Effect.sync(() => state.inRelease--))),
    releaseAll: () => Effect.void
  })
  return { state, layer: layerShardLockStorage.pipe(Layer.provide(Layer.succeed(RunnerStorage, storage))) }
}

const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make<unknown, void>(({ message }) => {
    lines.push((Array.isArray(message) ? message : [message]).map(String).join(" "))
  })
  return { lines, layer: Logger.layer([logger]) }
}

describe("ShardLockStorage", () => {
  it("sends releases one at a time, and a refresh goes ahead of the queued releases", async () => {
    const { state, layer } = slowStorage()
    const refreshedAfterMs = await Effect.runPromise(Effect.gen(function*() {
      const storage = yield* RunnerStorage
      const start = Date.now()
      yield* Effect.forkChild(Effect.forEach(Array.from({ length: 10 }, (_, i) => ShardId.make("default", i + 1)), (shardId) => storage.release(self, shardId), { concurrency: "unbounded", discard: true }))
      yield* Effect.sleep(5)
      yield* storage.refresh(self, [ShardId.make("default", 20)])
      const refreshedAfter = Date.now() - start
      yield* Effect.sleep(400)
      return refreshedAfter
    }).pipe(Effect.scoped, Effect.provide(layer)))
    expect(state.maxInRelease).toBe(1)
    // Ten releases take 300 ms in a row; the refresh did not wait for them.
    expect(refreshedAfterMs).toBeLessThan(150)
  })

  it("logs acquisitions, releases and lost locks with their reason", async () => {
    const { state, layer } = slowStorage()
    const logs = captureLogs()
    await Effect.runPromise(Effect.gen(function*() {
      const storage = yield* RunnerStorage
      yield* storage.getRunners
      yield* storage.acquire(self, [ShardId.make("default", 1), ShardId.make("default", 2), ShardId.make("default", 3)])
      state.runners = [[runner(4000), true], [runner(4001), true]]
      yield* storage.getRunners
      yield* storage.release(self, ShardId.make("default", 2))
      yield* storage.release(self, ShardId.make("default", 3))
      yield* Effect.sleep(400)
      yield* storage.refresh(self, [ShardId.make("default", 1), ShardId.make("default", 13)])
      yield* (yield* ShardMoveLog).stopping
      yield* storage.releaseAll(self)
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(layer, logs.layer))))
    expect(logs.lines).toEqual([
      "acquired 3 shards (this runner joined the cluster)",
      "the runners changed: runner 127.0.0.1:4001 joined",
      "released 2 shards (runner 127.0.0.1:4001 joined)",
      "lost the locks of 1 shard (the lock refresh no longer holds them; their sessions move)",
      "released every shard lock of this runner (this runner is stopping)"
    ])
  })
})

describe("ShardMoves", () => {
  it("names runners that joined, left, failed their health check or came back", () => {
    const view = (healthy: Array<string>, unhealthy: Array<string> = []) => ({ healthy: new Set(healthy), unhealthy: new Set(unhealthy) })
    expect(membershipChanges(undefined, view(["a"]))).toEqual([])
    expect(membershipChanges(view(["a"]), view(["a", "b"]))).toEqual(["runner b joined"])
    expect(membershipChanges(view(["a", "b"]), view(["a"]))).toEqual(["runner b left"])
    expect(membershipChanges(view(["a", "b"]), view(["a"], ["b"]))).toEqual(["runner b failed its health check"])
    expect(membershipChanges(view(["a"], ["b"]), view(["a", "b"]))).toEqual(["runner b is healthy again"])
    expect(membershipChanges(view(["a"]), view(["a"]))).toEqual([])
  })

  it("writes shard numbers as ascending ranges", () => {
    expect(shardRanges([7, 3, 1, 2, 2, 9, 10])).toBe("1-3,7,9-10")
    expect(shardRanges([])).toBe("")
    expect(shardRanges([5])).toBe("5")
  })
})
