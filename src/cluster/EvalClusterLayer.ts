/**
 * The eval tool as a cluster client, for embedders and `veyyon mcp --cluster`: the same
 * `EvalTool` (and the settings and artifact store an MCP server needs) with every cell
 * running on the cluster's runners. Nothing runs kernels in this process.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Layer } from "effect"
import type { SqlError } from "effect/sql/SqlError"
import type { ArtifactDirUnavailable, ArtifactStore } from "../services/output/ArtifactStore.ts"
import { EvalTool } from "../services/tool/EvalTool.ts"
import { hostVariables, readText } from "../services/config/ConfigSources.ts"
import { type InvalidSettings, Settings, type SettingsInput } from "../services/config/Settings.ts"
import { DATABASE_OUTAGE_WAIT, describeDatabase, watchDatabase } from "./DatabaseOutage.ts"
import { makeClusterEvalTool } from "./ClusterEvalTool.ts"
import { type ClusterSettings, type ClusterSettingsInput, InvalidClusterSettings, resolveClusterSettings } from "./ClusterSettings.ts"
import { clientShardingLayer, postgresLayer } from "./ClusterTransport.ts"
import { PgArtifactStoreLive } from "./PgArtifactStore.ts"

/** How to build the cluster client layer. */
export interface EvalClusterLayerOptions {
  /** The cluster to join; `VEYYON_CLUSTER_*` of the environment fill in what is not given. */
  readonly cluster?: ClusterSettingsInput
  /** The tool's settings (enabled languages, output bounds, artifacts dir); `VEYYON_*` apply on top unless `env` is false. */
  readonly settings?: SettingsInput
  /** Read `VEYYON_*` variables from this environment (default: the process's); false to ignore it. */
  readonly env?: Readonly<Record<string, string | undefined>> | false
  /**
   * Where cells run on their runner: "session" (default, or `VEYYON_CLUSTER_CWD=session`) in
   * the session's own directory there, whatever cwd a call names; "caller"
   * (`VEYYON_CLUSTER_CWD=caller`) in the cwd each call names, which the runner allows only
   * under its `VEYYON_RUNNER_ALLOWED_ROOTS`.
   */
  readonly cwd?: "session" | "caller"
}

/** The variable choosing where cells run on their runner (`session` or `caller`). */
export const CLUSTER_CWD_ENV = "VEYYON_CLUSTER_CWD"

/** What the cluster client layer provides. */
export type EvalClusterServices = EvalTool | Settings | ArtifactStore

/** Anything building the cluster client layer can fail with. */
export type EvalClusterLayerError = InvalidSettings | ArtifactDirUnavailable | InvalidClusterSettings | SqlError

/** How long a call keeps looking for a runner: twice the lock expiry plus half a minute. */
export const retryWindowMsOf = (cluster: ClusterSettings): number => 2 * cluster.shardLockExpirationMs + 30_000

/** The eval tool as a client of the cluster the settings name. */
export const evalClusterLayer = (options: EvalClusterLayerOptions = {}): Layer.Layer<EvalClusterServices, EvalClusterLayerError> => {
  const env = options.env === false ? {} : options.env ?? hostVariables()
  const settings = options.env === false ? Settings.layer(options.settings) : Settings.fromEnv(options.settings, env)
  return Layer.unwrap(Effect.gen(function*() {
    const cluster = yield* Effect.fromResult(resolveClusterSettings(options.cluster ?? {}, env))
    const cwdMode = options.cwd ?? readText(CLUSTER_CWD_ENV, env) ?? "session"
    if (cwdMode !== "session" && cwdMode !== "caller") {
      return yield* new InvalidClusterSettings({ problem: `${CLUSTER_CWD_ENV} must be session or caller, got ${JSON.stringify(cwdMode)}` })
    }
    const tool = Layer.effect(
      EvalTool,
      Effect.flatMap(watchDatabase(), (watch) =>
        makeClusterEvalTool({
          retryWindowMs: retryWindowMsOf(cluster),
          retryIntervalMs: 250,
          forwardCwd: cwdMode === "caller",
          database: { watch, name: describeDatabase(cluster.postgresUrl), wait: DATABASE_OUTAGE_WAIT }
        }))
    ).pipe(
      Layer.provide(clientShardingLayer(cluster))
    )
    // Artifacts the runners published are read from Postgres (and cached in this process's private directory).
    return Layer.mergeAll(tool, PgArtifactStoreLive).pipe(
      Layer.provide(postgresLayer(cluster)),
      Layer.provideMerge(Layer.merge(settings, NodeServices.layer))
    )
  }))
}
