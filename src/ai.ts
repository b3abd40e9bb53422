/**
 * veyyon-eval/ai: the `eval` tool for agent backends on `effect/ai`, as a Tool and a
 * Toolkit whose parameters and success are the tool's own Schemas.
 */

/** The `eval` tool as an `effect/ai` Tool; its handler needs an `EvalSession`. */
export { EvalAiTool } from "./ai/EvalToolkit.ts"
/** A Toolkit holding the `eval` tool. */
export { EvalToolkit } from "./ai/EvalToolkit.ts"
/** The Toolkit's handler: each call runs through `EvalTool` in the caller's `EvalSession`. */
export { EvalToolkitLive } from "./ai/EvalToolkit.ts"
/** The session (and working directory) an agent's `eval` calls run in; provide one per conversation. */
export { EvalSession } from "./ai/EvalToolkit.ts"
/** A call that could not run, as the model reads it: the error's tag and its sentence. */
export { EvalCallFailed } from "./ai/EvalToolkit.ts"
/** An `AgentBridge` layer answered by the app's `effect/ai` `LanguageModel`: cells' `completion()`, `agent()` and `parallel()` ask it. */
export { languageModelBridge } from "./ai/LanguageModelBridge.ts"
