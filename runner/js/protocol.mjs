/** The frame channel: writing frames to the host, the kernel state, and parsing host lines. */
import * as fs from "node:fs"
import * as net from "node:net"

/** The MIME type under which status events travel in display bundles. */
export const STATUS_MIME = "application/x-veyyon-status"

export const CHUNK_CHARS = 64 * 1024

export const PROTOCOL_ERROR = "ProtocolError"

export const realExit = process.exit.bind(process)

// fs.writeSync as Node has it: the runner turns a cell's writes to fd 1 and 2 through fs into frames.
const writeSync = fs.writeSync

let channelFd = -1
// Whether the channel holds part of a line: an interrupt can end a cell's code anywhere, even
// inside a write, and the next frame must then start on a line of its own. It is set only
// after a write leaves a line unfinished, so an interrupt before or between whole writes (the
// usual case: a frame goes out in one write) leaves no stray newline behind.
let tornLine = false
const pause = new Int32Array(new SharedArrayBuffer(4))

const writeLine = (line) => {
  const data = Buffer.from(line, "utf8")
  let offset = 0
  while (offset < data.length) {
    try {
      offset += writeSync(channelFd, data, offset)
      tornLine = offset < data.length
    } catch (error) {
      if (error.code === "EAGAIN") {
        Atomics.wait(pause, 0, 0, 1)
        continue
      }
      if (error.code === "EPIPE" || error.code === "EBADF" || error.code === "ECONNRESET") realExit(0)
      throw error
    }
  }
}

export const send = (frame) => {
  if (channelFd < 0) throw new Error("the runner is not serving; frames have nowhere to go")
  if (tornLine) writeLine("\n")
  writeLine(JSON.stringify(frame) + "\n")
}

export const diagnose = (text) => {
  try {
    writeSync(2, `veyyon runner: ${text}\n`)
  } catch {
    // stderr is gone too
  }
}

export const state = {
  currentId: null,
  executionCount: 0,
  cellSeq: 0,
  /** The running cell: {id, timers, interrupt: () => void, interrupted: Promise} */
  active: null
}

export const INTERRUPTED = Symbol("interrupted")

const parseRequest = (message) => {
  const id = message.id
  if (typeof id !== "string") return { kind: "invalid", id: null, text: `request id must be a string, got ${message.id === null ? "null" : typeof message.id}` }
  const invalid = (text) => ({ kind: "invalid", id, text: `request ${JSON.stringify(id)}: ${text}` })
  if (typeof message.code !== "string") return invalid("code must be a string")
  const silent = message.silent ?? false
  const storeHistory = message.storeHistory ?? true
  if (typeof silent !== "boolean" || typeof storeHistory !== "boolean") return invalid("silent and storeHistory must be booleans")
  if (message.cwd !== undefined && message.cwd !== null && typeof message.cwd !== "string") return invalid("cwd must be a string")
  const env = message.env
  if (env !== undefined && env !== null) {
    const valid = typeof env === "object" && !Array.isArray(env) && Object.values(env).every((v) => v === null || typeof v === "string")
    if (!valid) return invalid("env must map names to strings (or null to unset)")
  }
  return { kind: "execute", request: { id, code: message.code, silent, storeHistory, cwd: message.cwd ?? undefined, env: env ?? undefined } }
}

const isSize = (value) => typeof value === "number" && value >= 0

/** A snapshot request, or one piece of a restore; a malformed one is answered as its kind's failure, so the host's wait for it ends. */
const parseStateRequest = (message) => {
  if (typeof message.id !== "string") return { kind: "invalid", id: null, text: `${message.type} request id must be a string` }
  if (message.type === "snapshot") {
    const valid = isSize(message.budget) && isSize(message.valueBudget) && (message.known === undefined || typeof message.known === "string")
    return valid
      ? { kind: "snapshot", request: { id: message.id, budget: message.budget, valueBudget: message.valueBudget, known: message.known } }
      : { kind: "snapshot_invalid", id: message.id, text: "budget and valueBudget must be numbers of bytes, known a string" }
  }
  const valid = typeof message.data === "string" && typeof message.more === "boolean" &&
    (message.executionCount === undefined || (Number.isInteger(message.executionCount) && message.executionCount >= 0))
  return valid
    ? { kind: "restore", request: { id: message.id, data: message.data, more: message.more, executionCount: message.executionCount } }
    : { kind: "restore_invalid", id: message.id, text: "a restore piece needs data (a string), more (a boolean) and at most a whole executionCount" }
}

/**
 * Decodes one host line: {kind: "execute", request} | {kind: "exit"} | {kind: "bridge_result", message} |
 * {kind: "introspect", request} | {kind: "snapshot" | "restore", request} | {kind: "invalid", id, text}
 * (and "snapshot_invalid", "restore_invalid" with an id and text).
 */
export const classifyLine = (line) => {
  let message
  try {
    message = JSON.parse(line)
  } catch (error) {
    return { kind: "invalid", id: null, text: `malformed request line (not JSON): ${error.message}` }
  }
  if (message === null || typeof message !== "object" || Array.isArray(message)) {
    return { kind: "invalid", id: null, text: `malformed request line: expected a JSON object, got ${Array.isArray(message) ? "array" : message === null ? "null" : typeof message}` }
  }
  if (message.type === "exit") return { kind: "exit" }
  if (message.type === "bridge_result") {
    return typeof message.callId === "string"
      ? { kind: "bridge_result", message }
      : { kind: "invalid", id: null, text: "bridge_result without a string callId" }
  }
  if (message.type === "complete" || message.type === "inspect") return parseIntrospect(message)
  if (message.type === "snapshot" || message.type === "restore") return parseStateRequest(message)
  if (message.type !== undefined && message.type !== "execute") {
    return { kind: "invalid", id: typeof message.id === "string" ? message.id : null, text: `unknown message type ${JSON.stringify(message.type)}` }
  }
  return parseRequest(message)
}

// ---------------------------------------------------------------------------

const MAX_INTROSPECT_CODE = 1 << 20

const parseIntrospect = (message) => {
  if (typeof message.id !== "string") return { kind: "invalid", id: null, text: `${message.type} request id must be a string` }
  if (typeof message.code !== "string" || message.code.length > MAX_INTROSPECT_CODE) {
    return { kind: "invalid", id: message.id, text: `code must be a string of at most ${MAX_INTROSPECT_CODE} characters` }
  }
  const length = Array.from(message.code).length
  const cursor = Number.isInteger(message.cursorPos) && message.cursorPos >= 0 && message.cursorPos <= length ? message.cursorPos : length
  return { kind: "introspect", request: { type: message.type, id: message.id, code: message.code, cursor, detail: message.detailLevel === 1 ? 1 : 0 } }
}

export const protocolError = (id, text) =>
  send({ type: "error", id, ename: PROTOCOL_ERROR, evalue: text, traceback: [`${PROTOCOL_ERROR}: ${text}`] })

export const openChannel = () => {
  let stats
  try {
    stats = fs.fstatSync(3)
  } catch {
    stats = undefined
  }
  if (stats !== undefined && (stats.isSocket() || stats.isFIFO())) {
    channelFd = 3
    // Writable as well, or the socket counts as finished at EOF and closes fd 3 before the queued requests answer.
    return new net.Socket({ fd: 3, readable: true, writable: true, allowHalfOpen: true })
  }
  channelFd = 1
  return process.stdin
}
