/**
 * A cluster runner as a layer: this process's eval layer (registry, sandbox, every
 * backend) serving `KernelSession` entities for the shards it owns, with the session
 * ledger under a random incarnation id, its kernels in the directories its workspace decides; kv in Postgres, each cell's artifacts published there. Closing its scope hands the shards off (the
 * sessions' kernels end here; their next cells run elsewhere with a notice). Session
 * snapshots live in Postgres too, sealed with a key derived from the cluster secret; a
 * runner without a secret (`--insecure-no-auth`) keeps none and says so.
 */
import { Effect, Layer, Result } from "effect"
import type { Sharding } from "effect/cluster/Sharding"
import type { SocketServerError } from "effect/socket/SocketServer"
import type { SqlError } from "effect/sql/SqlError"
import { randomUUID } from "node:crypto"
import { bridgeUnavailable } from "../kernel/AgentBridge.ts"
import { evalLayer, type EvalLayerOptions } from "../layers/EvalLive.ts"
import type { ArtifactDirUnavailable } from "../services/output/ArtifactStore.ts"
import type { KernelRegistry } from "../services/registry/KernelRegistry.ts"
import { hostVariables } from "../services/config/ConfigSources.ts"
import { type InvalidSettings, Settings } from "../services/config/Settings.ts"
import { type ClusterSettings, formatHostPort } from "./ClusterSettings.ts"
import { postgresLayer, runnerShardingLayer } from "./ClusterTransport.ts"
import { ArtifactPublisher } from "./ArtifactPublisher.ts"
import { CellHandOff } from "./CellHandOff.ts"
import { describeDatabase } from "./DatabaseOutage.ts"
import { kernelSessionServer } from "./KernelSessionServer.ts"
import { PgKvStoreLive } from "./PgKvStore.ts"
import { pgSnapshotStoreLayer } from "./PgSnapshotStore.ts"
import { type InvalidWorkspaceSettings, resolveWorkspaceSettings, RunnerWorkspace, type RunnerWorkspaceSettings } from "./RunnerWorkspace.ts"
import { SessionLedger } from "./SessionLedger.ts"
import { ShardMoveLog } from "./ShardLockStorage.ts"

/** Anything starting a runner can fail with. */
export type RunnerLayerError = InvalidSettings | ArtifactDirUnavailable | SqlError | SocketServerError | InvalidWorkspaceSettings

/** How to build a runner: the eval layer's options, and where its kernels live (default: from `VEYYON_RUNNER_*` of the environment). */
export interface RunnerLayerOptions extends EvalLayerOptions {
  readonly workspace?: RunnerWorkspaceSettings
}

/** What answers a runner's cells' `completion()`, `agent()` and `input()` unless the embedder gives a bridge: nobody yet, saying so. */
const RUNNER_BRIDGE = bridgeUnavailable(
  "cells on a cluster runner are not bound to an MCP client (this release answers completion(), agent() and input() through the stdio and HTTP doors of one process, or an embedder's AgentBridge)"
)

/** A runner of the cluster `cluster` describes, running kernels with the eval layer `options` builds. */
export const runnerLayer = (cluster: ClusterSettings, options: RunnerLayerOptions = {}): Layer.Layer<Sharding | KernelRegistry, RunnerLayerError> => {
  const workspaceSettings = options.workspace !== undefined
    ? Result.succeed(options.workspace)
    : resolveWorkspaceSettings(options.env === false ? {} : options.env ?? hostVariables())
  const workspace = Layer.unwrap(Effect.map(Effect.fromResult(workspaceSettings), RunnerWorkspace.layer))
  const advertised = formatHostPort(cluster.advertise)
  const sharding = runnerShardingLayer(cluster)
  const ledger = SessionLedger.layer(randomUUID(), advertised, { database: describeDatabase(cluster.postgresUrl) })
  const secret = cluster.auth._tag === "Secret" ? cluster.auth.secret : undefined
  const evalOptions: RunnerLayerOptions = secret === undefined
    ? { bridge: RUNNER_BRIDGE, ...options, settings: { ...options.settings, session: { ...options.settings?.session, snapshots: "off" } } }
    : { bridge: RUNNER_BRIDGE, ...options }
  const settings = evalOptions.env === false ? Settings.layer(evalOptions.settings) : Settings.fromEnv(evalOptions.settings, evalOptions.env)
  // Snapshots sealed with the secret's key, written only while this runner owns the session.
  const snapshots = secret === undefined
    ? Layer.effectDiscard(Effect.logWarning("session snapshots are off: this runner has no cluster secret (--insecure-no-auth) to seal them with; a re-homed session's variables are lost"))
    : Layer.unwrap(Effect.gen(function*() {
      const values = yield* Settings
      return pgSnapshotStoreLayer(secret, values.session.snapshotMaxAgeDays * 24 * 60 * 60 * 1000)
    })).pipe(
      Layer.provide(settings),
      Layer.provide(ledger)
    )
  // kv and snapshots in Postgres under the eval layer; the publisher copies each cell's artifacts there.
  const kernels = ArtifactPublisher.layer.pipe(Layer.provideMerge(evalLayer(evalOptions).pipe(Layer.provide(PgKvStoreLive), Layer.provide(snapshots))))
  // Closed before the sharding hands the shards off, so the releases of a stop say so.
  const stopMarker = Layer.effectDiscard(Effect.gen(function*() {
    const log = yield* ShardMoveLog
    yield* Effect.addFinalizer(() => log.stopping)
  }))
  return Layer.merge(kernelSessionServer(advertised, cluster.callLeaseMs), stopMarker).pipe(
    Layer.provideMerge(sharding),
    Layer.provide(ledger),
    Layer.provide(workspace),
    // Cells finishing after their shard moved: closed after the entities, before the kernels.
    Layer.provide(CellHandOff.layer),
    Layer.provideMerge(kernels),
    Layer.provide(postgresLayer(cluster))
  )
}
