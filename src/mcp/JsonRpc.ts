/**
 * JSON-RPC 2.0 framing for the MCP doors, as plain functions: one frame (a line on
 * stdio, a body over HTTP) becomes a request, a notification, a client's response, or
 * the error reply owed for it. Nothing here throws on hostile input.
 */

/** The largest message either door accepts, in bytes (8 MiB); a bigger one gets an error reply. */
export const MAX_MESSAGE_BYTES = 8 * 1024 * 1024

/** The MCP protocol versions the server speaks, newest first (those `initialize` can negotiate). */
export const SUPPORTED_PROTOCOL_VERSIONS: ReadonlyArray<string> = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

/** JSON-RPC error codes used by the doors. */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** MCP's code for a resource that does not exist. */
  ResourceNotFound: -32002
} as const

/** A JSON-RPC request id as the client sent it. */
export type JsonRpcId = string | number

/** One outgoing JSON-RPC message. */
export type JsonRpcOut =
  | { readonly jsonrpc: "2.0"; readonly id: JsonRpcId | null; readonly result: unknown }
  | { readonly jsonrpc: "2.0"; readonly id: JsonRpcId | null; readonly error: { readonly code: number; readonly message: string } }
  | { readonly jsonrpc: "2.0"; readonly method: string; readonly params?: unknown }
  | { readonly jsonrpc: "2.0"; readonly id: JsonRpcId; readonly method: string; readonly params: unknown }

/** The error member of a client's response, as far as the server reads it. */
export interface ResponseError {
  readonly code: number
  readonly message: string
}

/** What one incoming frame holds. */
export type Frame =
  | { readonly _tag: "Request"; readonly id: JsonRpcId; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Response"; readonly id: JsonRpcId | null; readonly result?: unknown; readonly error?: ResponseError }
  | { readonly _tag: "Invalid"; readonly reply: JsonRpcOut }

/** An error reply. */
export const errorReply = (id: JsonRpcId | null, code: number, message: string): JsonRpcOut => ({
  jsonrpc: "2.0",
  id,
  error: { code, message }
})

/** A result reply. */
export const resultReply = (id: JsonRpcId, result: unknown): JsonRpcOut => ({ jsonrpc: "2.0", id, result })

/** A request from the server to its client. */
export const requestMessage = (id: JsonRpcId, method: string, params: unknown): JsonRpcOut => ({ jsonrpc: "2.0", id, method, params })

/** A notification. */
export const notification = (method: string, params?: unknown): JsonRpcOut =>
  params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params }

/** The error reply for a message over `MAX_MESSAGE_BYTES`. */
export const tooLargeReply = (limit: number = MAX_MESSAGE_BYTES): JsonRpcOut =>
  errorReply(
    null,
    ErrorCode.InvalidRequest,
    `The message is larger than the ${Math.round(limit / (1024 * 1024))} MiB limit and was dropped; ` +
      `send smaller cells (put large data in a file the cell reads).`
  )

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const isId = (value: unknown): value is JsonRpcId =>
  typeof value === "string" || (typeof value === "number" && Number.isFinite(value))

const invalid = (id: JsonRpcId | null, message: string): Frame => ({
  _tag: "Invalid",
  reply: errorReply(id, ErrorCode.InvalidRequest, message)
})

const MAX_ERROR_MESSAGE_CHARS = 500

/** A client's error member, its message clamped (a hostile client's text reaches a cell). */
const responseErrorOf = (error: unknown): ResponseError => {
  const code = isRecord(error) && typeof error.code === "number" && Number.isFinite(error.code) ? error.code : ErrorCode.InternalError
  const message = isRecord(error) && typeof error.message === "string" ? error.message : "the client answered with an error"
  return { code, message: message.length > MAX_ERROR_MESSAGE_CHARS ? `${message.slice(0, MAX_ERROR_MESSAGE_CHARS - 1)}…` : message }
}

/** Classifies an already parsed JSON value as a JSON-RPC frame. */
export const classifyFrame = (value: unknown): Frame => {
  if (Array.isArray(value)) return invalid(null, "Batches are not supported: send one JSON-RPC message per line or request.")
  if (!isRecord(value)) return invalid(null, "A JSON-RPC message must be a JSON object.")
  const id = isId(value.id) ? value.id : null
  if (value.jsonrpc !== "2.0") return invalid(id, "The message must have \"jsonrpc\": \"2.0\".")
  if (!("method" in value)) {
    if ("result" in value) return { _tag: "Response", id, result: value.result }
    if ("error" in value) return { _tag: "Response", id, error: responseErrorOf(value.error) }
    return invalid(id, "A request needs a \"method\" string.")
  }
  if (typeof value.method !== "string") return invalid(id, "\"method\" must be a string.")
  if ("params" in value && value.params !== undefined && !isRecord(value.params)) {
    return { _tag: "Invalid", reply: errorReply(id, ErrorCode.InvalidParams, "\"params\" must be a JSON object.") }
  }
  if (!("id" in value)) return { _tag: "Notification", method: value.method, params: value.params }
  if (!isId(value.id)) return invalid(null, "\"id\" must be a string or a number.")
  return { _tag: "Request", id: value.id, method: value.method, params: value.params }
}

/** Parses one frame of text; malformed JSON gives the -32700 reply with `id: null`. */
export const parseFrame = (text: string): Frame => {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return {
      _tag: "Invalid",
      reply: errorReply(null, ErrorCode.ParseError, `Parse error: the message is not valid JSON (${(error as Error).message}).`)
    }
  }
  return classifyFrame(value)
}

/** The `_meta.progressToken` of a request's params, when it has one. */
export const progressTokenOf = (params: unknown): JsonRpcId | undefined => {
  if (!isRecord(params) || !isRecord(params._meta)) return undefined
  const token = params._meta.progressToken
  return isId(token) ? token : undefined
}
