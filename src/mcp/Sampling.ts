/**
 * A cell's `completion()` and `agent()` (each `parallel()` branch is one of them, asked
 * as `ModelCalls` says) as an MCP `sampling/createMessage` request to the client's
 * model, and the client's answer as the value the prelude reads (`{ text, model }`).
 * Pure functions.
 */
import { Result } from "effect"
import { AgentBridgeError } from "../kernel/AgentBridge.ts"
import { modelQuestion } from "../kernel/ModelCalls.ts"

/** How a sampling request is sized when the call does not say. */
export interface SamplingDefaults {
  /** `maxTokens` of a request whose call names none. */
  readonly maxTokens: number
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const refused = (name: string, message: string) => Result.fail(new AgentBridgeError({ name, message }))

/** The `sampling/createMessage` params for a `completion` or `agent` call, or the error its cell gets. */
export const samplingRequest = (
  method: string,
  params: unknown,
  defaults: SamplingDefaults
): Result.Result<Record<string, unknown>, AgentBridgeError> =>
  Result.map(modelQuestion(method, params, "the MCP client's model (by sampling)"), (question) => ({
    // One message per block: before 2025-11-25 a sampling message holds one content block.
    messages: [
      { role: "user", content: { type: "text", text: question.prompt } },
      ...question.images.map((image) => ({ role: "user", content: { type: "image", data: image.data, mimeType: image.mimeType } }))
    ],
    systemPrompt: question.systemPrompt,
    includeContext: "none",
    maxTokens: question.maxTokens ?? defaults.maxTokens,
    ...(question.model === undefined ? {} : { modelPreferences: { hints: [{ name: question.model }] } })
  }))

/** The text blocks of a sampling result's content (one block, or an array of them). */
const textOf = (content: unknown): string | undefined => {
  const blocks = Array.isArray(content) ? content : [content]
  const texts = blocks.filter((block): block is { readonly type: "text"; readonly text: string } =>
    isRecord(block) && block.type === "text" && typeof block.text === "string").map((block) => block.text)
  return texts.length === 0 ? undefined : texts.join("")
}

/** The value a cell's call returns for the client's `sampling/createMessage` result, or the error it raises. */
export const samplingAnswer = (method: string, result: unknown): Result.Result<{ readonly text: string; readonly model?: string }, AgentBridgeError> => {
  if (!isRecord(result)) return refused("ProtocolError", `the MCP client answered ${method}()'s sampling request with something that is not an object`)
  const answer = textOf(result.content)
  if (answer === undefined) {
    return refused("SamplingFailed", `the MCP client's model answered ${method}() with no text (only ${JSON.stringify(Array.isArray(result.content) ? result.content.map((b) => isRecord(b) ? b.type : typeof b) : isRecord(result.content) ? result.content.type : typeof result.content)} content)`)
  }
  return Result.succeed(typeof result.model === "string" ? { text: answer, model: result.model } : { text: answer })
}
