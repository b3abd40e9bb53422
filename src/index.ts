/**
 * veyyon-eval: Python, JavaScript and Ruby execution backends for coding agents. Embed `EvalLive` (or
 * `evalLayer(options)`) and call `EvalTool.run`, or use the kernel pieces directly.
 */
export { EvalLive, evalLayer, type EvalLayerOptions, type EvalServices } from "./layers/EvalLive.ts"
export {
  BackendUnavailable,
  checkParams,
  EVAL_TOOL_NAME,
  evalDescription,
  evalParametersSchema,
  EvalTool,
  InvalidEvalParams,
  type EvalContext,
  type EvalError,
  type EvalParams,
  type EvalResult,
  type EvalToolDefinition,
  type EvalToolService,
  type IntrospectError,
  type IntrospectParams
} from "./services/EvalTool.ts"
export { type Completion, type Inspection, IntrospectionFailed } from "./kernel/Introspection.ts"
export {
  InvalidCwd,
  KernelKey,
  KernelRegistry,
  RESTART_STATUS_OP,
  type KernelPlace,
  type KernelRegistryService,
  type RegistryError,
  type RegistryRequest
} from "./services/KernelRegistry.ts"
export { type BackendId, registeredBackends } from "./backends/index.ts"
export { type KernelBackend, type KernelLaunch, RuntimeUnavailable } from "./backends/Backend.ts"
export { AgentBridge, AgentBridgeError, AgentBridgeNotConfigured, type BridgeCall } from "./services/AgentBridge.ts"
export { Settings, enabledLanguages, type SettingsInput, type SettingsValues, type EvalLanguage, InvalidSettings } from "./services/Settings.ts"
export { LimitsUnavailable, Sandbox, SandboxUnavailable, type SandboxProbe, type SandboxService } from "./services/Sandbox.ts"
export { defaultSandboxMode, type FrontDoor, type KernelLimits, type SandboxMode, type SandboxNetwork, type SandboxSettings } from "./services/SandboxSettings.ts"
export { PythonRuntime, PythonUnavailable, type PythonInterpreter } from "./services/PythonRuntime.ts"
export { ArtifactStore, artifactUri } from "./services/ArtifactStore.ts"
export { KvStore, KvRefused, type KvStoreService } from "./services/KvStore.ts"
export { ensurePrivateDir, PrivateDirRefused } from "./services/PrivateDir.ts"
export {
  notebookOf,
  notebookOutputs,
  type NotebookOutput,
  type RecordedCell,
  SessionRecord,
  SessionRecordError,
  type SessionRecordService
} from "./services/SessionRecord.ts"
export { OutputSink, type SinkOutput, type SinkResult, type Truncation } from "./services/OutputSink.ts"
export { clampTimeoutSeconds, InvalidTimeout } from "./services/CellTimeout.ts"
export * as Kernel from "./kernel/Kernel.ts"
export { KernelOutput, type CellOutcome } from "./kernel/KernelOutput.ts"
export { KernelClosed, KernelDied, KernelStartError, type KernelError } from "./kernel/KernelError.ts"
export { KernelSpawner, type FrameChannel, type KernelProcess, type SpawnSpec } from "./kernel/KernelProcess.ts"
export { KernelTimings, INTERRUPT_ESCALATION_MS, SHUTDOWN_GRACE_MS } from "./kernel/KernelTimings.ts"
export { NodeKernelSpawnerLive } from "./layers/NodeKernelSpawner.ts"
export { makeScriptedSpawner } from "./layers/ScriptedKernelSpawner.ts"
export { renderOutputsAsText, renderToolCell, type ToolCell } from "./render/ToolRenderer.ts"
export { renderExecution, startExecution, pushExecutionOutput, finishExecution, renderExecutionView } from "./render/InteractiveRenderer.ts"
export {
  clampLine,
  displayColumns,
  EXECUTION_MAX_DISPLAY_COLUMNS,
  EXECUTION_PREVIEW_LINES,
  EXECUTION_STREAMING_LINE_CAP,
  TOOL_PREVIEW_LINES
} from "./render/Columns.ts"
export { renderBundle, type ImagePayload } from "./render/Mime.ts"
