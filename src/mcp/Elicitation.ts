/**
 * A cell's `input()` as an MCP `elicitation/create` request in form mode: one string
 * field, a message that says which session's cell asks (so a cell cannot pose as the
 * server), and the person's answer, decline or cancel as the line or the end of input
 * the cell sees. Pure functions.
 */
import { Result } from "effect"
import { type AgentBridgeError, inputUnanswered } from "../kernel/AgentBridge.ts"

/** The longest part of a cell's prompt the message shows, in characters. */
export const MAX_PROMPT_CHARS = 500

/** The name of the form's one field. */
export const ANSWER_FIELD = "line"

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The prompt a cell gave, as the message may show it: one line, clamped. */
const shownPrompt = (prompt: string): string => {
  const flat = prompt.replace(/[\u0000-\u001f\u007f]+/g, " ").trim()
  return flat.length > MAX_PROMPT_CHARS ? `${flat.slice(0, MAX_PROMPT_CHARS - 1)}…` : flat
}

/** The `elicitation/create` params for a cell's request for a line, from `session` (a label the person can tell apart). */
export const inputRequest = (params: unknown, session: string, protocolVersion: string): Record<string, unknown> => {
  const prompt = isRecord(params) && typeof params.prompt === "string" ? shownPrompt(params.prompt) : ""
  const message = `A code cell in veyyon session ${session} is waiting for a line of input (its input() call)` +
    (prompt === "" ? "." : `; the cell's own prompt reads: ${JSON.stringify(prompt)}`) +
    " What you type goes to that cell only."
  return {
    ...(protocolVersion >= "2025-11-25" ? { mode: "form" } : {}),
    message,
    requestedSchema: {
      type: "object",
      properties: { [ANSWER_FIELD]: { type: "string", title: "Input", description: "The line the cell reads (without a newline)." } },
      required: [ANSWER_FIELD]
    }
  }
}

/** The line a cell reads for the person's elicitation result, or the end of input it sees. */
export const inputAnswer = (result: unknown): Result.Result<string, AgentBridgeError> => {
  const action = isRecord(result) ? result.action : undefined
  if (action === "accept") {
    const content = isRecord(result) && isRecord(result.content) ? result.content[ANSWER_FIELD] : undefined
    return Result.succeed(typeof content === "string" ? content : content === undefined ? "" : String(content))
  }
  if (action === "decline") return Result.fail(inputUnanswered("the person declined to answer"))
  if (action === "cancel") return Result.fail(inputUnanswered("the person dismissed the request without answering"))
  return Result.fail(inputUnanswered("the MCP client answered the request with no action the server knows"))
}
