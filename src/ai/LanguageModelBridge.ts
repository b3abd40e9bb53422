/**
 * An `AgentBridge` answered by the app's own `effect/ai` `LanguageModel`: a cell's
 * `completion()`, `agent()` and each `parallel()` branch become one `generateText` call
 * (the system prompt says what asks; a call's schema goes into it and the answer takes
 * the prelude's parse-and-validate path). A cell's `input()` gets end of input with a
 * sentence (a model is not a person); a model's failure reaches the cell as `ModelFailed`.
 */
import { Effect, Layer, Result } from "effect"
import { type AiError, LanguageModel } from "effect/ai"
import { AgentBridge, AgentBridgeError, type BridgeCall, INPUT_METHOD, inputUnanswered } from "../kernel/AgentBridge.ts"
import { MODEL_METHODS, modelQuestion } from "../kernel/ModelCalls.ts"

const modelFailed = (method: string) => (error: AiError.AiError) =>
  new AgentBridgeError({ name: "ModelFailed", message: `the app's language model failed ${method}(): ${error.message}` })

/** Answers one call through `model`. */
const answer = (model: LanguageModel.LanguageModel, call: BridgeCall): Effect.Effect<unknown, AgentBridgeError> => {
  if (call.method === INPUT_METHOD) return Effect.fail(inputUnanswered("the app answers cells with a language model, and nothing here answers a cell's input"))
  if (!MODEL_METHODS.has(call.method)) {
    return Effect.fail(new AgentBridgeError({ name: "AgentBridgeUnavailable", message: `${call.method}() is not answered by the app's language model` }))
  }
  const question = modelQuestion(call.method, call.params, "the app's language model")
  if (Result.isFailure(question)) return Effect.fail(question.failure)
  return model.generateText({
    prompt: [
      { role: "system", content: question.success.systemPrompt },
      {
        role: "user",
        content: [
          { type: "text", text: question.success.prompt },
          ...question.success.images.map((image) => ({ type: "file" as const, mediaType: image.mimeType, data: Buffer.from(image.data, "base64") }))
        ]
      }
    ]
  }).pipe(
    Effect.map((response) => ({ text: response.text })),
    Effect.mapError(modelFailed(call.method))
  )
}

/** The `AgentBridge` layer answered by the `LanguageModel` in context: `completion()` and `agent()` for an Effect agent backend in one line. */
export const languageModelBridge: Layer.Layer<AgentBridge, never, LanguageModel.LanguageModel> = Layer.effect(
  AgentBridge,
  Effect.map(Effect.service(LanguageModel.LanguageModel), (model) => AgentBridge.of({ call: (call) => answer(model, call) }))
)
