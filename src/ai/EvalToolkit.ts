/**
 * The `eval` tool for agent backends on `effect/ai`: a Tool whose parameters and success
 * are the tool's own Schemas (`EvalParamsSchema`, `EvalOutputSchema`), a Toolkit holding
 * it, and handlers that run each call through `EvalTool` in the session the caller
 * provides as `EvalSession` (one per conversation). The model reads the cell's rendered
 * text and sees its images; a call that cannot run comes back to the model as a failure
 * with the sentence that says what to fix.
 */
import { Context, Effect, Schema } from "effect"
import { Prompt, Tool, Toolkit } from "effect/ai"
import { EvalOutputSchema, EvalParamsSchema, structuredResult } from "../services/tool/EvalSchema.ts"
import { describeEval, EVAL_TOOL_NAME, EvalTool } from "../services/tool/EvalTool.ts"
import { registeredBackends } from "../backends/index.ts"

/** The session an agent's `eval` calls run in (its kernels, variables and kv) and their working directory. */
export class EvalSession extends Context.Service<EvalSession, { readonly sessionId: string; readonly cwd: string }>()(
  "veyyon-eval/EvalSession"
) {}

/** A call that could not run (bad params, a disabled language, no interpreter...): `reason` is the error's tag. */
export class EvalCallFailed extends Schema.TaggedError<EvalCallFailed>()("EvalCallFailed", {
  reason: Schema.String,
  message: Schema.String
}) {}

/** The `eval` tool as an `effect/ai` Tool; its handler needs an `EvalSession` where the model's calls run. */
export const EvalAiTool = Tool.make(EVAL_TOOL_NAME, {
  description: describeEval(registeredBackends(), { enabledByHost: true }),
  parameters: EvalParamsSchema,
  success: EvalOutputSchema,
  failure: EvalCallFailed,
  failureMode: "return",
  dependencies: [EvalSession],
  toModelOutput: (output) => [
    Prompt.textPart({ text: output.text.length > 0 ? output.text : "(no output)" }),
    ...output.images.flatMap((image) => image.data === undefined ? [] : [Prompt.filePart({ mediaType: image.mimeType, data: image.data })])
  ]
})

/** A Toolkit holding the `eval` tool. */
export const EvalToolkit = Toolkit.make(EvalAiTool)

/** The Toolkit's handler: each call runs through `EvalTool` in the caller's `EvalSession`. */
export const EvalToolkitLive = EvalToolkit.toLayer(Effect.gen(function*() {
  const tool = yield* EvalTool
  return EvalToolkit.of({
    eval: Effect.fnUntraced(function*(params) {
      const session = yield* EvalSession
      const result = yield* tool.run(params, { sessionId: session.sessionId, cwd: session.cwd }).pipe(
        Effect.mapError((error) => new EvalCallFailed({ reason: error._tag, message: error.message }))
      )
      return structuredResult(result, { withImageData: true })
    })
  })
}))
