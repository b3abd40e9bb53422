/**
 * Everything the eval tool needs on Node, as one Layer built from `Settings`: the
 * registry, interpreter resolution, runner cache, process spawner, sandbox (and the egress
 * proxy's name resolution), output sink and artifact store, with the agent bridge the
 * embedder provides (or the default one).
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Layer } from "effect"
import { AgentBridge, AgentBridgeNotConfigured } from "../kernel/AgentBridge.ts"
import { ArtifactStore, type ArtifactDirUnavailable } from "../services/output/ArtifactStore.ts"
import { EgressResolver } from "../services/isolation/egress/EgressResolver.ts"
import { EvalTool } from "../services/tool/EvalTool.ts"
import { KernelRegistry } from "../services/registry/KernelRegistry.ts"
import { OutputSink } from "../services/output/OutputSink.ts"
import { PythonRuntime } from "../backends/python/PythonRuntime.ts"
import { RunnerCache } from "../services/storage/RunnerCache.ts"
import { Sandbox } from "../services/isolation/Sandbox.ts"
import { SessionRecord } from "../services/output/SessionRecord.ts"
import { Settings, type InvalidSettings, type SettingsInput } from "../services/config/Settings.ts"
import { NodeKernelSpawnerLive } from "./NodeKernelSpawner.ts"

/** How to build the eval layer. */
export interface EvalLayerOptions {
  /** Settings; `VEYYON_*` variables of the environment apply on top unless `env` is false. */
  readonly settings?: SettingsInput
  /** Read `VEYYON_*` flags from this environment (default: the process's); false to ignore it. */
  readonly env?: Readonly<Record<string, string | undefined>> | false
  /** Answers agent()/completion()/parallel() calls; the default says none is configured. */
  readonly bridge?: Layer.Layer<AgentBridge>
  /** Resolves the names the egress proxy admits (`sandbox.network: allowlist`); default the system resolver. */
  readonly egressResolver?: Layer.Layer<EgressResolver>
}

/** What the eval layer provides. */
export type EvalServices = EvalTool | KernelRegistry | Settings | ArtifactStore | SessionRecord

/** Builds the eval layer; closing its scope shuts every kernel down. */
export const evalLayer = (
  options: EvalLayerOptions = {}
): Layer.Layer<EvalServices, InvalidSettings | ArtifactDirUnavailable> => {
  const settings = options.env === false
    ? Settings.layer(options.settings)
    : Settings.fromEnv(options.settings, options.env)
  const platform = Layer.mergeAll(
    PythonRuntime.Live,
    RunnerCache.Live,
    ArtifactStore.Live,
    SessionRecord.layer,
    NodeKernelSpawnerLive,
    Sandbox.Live,
    options.egressResolver ?? EgressResolver.layer,
    options.bridge ?? AgentBridgeNotConfigured
  ).pipe(Layer.provideMerge(Layer.merge(settings, NodeServices.layer)))
  const registry = KernelRegistry.layer.pipe(Layer.provideMerge(platform))
  const tool = EvalTool.layer.pipe(Layer.provideMerge(OutputSink.Live), Layer.provideMerge(registry))
  return tool
}

/** The eval tool on Node with settings from `VEYYON_*` environment variables and defaults. */
export const EvalLive: Layer.Layer<EvalServices, InvalidSettings | ArtifactDirUnavailable> = evalLayer()
