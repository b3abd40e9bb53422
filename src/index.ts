/**
 * veyyon-eval: Python, JavaScript and Ruby execution backends for coding agents. Provide `EvalLive` (or
 * `evalLayer(options)`) and call `EvalTool.run`; the services behind it are exported
 * for embedders that drive kernels themselves.
 *
 * Cluster mode lives in `veyyon-eval/cluster`, render helpers in `veyyon-eval/render`, fakes
 * for tests in `veyyon-eval/testing`, the OpenTelemetry layer in `veyyon-eval/tracing`.
 */

// Layers

/** Every service on Node, with settings from `VEYYON_*` environment variables. */
export { EvalLive } from "./layers/EvalLive.ts"
/** `EvalLive` with settings, an agent bridge or other pieces of your own. */
export { evalLayer } from "./layers/EvalLive.ts"
/** What `evalLayer` takes. */
export type { EvalLayerOptions } from "./layers/EvalLive.ts"
/** The services `EvalLive` provides. */
export type { EvalServices } from "./layers/EvalLive.ts"
/** The kernel spawner that starts real child processes on Node. */
export { NodeKernelSpawnerLive } from "./layers/NodeKernelSpawner.ts"

// The eval tool

/** The `eval` tool: runs a cell in a retained kernel and returns its rendered result. */
export { EvalTool } from "./services/tool/EvalTool.ts"
/** The shape of the `EvalTool` service. */
export type { EvalToolService } from "./services/tool/EvalTool.ts"
/** The tool's params: `{ language, code, title?, timeout?, reset? }`. */
export type { EvalParams } from "./services/tool/EvalTool.ts"
/** Who is calling: session, cwd, an output callback and an abort signal. */
export type { EvalContext } from "./services/tool/EvalTool.ts"
/** What a cell produced: status, outputs, rendered text, images, error, truncation. */
export type { EvalResult } from "./services/tool/EvalTool.ts"
/** Every error `EvalTool.run` can fail with. */
export type { EvalError } from "./services/tool/EvalTool.ts"
/** The tool's name, description and JSON Schema. */
export type { EvalToolDefinition } from "./services/tool/EvalTool.ts"
/** The tool's name, `eval`. */
export { EVAL_TOOL_NAME } from "./services/tool/EvalTool.ts"
/** The tool's params as a Schema, the source of its JSON Schema. */
export { EvalParamsSchema } from "./services/tool/EvalSchema.ts"
/** A result as structured data (images described, their data optional) as a Schema, the source of MCP's `outputSchema`. */
export { EvalOutputSchema } from "./services/tool/EvalSchema.ts"
/** The structured result's type. */
export type { EvalOutput } from "./services/tool/EvalSchema.ts"
/** An `EvalResult` as `EvalOutputSchema`'s data. */
export { structuredResult } from "./services/tool/EvalSchema.ts"
/** The tool's description for the enabled languages. */
export { evalDescription } from "./services/tool/EvalTool.ts"
/** The tool's params as JSON Schema, `language` narrowed to the enabled languages. */
export { evalParametersSchema } from "./services/tool/EvalTool.ts"
/** Validates raw params, as the tool does before running them. */
export { checkParams } from "./services/tool/EvalTool.ts"
/** Params the tool refuses, with a sentence saying why. */
export { InvalidEvalParams } from "./services/tool/EvalTool.ts"
/** A language that is disabled or whose interpreter is missing. */
export { BackendUnavailable } from "./services/tool/EvalTool.ts"
/** Params of a completion or inspection request (`obj?`). */
export type { IntrospectParams } from "./services/tool/EvalTool.ts"
/** Every error a completion or inspection request can fail with. */
export type { IntrospectError } from "./services/tool/EvalTool.ts"
/** The completions for the token before the cursor. */
export type { Completion } from "./kernel/Introspection.ts"
/** What the name under the cursor is. */
export type { Inspection } from "./kernel/Introspection.ts"
/** A completion or inspection request the kernel could not answer. */
export { IntrospectionFailed } from "./kernel/Introspection.ts"
/** Clamps a timeout in seconds to 1..3600, refusing non-numbers. */
export { clampTimeoutSeconds } from "./services/tool/CellTimeout.ts"
/** A timeout that is not a number. */
export { InvalidTimeout } from "./services/tool/CellTimeout.ts"

// Kernels

/** Kernels by session, cwd and interpreter: execute, reset, shut down. */
export { KernelRegistry } from "./services/registry/KernelRegistry.ts"
/** The shape of the `KernelRegistry` service. */
export type { KernelRegistryService } from "./services/registry/KernelRegistry.ts"
/** The key a kernel is kept under. */
export { KernelKey } from "./services/registry/KernelRegistry.ts"
/** One request to the registry: language, session, cwd, reset, and the cell to run. */
export type { RegistryRequest } from "./services/registry/KernelRegistry.ts"
/** Every error the registry can fail with. */
export type { RegistryError } from "./services/registry/KernelRegistry.ts"
/** Which kernel: language, session and cwd. */
export type { KernelPlace } from "./services/registry/KernelRegistry.ts"
/** A cwd that does not exist or is not a directory. */
export { InvalidCwd } from "./services/registry/KernelRegistry.ts"
/** The status op of the event announcing that a dead kernel was replaced. */
export { RESTART_STATUS_OP } from "./services/registry/KernelRegistry.ts"
/** One kernel driven directly: make, execute, interrupt, shut down. */
export * as Kernel from "./kernel/Kernel.ts"
/** One output of a cell: stream text, display, result, error, status. */
export { KernelOutput } from "./kernel/KernelOutput.ts"
/** How a cell ended. */
export type { CellOutcome } from "./kernel/KernelOutput.ts"
/** Every error a kernel can fail with. */
export type { KernelError } from "./kernel/KernelError.ts"
/** The kernel was shut down before or while the request ran. */
export { KernelClosed } from "./kernel/KernelError.ts"
/** The kernel process died; the message says how. */
export { KernelDied } from "./kernel/KernelError.ts"
/** The kernel could not be started. */
export { KernelStartError } from "./kernel/KernelError.ts"
/** Starts kernel processes; replace it to run kernels elsewhere. */
export { KernelSpawner } from "./kernel/KernelProcess.ts"
/** One started kernel process. */
export type { KernelProcess } from "./kernel/KernelProcess.ts"
/** What to start: command, args, cwd, env, frame channel. */
export type { SpawnSpec } from "./kernel/KernelProcess.ts"
/** The channel frames travel on: stdio or fd 3. */
export type { FrameChannel } from "./kernel/KernelProcess.ts"
/** The interrupt, shutdown and start-up delays in force. */
export { KernelTimings } from "./kernel/KernelTimings.ts"
/** How long an interrupted cell may take before its kernel is killed. */
export { INTERRUPT_ESCALATION_MS } from "./kernel/KernelTimings.ts"
/** The grace of each shutdown step. */
export { SHUTDOWN_GRACE_MS } from "./kernel/KernelTimings.ts"

// Backends

/** What a language contributes: id, names, guidance, runner files, interpreter, env, launch. */
export type { KernelBackend } from "./backends/Backend.ts"
/** How one kernel process is started and primed: command, args, frame channel, prelude. */
export type { KernelLaunch } from "./backends/Backend.ts"
/** The id of a registered backend: the tool's `language`. */
export type { BackendId } from "./backends/index.ts"
/** Every registered backend, in the order the tool lists them. */
export { registeredBackends } from "./backends/index.ts"
/** A backend's runtime is missing, saying how to fix it. */
export { RuntimeUnavailable } from "./backends/Backend.ts"

// Settings and runtimes

/** The resolved settings in force. */
export { Settings } from "./services/config/Settings.ts"
/** The resolved settings, as a value. */
export type { SettingsValues } from "./services/config/Settings.ts"
/** Settings as an embedder passes them (every field optional). */
export type { SettingsInput } from "./services/config/Settings.ts"
/** Settings that do not decode, with where and why. */
export { InvalidSettings } from "./services/config/Settings.ts"
/** A language id of the `eval` tool. */
export type { EvalLanguage } from "./services/config/Settings.ts"
/** The languages the settings enable. */
export { enabledLanguages } from "./services/config/Settings.ts"
/** Resolves the Python interpreter and says why it was chosen. */
export { PythonRuntime } from "./backends/python/PythonRuntime.ts"
/** A resolved Python interpreter. */
export type { PythonInterpreter } from "./backends/python/PythonRuntime.ts"
/** No usable Python interpreter, with what was tried. */
export { PythonUnavailable } from "./backends/python/PythonRuntime.ts"

// Sandbox

/** Starts kernels inside bubblewrap when the sandbox is on. */
export { Sandbox } from "./services/isolation/Sandbox.ts"
/** The shape of the `Sandbox` service. */
export type { SandboxService } from "./services/isolation/Sandbox.ts"
/** What the sandbox probe found. */
export type { SandboxProbe } from "./services/isolation/Sandbox.ts"
/** The sandbox is required but cannot start. */
export { SandboxUnavailable } from "./services/isolation/Sandbox.ts"
/** A kernel limit is set but the tool that applies it is missing. */
export { LimitsUnavailable } from "./services/isolation/Sandbox.ts"
/** `off`, `auto` or `required`. */
export type { SandboxMode } from "./services/isolation/SandboxSettings.ts"
/** `allow` or `none`. */
export type { SandboxNetwork } from "./services/isolation/SandboxSettings.ts"
/** The sandbox settings in force. */
export type { SandboxSettings } from "./services/isolation/SandboxSettings.ts"
/** A kernel's memory and process-count limits. */
export type { KernelLimits } from "./services/isolation/SandboxSettings.ts"
/** The door a call came in by: library, eval, repl, mcp, mcp-http or runner. */
export type { FrontDoor } from "./services/isolation/SandboxSettings.ts"
/** The sandbox mode a front door uses when none is set. */
export { defaultSandboxMode } from "./services/isolation/SandboxSettings.ts"

// Agent bridge

/** What answers `agent()`, `completion()` and `parallel()` from cells. */
export { AgentBridge } from "./kernel/AgentBridge.ts"
/** One call from a cell to the bridge. */
export type { BridgeCall } from "./kernel/AgentBridge.ts"
/** A bridge call that failed; raised in the cell. */
export { AgentBridgeError } from "./kernel/AgentBridge.ts"
/** The default bridge's answer: no agent bridge configured. */
export { AgentBridgeNotConfigured } from "./kernel/AgentBridge.ts"

// Output, artifacts, kv, notebooks

/** Bounds a cell's output, spilling the whole of it to an artifact when cut. */
export { OutputSink } from "./services/output/OutputSink.ts"
/** One output as the sink keeps it. */
export type { SinkOutput } from "./services/output/OutputSink.ts"
/** The bounded outputs of a cell and what was cut. */
export type { SinkResult } from "./services/output/OutputSink.ts"
/** What was cut from a cell's output and where the whole of it is. */
export type { Truncation } from "./services/output/OutputSink.ts"
/** Session artifacts (full outputs, images) in a private directory. */
export { ArtifactStore } from "./services/output/ArtifactStore.ts"
/** The artifacts directory cannot be used, with why. */
export { ArtifactDirUnavailable } from "./services/output/ArtifactStore.ts"
/** The `artifact://` URI of an artifact id. */
export { artifactUri } from "./services/output/ArtifactStore.ts"
/** The kv store cells share across languages. */
export { KvStore } from "./services/storage/KvStore.ts"
/** The shape of the `KvStore` service. */
export type { KvStoreService } from "./services/storage/KvStore.ts"
/** A kv key or value the store refuses. */
export { KvRefused } from "./services/storage/KvStore.ts"
/** A directory that is not safe to keep state in (not ours, not private, a symlink). */
export { PrivateDirRefused } from "./services/storage/PrivateDir.ts"
/** Records a session's cells for notebook export. */
export { SessionRecord } from "./services/output/SessionRecord.ts"
/** The shape of the `SessionRecord` service. */
export type { SessionRecordService } from "./services/output/SessionRecord.ts"
/** One recorded cell. */
export type { RecordedCell } from "./services/output/SessionRecord.ts"
/** One output of a notebook cell. */
export type { NotebookOutput } from "./services/output/SessionRecord.ts"
/** A session record that cannot be read or written. */
export { SessionRecordError } from "./services/output/SessionRecord.ts"
/** Recorded cells as an nbformat 4 notebook. */
export { notebookOf } from "./services/output/SessionRecord.ts"
/** A cell's outputs as notebook outputs. */
export { notebookOutputs } from "./services/output/SessionRecord.ts"
