/**
 * The system under test, as an embedder builds it: `evalLayer` with explicit settings
 * (the resolved interpreter, artifacts in the bench's scratch directory), and the raw
 * `Kernel` path below the tool for comparison.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect, Layer, ManagedRuntime, type Scope } from "effect"
import * as Kernel from "../dist/kernel/Kernel.js"
import { evalLayer, type EvalServices } from "../dist/layers/EvalLive.js"
import { NodeKernelSpawnerLive } from "../dist/layers/NodeKernelSpawner.js"
import { AgentBridgeNotConfigured } from "../dist/kernel/AgentBridge.js"
import type { KernelError, KernelStartError } from "../dist/kernel/KernelError.js"
import { sessionArtifactsDir } from "../dist/services/output/ArtifactStore.js"
import { EvalTool, type EvalContext, type EvalError, type EvalResult } from "../dist/services/tool/EvalTool.js"
import { KernelRegistry } from "../dist/services/registry/KernelRegistry.js"
import { PythonRuntime } from "../dist/backends/python/PythonRuntime.js"
import { cachedPath, RunnerCache } from "../dist/services/storage/RunnerCache.js"
import { Settings, type SettingsInput } from "../dist/services/config/Settings.js"

/** Settings the bench and soak pass to `evalLayer`. */
export const benchSettings = (python: string, artifactsDir: string): SettingsInput => ({
  python: { interpreter: python },
  artifactsDir
})

/** A runtime over the eval layer. */
export type VeyyonRuntime = ManagedRuntime.ManagedRuntime<EvalServices, unknown>

/** Builds the eval layer's runtime (with `extra` settings on top); dispose it to shut every kernel down. */
export const makeVeyyon = (python: string, artifactsDir: string, extra: SettingsInput = {}): VeyyonRuntime =>
  ManagedRuntime.make(evalLayer({ env: false, settings: { ...benchSettings(python, artifactsDir), ...extra } }))

/** Runs one cell through `EvalTool.run`. */
export const runCell = (
  params: { readonly code: string; readonly timeout?: number; readonly reset?: boolean },
  context: EvalContext
): Effect.Effect<EvalResult, EvalError, EvalTool> =>
  EvalTool.use((tool) => tool.run({ language: "py", ...params }, context))

/** Shuts down every kernel of a session. */
export const resetSession = (sessionId: string): Effect.Effect<void, never, KernelRegistry> =>
  KernelRegistry.use((registry) => registry.reset(sessionId))

/** The services below the registry (settings, runtime, runner cache, spawner) for a bare kernel. */
export const kernelLayer = (python: string, artifactsDir: string) =>
  Layer.mergeAll(PythonRuntime.Live, RunnerCache.Live, NodeKernelSpawnerLive, AgentBridgeNotConfigured).pipe(
    Layer.provideMerge(Layer.merge(Layer.orDie(Settings.layer(benchSettings(python, artifactsDir))), NodeServices.layer))
  )

/** Starts a bare kernel (runner + prelude, no registry or tool) in the current scope. */
export const rawKernel = (
  python: string,
  artifactsDir: string,
  cwd: string,
  sessionId: string
): Effect.Effect<Kernel.Kernel, KernelStartError, Scope.Scope> =>
  Effect.gen(function*() {
    const runtime = yield* PythonRuntime
    const files = yield* Effect.orDie(RunnerCache.use((cache) => cache.ensure("python")))
    return yield* Kernel.make({
      command: python,
      args: ["-u", cachedPath(files, "boot.py")],
      cwd,
      env: runtime.kernelEnv({}, { artifactsDir: sessionArtifactsDir(artifactsDir, sessionId) }),
      prelude: files.sources.get("prelude.py") ?? "",
      skipCheck: true
    })
  }).pipe(Effect.provide(kernelLayer(python, artifactsDir)))

/** The cached runner's `boot.py`, for driving the runner with no kernel in between. */
export const runnerBoot = (python: string, artifactsDir: string): Effect.Effect<string> =>
  Effect.map(Effect.orDie(RunnerCache.use((cache) => cache.ensure("python"))), (files) => cachedPath(files, "boot.py")).pipe(
    Effect.provide(kernelLayer(python, artifactsDir))
  )

/** Runs one cell in a bare kernel, collecting its outputs. */
export const rawExecute = (
  kernel: Kernel.Kernel,
  request: Kernel.ExecuteRequest
): Effect.Effect<ReadonlyArray<unknown>, KernelError> =>
  Effect.suspend(() => {
    const outputs: Array<unknown> = []
    return Effect.map(kernel.run(request, (output) => Effect.sync(() => outputs.push(output))), (outcome) => {
      outputs.push(outcome)
      return outputs
    })
  })
