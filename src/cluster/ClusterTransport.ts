/**
 * `effect/cluster` on Node sockets with its storage in Postgres (tables prefixed
 * `veyyon_cluster_`): the sharding of a runner (serves entities, pings its peers) and of a
 * client (sends to entities only), every connection to a runner's port authenticated by
 * the mesh handshake first. The sharding config is built from our settings alone,
 * never from the library's own environment variables (`HOST`, `PORT`, ...).
 */
import * as NodeCrypto from "@effect/platform-node/NodeCrypto"
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { RunnerAddress } from "effect/cluster/RunnerAddress"
import * as RunnerHealth from "effect/cluster/RunnerHealth"
import * as Runners from "effect/cluster/Runners"
import type { Sharding } from "effect/cluster/Sharding"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as SocketRunner from "effect/cluster/SocketRunner"
import * as SqlMessageStorage from "effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "effect/cluster/SqlRunnerStorage"
import * as RpcClient from "effect/rpc/RpcClient"
import * as RpcSerialization from "effect/rpc/RpcSerialization"
import { Socket } from "effect/socket/Socket"
import type { SocketServerError } from "effect/socket/SocketServer"
import type { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { ClusterSettings } from "./ClusterSettings.ts"
import { connectMesh, layerMeshServer } from "./MeshSockets.ts"
import { layerShardLockStorage, type ShardMoveLog } from "./ShardLockStorage.ts"

/** The prefix of the tables `effect/cluster` keeps in Postgres. */
export const CLUSTER_TABLE_PREFIX = "veyyon_cluster"

/** How often every runner and client reads the runner list and recomputes the shard assignments. */
export const ASSIGNMENTS_POLL = Duration.millis(500)

/** The library's sharding config from our settings; `runner` false leaves out this process's address (a client). */
export const shardingConfigOf = (settings: ClusterSettings, runner: boolean): ShardingConfig.ShardingConfig["Service"] => ({
  ...ShardingConfig.defaults,
  runnerAddress: runner ? Option.some(RunnerAddress.make({ host: settings.advertise.host, port: settings.advertise.port })) : Option.none(),
  runnerListenAddress: runner ? Option.some(RunnerAddress.make({ host: settings.listen.host, port: settings.listen.port })) : Option.none(),
  shardsPerGroup: settings.shards,
  shardLockExpiration: Duration.millis(settings.shardLockExpirationMs),
  shardLockRefreshInterval: Duration.millis(settings.shardLockRefreshMs),
  // Runner health by ping: a runner that stops answering is noticed within a few seconds.
  runnerHealthCheckInterval: Duration.seconds(5),
  // Every process reads the runner list this often (one small query): a runner that joined
  // or whose heartbeat expired is seen within half a second everywhere, so fail-over ends
  // soon after the lock expiry, and few new sessions start on a shard about to move.
  refreshAssignmentsInterval: ASSIGNMENTS_POLL
})

/**
 * The wire format between runners and clients: the library's schema-driven binary, with no
 * frame size limit (a cell's result or one output can be large; every peer proved the
 * cluster secret before its first frame is read).
 */
export const layerClusterSerialization: Layer.Layer<RpcSerialization.RpcSerialization> = RpcSerialization.layerSchemaBinary({ maxFrameSize: "unbounded" })

/** The Postgres client every cluster piece shares. */
export const postgresLayer = (settings: ClusterSettings): Layer.Layer<SqlClient, SqlError> =>
  PgClient.layer({ url: Redacted.make(settings.postgresUrl), applicationName: "veyyon", maxConnections: 10 })

/** The sockets from this process to runners, each authenticated before the RPC client uses it. */
const layerClientProtocol = (settings: ClusterSettings): Layer.Layer<Runners.RpcClientProtocol, never, RpcSerialization.RpcSerialization> =>
  Layer.effect(
    Runners.RpcClientProtocol,
    Effect.gen(function*() {
      const serialization = yield* RpcSerialization.RpcSerialization
      return Runners.RpcClientProtocol.of({
        codecFor: serialization.codecFor,
        make: Effect.fnUntraced(function*(address: RunnerAddress) {
          const socket = yield* connectMesh({ host: address.host, port: address.port }, settings.auth, 1000)
          return yield* RpcClient.makeProtocolSocket().pipe(
            Effect.provideService(Socket, socket),
            Effect.provideService(RpcSerialization.RpcSerialization, serialization)
          )
        })
      })
    })
  )

const layerSocketServer = (settings: ClusterSettings) =>
  layerMeshServer({ host: settings.listen.host, port: settings.listen.port, auth: settings.auth })

const messageStorage = SqlMessageStorage.layerWith({ prefix: CLUSTER_TABLE_PREFIX }).pipe(Layer.provide(NodeCrypto.layerDigest))
const runnerStorage = Layer.orDie(SqlRunnerStorage.layerWith({ prefix: CLUSTER_TABLE_PREFIX }))
const storage = Layer.mergeAll(messageStorage, runnerStorage)

/**
 * The sharding of a runner: listens on its address, serves its shards' entities, sends to
 * the others; its lock releases queued and its shard moves logged (`ShardLockStorage`).
 */
export const runnerShardingLayer = (settings: ClusterSettings): Layer.Layer<Sharding | Runners.Runners | ShardMoveLog, SocketServerError, SqlClient> =>
  Layer.provide(SocketRunner.layer, [layerSocketServer(settings), layerClientProtocol(settings)]).pipe(
    Layer.provide(RunnerHealth.layerPing.pipe(Layer.provide(Runners.layerRpc), Layer.provide(layerClientProtocol(settings)))),
    Layer.provideMerge(Layer.merge(messageStorage, layerShardLockStorage.pipe(Layer.provide(runnerStorage)))),
    Layer.provide(ShardingConfig.layer(shardingConfigOf(settings, true))),
    Layer.provide(layerClusterSerialization)
  )

/** The sharding of a client: no entities of its own, sends every call to the runner owning the session's shard. */
export const clientShardingLayer = (settings: ClusterSettings): Layer.Layer<Sharding | Runners.Runners, never, SqlClient> =>
  Layer.provide(SocketRunner.layerClientOnly, layerClientProtocol(settings)).pipe(
    Layer.provide(storage),
    Layer.provide(ShardingConfig.layer(shardingConfigOf(settings, false))),
    Layer.provide(layerClusterSerialization)
  )
