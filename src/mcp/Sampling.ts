/**
 * A cell's `completion()` and `agent()` (each `parallel()` branch is one of them) as an
 * MCP `sampling/createMessage` request to the client's model, and the client's answer as
 * the value the prelude reads (`{ text, model }`). Pure functions.
 */
import { Result } from "effect"
import { AgentBridgeError } from "../kernel/AgentBridge.ts"

/** The bridge methods sampling answers. */
export const SAMPLING_METHODS: ReadonlySet<string> = new Set(["completion", "agent"])

/** How a sampling request is sized when the call does not say. */
export interface SamplingDefaults {
  /** `maxTokens` of a request whose call names none. */
  readonly maxTokens: number
}

/** The longest `maxTokens` a call may ask for. */
export const MAX_SAMPLING_TOKENS = 1_000_000

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const refused = (name: string, message: string) => Result.fail(new AgentBridgeError({ name, message }))

const text = (value: unknown): string | undefined => (typeof value === "string" && value.trim() !== "" ? value : undefined)

const schemaClause = (schema: unknown): string =>
  schema === undefined || schema === null
    ? ""
    : ` Answer with JSON only (no prose, no code fence), one value that matches this JSON Schema: ${JSON.stringify(schema)}`

/** What the system prompt says asks, and why. */
const systemPrompt = (method: string, params: Record<string, unknown>): string => {
  if (method === "completion") {
    return "A code cell running in the veyyon eval tool (a persistent Python, JavaScript or Ruby kernel an agent drives) asks your model for one completion through its completion() call. Answer the user message directly." +
      schemaClause(params.schema)
  }
  const kind = text(params.agent) ?? "deep"
  const label = text(params.label)
  return `A code cell running in the veyyon eval tool asks a sub-agent (kind "${kind}"${label === undefined ? "" : `, label ${JSON.stringify(label)}`}) to carry out the task in the user message, through its agent() call. Work the task through and answer with its final result only.` +
    schemaClause(params.schema)
}

const UNSUPPORTED_AGENT_OPTIONS = ["isolated", "apply", "merge"] as const

/** The `sampling/createMessage` params for a `completion` or `agent` call, or the error its cell gets. */
export const samplingRequest = (
  method: string,
  params: unknown,
  defaults: SamplingDefaults
): Result.Result<Record<string, unknown>, AgentBridgeError> => {
  if (!isRecord(params)) return refused("ProtocolError", `${method}() sent params that are not an object`)
  const prompt = text(params.prompt)
  if (prompt === undefined) return refused("ProtocolError", `${method}() sent no prompt`)
  if (method === "agent") {
    const given = UNSUPPORTED_AGENT_OPTIONS.filter((name) => params[name] !== undefined && params[name] !== null && params[name] !== false)
    if (given.length > 0) {
      return refused(
        "AgentOptionUnsupported",
        `agent(${given.map((name) => `${name}=...`).join(", ")}) has no meaning when the MCP client's model answers through sampling (it works in no checkout of yours); leave ${given.join(", ")} out`
      )
    }
  }
  const asked = params.maxTokens
  const maxTokens = typeof asked === "number" && Number.isInteger(asked) && asked > 0 ? Math.min(asked, MAX_SAMPLING_TOKENS) : defaults.maxTokens
  const model = text(params.model)
  return Result.succeed({
    messages: [{ role: "user", content: { type: "text", text: prompt } }],
    systemPrompt: systemPrompt(method, params),
    includeContext: "none",
    maxTokens,
    ...(model === undefined ? {} : { modelPreferences: { hints: [{ name: model }] } })
  })
}

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
