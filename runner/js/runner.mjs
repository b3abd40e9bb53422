/**
 * veyyon JavaScript kernel runner: one Node process serving code cells over the same NDJSON
 * protocol as runner.py.
 *
 * Plain ESM, Node 20, no dependencies. Start it as `node runner.mjs` with the protocol on
 * fd 3, a socket the host both writes requests to and reads frames from (spawn with
 * stdio ["ignore", "pipe", "pipe", "pipe"]). Frames never travel on fd 1: console.*,
 * process.stdout/stderr and the stdio of child processes become stdout/stderr frames, and
 * whatever still reaches fd 1 or fd 2 (fs.writeSync(1, ...), native code) is plain output
 * the host shows as such, so nothing a cell prints can pass for a frame. Child processes
 * never inherit fd 3. Without an open fd 3 the runner serves stdin/stdout instead, for
 * piping a script of requests by hand. Importing this module does not start the server.
 *
 * Host -> runner, one JSON object per line:
 *   {"id": str, "code": str, "silent": bool, "storeHistory": bool, "cwd"?: str, "env"?: {str: str|null}}
 *   {"type": "exit"}
 *   {"type": "bridge_result", "callId": str, "ok": true, "value": any}
 *   {"type": "bridge_result", "callId": str, "ok": false, "error": {"name": str, "message": str}}
 *   {"type": "complete", "id": str, "code": str, "cursorPos": int}
 *   {"type": "inspect", "id": str, "code": str, "cursorPos": int, "detailLevel": 0|1}
 *     (answered at once, never counted as a cell; cursorPos in code points)
 *
 * Runner -> host, one JSON object per line:
 *   {"type": "started", "id"}        (sent once a SIGINT would interrupt the cell)
 *   {"type": "stdout"|"stderr", "id", "data": str}
 *   {"type": "display"|"result", "id", "bundle": {mime: value}}
 *   {"type": "error", "id", "ename", "evalue", "traceback": [line, ...]}
 *   {"type": "done", "id", "status": "ok"|"error", "executionCount": int, "cancelled": bool}
 *   {"type": "bridge", "id", "callId", "method", "params"}
 *   {"type": "complete_reply", "id", "matches": [str], "cursorStart": int, "cursorEnd": int, "error"?: str}
 *   {"type": "inspect_reply", "id", "found": bool, "bundle": {mime: value}, "error"?: str}
 * A malformed line yields an error frame with ename "ProtocolError" (id null when none can
 * be read; otherwise followed by a done with status "error").
 *
 * Cells run in the runner's own realm (as in the node REPL), so objects Node's APIs return
 * pass instanceof checks. Each cell is one script in V8's REPL mode: top-level await, let
 * and const that persist and may be declared again, and the completion value as the result
 * (undefined: none). `import ... from "x"` statements and `import("x")` resolve from the
 * kernel's working directory; `require` does too. SIGINT stops a cell's synchronous code
 * and abandons a pending await (clearing the timers the cell set); between cells it is
 * ignored; listeners a cell adds with process.on("SIGINT") are called by the runner. A
 * loop that starts after an await cannot be stopped in-process: the host then kills the
 * kernel.
 *
 * display(value, ...), display(bundle, {raw: true}), display.html/markdown/image(...):
 * a value's bundle comes from its [Symbol.for("veyyon.mimebundle")]() or toMIMEBundle()
 * method when it has one, always with text/plain (util.inspect) added.
 */
import * as childProcess from "node:child_process"
import * as fs from "node:fs"
import inspector from "node:inspector"
import Module, { createRequire, syncBuiltinESMExports } from "node:module"
import * as net from "node:net"
import * as path from "node:path"
import { Writable } from "node:stream"
import { StringDecoder } from "node:string_decoder"
import * as timers from "node:timers"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as util from "node:util"
import * as vm from "node:vm"
import { Worker } from "node:worker_threads"
import { createPrelude } from "./prelude.mjs"

/** The MIME type under which status events travel in display bundles. */
export const STATUS_MIME = "application/x-veyyon-status"
/** The method a value defines to give display() its own MIME bundle. */
export const MIME_HOOK = Symbol.for("veyyon.mimebundle")
const CHUNK_CHARS = 64 * 1024
const MAX_PLAIN_CHARS = 1_000_000
const PROTOCOL_ERROR = "ProtocolError"
const IMPORT_NAME = "__veyyonImport"
const CELL_HOOK = Symbol.for("veyyon.cell")
const IMAGE_MIMES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"])
const RUNNER_FILES = [fileURLToPath(import.meta.url), fileURLToPath(new URL("./prelude.mjs", import.meta.url))]

const realExit = process.exit.bind(process)

// ---------------------------------------------------------------------------
// Frames

let channelFd = -1
let tornLine = false
const pause = new Int32Array(new SharedArrayBuffer(4))

const writeLine = (line) => {
  const data = Buffer.from(line, "utf8")
  let offset = 0
  tornLine = true
  while (offset < data.length) {
    try {
      offset += fs.writeSync(channelFd, data, offset)
    } catch (error) {
      if (error.code === "EAGAIN") {
        Atomics.wait(pause, 0, 0, 1)
        continue
      }
      if (error.code === "EPIPE" || error.code === "EBADF" || error.code === "ECONNRESET") realExit(0)
      throw error
    }
  }
  tornLine = false
}

const send = (frame) => {
  if (channelFd < 0) throw new Error("the runner is not serving; frames have nowhere to go")
  if (tornLine) writeLine("\n")
  writeLine(JSON.stringify(frame) + "\n")
}

const diagnose = (text) => {
  try {
    fs.writeSync(2, `veyyon runner: ${text}\n`)
  } catch {
    // stderr is gone too
  }
}

// ---------------------------------------------------------------------------
// Kernel state

const state = {
  currentId: null,
  executionCount: 0,
  cellSeq: 0,
  /** The running cell: {id, timers, interrupt: () => void, interrupted: Promise} */
  active: null
}

const INTERRUPTED = Symbol("interrupted")

const sendStream = (kind, text) => {
  if (text.length === 0 || state.currentId === null) return
  for (let start = 0; start < text.length; start += CHUNK_CHARS) {
    send({ type: kind, id: state.currentId, data: text.slice(start, start + CHUNK_CHARS) })
  }
}

/** Sends a status event: a display frame with an application/x-veyyon-status bundle. */
export const emitStatus = (op, fields = {}, requestId = state.currentId) => {
  if (requestId === null) return
  send({ type: "display", id: requestId, bundle: { [STATUS_MIME]: { op, ...fields } } })
}

// ---------------------------------------------------------------------------
// Output: process.stdout/stderr and the console become frames

class FrameStream extends Writable {
  constructor(kind, fd) {
    super({ decodeStrings: false })
    this.kind = kind
    this.fd = fd
    this.decoder = new StringDecoder("utf8")
  }

  _write(chunk, encoding, callback) {
    const text = typeof chunk === "string"
      ? (encoding === "utf8" || encoding === "utf-8" || encoding === "buffer" ? chunk : Buffer.from(chunk, encoding).toString("utf8"))
      : this.decoder.write(chunk)
    sendStream(this.kind, text)
    callback()
  }

  get isTTY() {
    return false
  }
}

const stdoutStream = new FrameStream("stdout", 1)
const stderrStream = new FrameStream("stderr", 2)

const installOutput = () => {
  Object.defineProperty(process, "stdout", { configurable: true, enumerable: true, get: () => stdoutStream })
  Object.defineProperty(process, "stderr", { configurable: true, enumerable: true, get: () => stderrStream })
  process.removeAllListeners("warning")
  process.on("warning", (warning) => {
    if (warning.name === "ExperimentalWarning" && String(warning.message).includes("USE_MAIN_CONTEXT_DEFAULT_LOADER")) return
    stderrStream.write(`(node:${process.pid}) ${warning.name}: ${warning.message}\n`)
  })
  // Under a file-size limit a write past it fails with EFBIG (as in Python) instead of killing the kernel.
  process.on("SIGXFSZ", () => {})
}

// ---------------------------------------------------------------------------
// Child processes: stdio a cell would share with the runner becomes piped output frames

const targetOf = (entry, index) => {
  if (entry === "inherit") return index === 1 ? "stdout" : index === 2 ? "stderr" : undefined
  if (entry === 1 || entry === stdoutStream) return "stdout"
  if (entry === 2 || entry === stderrStream) return "stderr"
  return undefined
}

/** The stdio array to spawn with and which of its pipes feed which frame stream; undefined when nothing changes. */
export const redirectStdio = (stdio) => {
  if (stdio === undefined || stdio === null) return undefined
  const entries = typeof stdio === "string"
    ? stdio === "inherit" ? [0, 1, 2] : [stdio, stdio, stdio]
    : Array.isArray(stdio) ? [...stdio] : undefined
  if (entries === undefined) return undefined
  const targets = new Map()
  for (let index = 1; index < entries.length; index++) {
    const target = targetOf(entries[index], index)
    if (target !== undefined) {
      entries[index] = "pipe"
      targets.set(index, target)
    }
  }
  return targets.size === 0 ? undefined : { stdio: entries, targets }
}

const streamOf = (target) => (target === "stdout" ? stdoutStream : stderrStream)

const emitCaptured = (target, data) => {
  if (data === null || data === undefined || data.length === 0) return
  streamOf(target).write(typeof data === "string" ? data : Buffer.from(data).toString("utf8"))
}

const splitSyncArgs = (args, options) =>
  Array.isArray(args) ? { args, options: options ?? {} } : { args: [], options: args ?? {} }

const execSyncError = (command, result) => {
  const stderr = result.stderr === null || result.stderr === undefined ? "" : String(result.stderr)
  const error = result.error ?? new Error(`Command failed: ${command}${stderr ? `\n${stderr}` : ""}`)
  Object.assign(error, {
    status: result.status,
    signal: result.signal,
    output: result.output,
    pid: result.pid,
    stdout: result.stdout,
    stderr: result.stderr
  })
  return error
}

const installChildProcess = () => {
  const { ChildProcess } = childProcess
  const spawnChild = ChildProcess.prototype.spawn
  ChildProcess.prototype.spawn = function spawn(options) {
    const plan = redirectStdio(options?.stdio)
    if (plan === undefined) return spawnChild.call(this, options)
    const result = spawnChild.call(this, { ...options, stdio: plan.stdio })
    for (const [index, target] of plan.targets) {
      const pipe = this.stdio[index]
      if (pipe === null || pipe === undefined) continue
      const decoder = new StringDecoder("utf8")
      pipe.on("data", (chunk) => streamOf(target).write(decoder.write(chunk)))
      pipe.on("end", () => streamOf(target).write(decoder.end()))
      this.stdio[index] = null
      if (index === 1) this.stdout = null
      if (index === 2) this.stderr = null
    }
    return result
  }

  const spawnSync = childProcess.spawnSync
  const patchedSpawnSync = function spawnSync_(file, args, options) {
    const split = splitSyncArgs(args, options)
    const plan = redirectStdio(split.options.stdio)
    if (plan === undefined) return spawnSync(file, args, options)
    const result = spawnSync(file, split.args, { ...split.options, stdio: plan.stdio })
    for (const [index, target] of plan.targets) {
      emitCaptured(target, result.output?.[index])
      if (result.output) result.output[index] = null
      if (index === 1) result.stdout = null
      if (index === 2) result.stderr = null
    }
    return result
  }

  const execLike = (original, toSpawn) =>
    function execSyncLike(...call) {
      const { file, args, options, command } = toSpawn(...call)
      const plan = redirectStdio(options.stdio)
      if (plan === undefined) return original(...call)
      const result = patchedSpawnSync(file, args, options)
      if (result.error !== undefined || result.status !== 0) throw execSyncError(command, result)
      return result.stdout
    }

  const patchedExecSync = execLike(childProcess.execSync, (command, options = {}) => ({
    file: command,
    args: [],
    options: { ...options, shell: typeof options.shell === "string" ? options.shell : true },
    command
  }))
  const patchedExecFileSync = execLike(childProcess.execFileSync, (file, args, options) => {
    const split = splitSyncArgs(args, options)
    return { file, args: split.args, options: split.options, command: [file, ...split.args].join(" ") }
  })

  const exports = createRequire(import.meta.url)("node:child_process")
  exports.spawnSync = patchedSpawnSync
  exports.execSync = patchedExecSync
  exports.execFileSync = patchedExecFileSync
  syncBuiltinESMExports()
}

// ---------------------------------------------------------------------------
// MIME bundles and display()

const plainText = (value) => {
  let text
  try {
    text = util.inspect(value)
  } catch (error) {
    text = `<${typeof value}; util.inspect threw ${error?.name ?? "an error"}>`
  }
  if (text.length > MAX_PLAIN_CHARS) {
    text = `${text.slice(0, MAX_PLAIN_CHARS)}… [${text.length - MAX_PLAIN_CHARS} characters omitted]`
  }
  return text
}

const isBytes = (value) => value instanceof Uint8Array || value instanceof ArrayBuffer

const toBuffer = (value) => (value instanceof ArrayBuffer ? Buffer.from(value) : Buffer.from(value.buffer, value.byteOffset, value.byteLength))

const normalizeMime = (mime, value) => {
  if (value === null || value === undefined) return undefined
  if (IMAGE_MIMES.has(mime)) {
    if (isBytes(value)) return toBuffer(value).toString("base64")
    return typeof value === "string" ? value : undefined
  }
  if (typeof value === "string") return value
  if (isBytes(value)) return toBuffer(value).toString("utf8")
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "object") {
    try {
      const text = JSON.stringify(value)
      return text === undefined ? undefined : JSON.parse(text)
    } catch {
      return undefined
    }
  }
  return undefined
}

const addEntries = (bundle, data) => {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return
  for (const [mime, value] of Object.entries(data)) {
    const normalized = normalizeMime(mime, value)
    if (normalized !== undefined) bundle[mime] = normalized
  }
}

/** The MIME bundle for value: its mimebundle hook's entries, always with text/plain. */
export const mimeBundle = (value) => {
  const bundle = {}
  if ((typeof value === "object" && value !== null) || typeof value === "function") {
    let hook
    try {
      hook = typeof value[MIME_HOOK] === "function" ? value[MIME_HOOK] : typeof value.toMIMEBundle === "function" ? value.toMIMEBundle : undefined
    } catch {
      hook = undefined
    }
    if (hook !== undefined) {
      try {
        addEntries(bundle, hook.call(value))
      } catch {
        // a failing hook falls back to text/plain, as a failing _repr_*_ does in Python
      }
    }
  }
  if (typeof bundle["text/plain"] !== "string") bundle["text/plain"] = plainText(value)
  return bundle
}

const emitDisplay = (bundle) => {
  if (state.currentId === null) return
  send({ type: "display", id: state.currentId, bundle })
}

const isOptions = (value) =>
  value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype &&
  Object.keys(value).length > 0 && Object.keys(value).every((key) => key === "raw")

/** Shows each value as a display frame; with a trailing {raw: true} each value already is a MIME bundle. */
export function display(...values) {
  const options = values.length > 1 && isOptions(values[values.length - 1]) ? values.pop() : {}
  for (const value of values) {
    if (options.raw === true) {
      if (value === null || typeof value !== "object" || Array.isArray(value)) {
        throw new TypeError("display(bundle, { raw: true }) takes objects mapping MIME types to values, e.g. { \"text/html\": \"<b>hi</b>\" }")
      }
      const bundle = {}
      addEntries(bundle, value)
      emitDisplay(bundle)
    } else {
      emitDisplay(mimeBundle(value))
    }
  }
}

const sniffImage = (bytes) => (bytes[0] === 0xff && bytes[1] === 0xd8 ? "image/jpeg" : bytes[0] === 0x47 && bytes[1] === 0x49 ? "image/gif" : "image/png")

display.html = (html) => emitDisplay({ "text/html": String(html) })
display.markdown = (markdown) => emitDisplay({ "text/markdown": String(markdown), "text/plain": String(markdown) })
display.image = (data, mime) => {
  if (!isBytes(data) && typeof data !== "string") throw new TypeError("display.image() takes a Buffer, a Uint8Array or a base64 string")
  const bytes = typeof data === "string" ? Buffer.from(data, "base64") : toBuffer(data)
  const type = mime ?? sniffImage(bytes)
  emitDisplay({ [type]: bytes.toString("base64"), "text/plain": `<${type} image, ${bytes.length} bytes>` })
}

// ---------------------------------------------------------------------------
// Host bridge

/** A bridge call the host answered with an error; message is "code: message", code the host's error name. */
export class BridgeError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`)
    this.name = "BridgeError"
    this.code = code
    this.reason = message
  }
}

const bridgeCalls = new Map()
let nextCallId = 0

const resumeCall = (call) => {
  if (call.resumed) return
  call.resumed = true
  emitStatus("timeout", { action: "resume" }, call.requestId)
}

/** Asks the host to run method(params); resolves with its answer, rejects with a BridgeError. */
export const bridgeCall = (method, params = {}) => {
  const requestId = state.active?.id
  if (requestId === undefined) {
    return Promise.reject(new BridgeError("BridgeCancelled", "no cell is running; agent() and completion() work only while the cell that calls them runs"))
  }
  try {
    JSON.stringify(params)
  } catch (error) {
    return Promise.reject(new TypeError(`bridge params must be JSON: ${error.message}`))
  }
  const callId = `c${++nextCallId}`
  return new Promise((resolve, reject) => {
    bridgeCalls.set(callId, { requestId, resolve, reject, resumed: false })
    emitStatus("timeout", { action: "pause" }, requestId)
    send({ type: "bridge", id: requestId, callId, method, params })
  })
}

const resolveBridge = (message) => {
  const call = bridgeCalls.get(message.callId)
  if (call === undefined) {
    diagnose(`bridge_result for unknown callId ${JSON.stringify(message.callId)} ignored`)
    return
  }
  bridgeCalls.delete(message.callId)
  resumeCall(call)
  if (message.ok === true) {
    call.resolve(message.value)
  } else {
    const error = message.error
    call.reject(
      error !== null && typeof error === "object"
        ? new BridgeError(String(error.name ?? "Error"), String(error.message ?? ""))
        : new BridgeError(PROTOCOL_ERROR, `malformed bridge_result: ${JSON.stringify(error)}`)
    )
  }
}

/** Promises a cell started that must settle before its done frame (kv writes the cell may not await). */
const cellWrites = new Set()

const settleBeforeDone = (promise) => {
  cellWrites.add(promise)
  promise.then(() => cellWrites.delete(promise), () => cellWrites.delete(promise))
}

const settleCellWrites = async () => {
  while (cellWrites.size > 0) await Promise.allSettled([...cellWrites])
}

const abandonBridgeCalls = (requestId) => {
  for (const [callId, call] of bridgeCalls) {
    if (call.requestId !== requestId) continue
    bridgeCalls.delete(callId)
    resumeCall(call)
    call.reject(new BridgeError("BridgeCancelled", "the cell ended before the host answered"))
  }
}

// ---------------------------------------------------------------------------
// Cell source: imports that work in a classic script

const REGEX_AFTER = new Set(["return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do", "else", "yield", "await", "extends"])
const NAME_START = /[A-Za-z_$\u0080-\uffff]/
const NAME_PART = /[\w$\u0080-\uffff]/

const skipTrivia = (source, start) => {
  let i = start
  while (i < source.length) {
    const c = source[i]
    if (c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f" || c === "\v" || c === "\u00a0" || c === "\ufeff" || c === "\u2028" || c === "\u2029") {
      i++
    } else if (c === "/" && source[i + 1] === "/") {
      while (i < source.length && source[i] !== "\n") i++
    } else if (c === "/" && source[i + 1] === "*") {
      const end = source.indexOf("*/", i + 2)
      i = end < 0 ? source.length : end + 2
    } else {
      break
    }
  }
  return i
}

const skipString = (source, start) => {
  const quote = source[start]
  let i = start + 1
  while (i < source.length && source[i] !== quote) {
    if (source[i] === "\\") i++
    else if (source[i] === "\n") return i
    i++
  }
  return i + 1
}

const readName = (source, start) => {
  let i = start
  if (i >= source.length || !NAME_START.test(source[i])) return undefined
  while (i < source.length && NAME_PART.test(source[i])) i++
  return { name: source.slice(start, i), end: i }
}

const parseSpecifiers = (source, start) => {
  const parts = []
  let i = skipTrivia(source, start + 1)
  while (source[i] !== "}") {
    let imported
    if (source[i] === "'" || source[i] === '"') {
      const end = skipString(source, i)
      imported = { text: source.slice(i, end), name: undefined }
      i = end
    } else {
      const read = readName(source, i)
      if (read === undefined) return undefined
      imported = { text: read.name, name: read.name }
      i = read.end
    }
    i = skipTrivia(source, i)
    let local = imported.name
    const as = readName(source, i)
    if (as?.name === "as") {
      const read = readName(source, skipTrivia(source, as.end))
      if (read === undefined) return undefined
      local = read.name
      i = skipTrivia(source, read.end)
    }
    if (local === undefined) return undefined
    parts.push(imported.text === local ? local : `${imported.text}: ${local}`)
    if (source[i] === ",") i = skipTrivia(source, i + 1)
    else if (source[i] !== "}") return undefined
  }
  return { pattern: `{ ${parts.join(", ")} }`, end: i + 1 }
}

const skipBalanced = (source, start) => {
  let depth = 0
  let i = start
  while (i < source.length) {
    const c = source[i]
    if (c === "'" || c === '"') {
      i = skipString(source, i)
      continue
    }
    if (c === "{") depth++
    else if (c === "}" && --depth === 0) return i + 1
    i++
  }
  return undefined
}

/** Parses the rest of a static import statement at `start` (just past `import`); undefined when it is not one. */
const parseImportStatement = (source, start) => {
  let i = skipTrivia(source, start)
  let bindings = []
  if (source[i] !== "'" && source[i] !== '"') {
    const first = readName(source, i)
    if (first !== undefined) {
      if (first.name === "from") return undefined
      bindings.push({ kind: "default", local: first.name })
      i = skipTrivia(source, first.end)
      if (source[i] === ",") i = skipTrivia(source, i + 1)
    }
    if (source[i] === "*") {
      const as = readName(source, skipTrivia(source, i + 1))
      if (as?.name !== "as") return undefined
      const local = readName(source, skipTrivia(source, as.end))
      if (local === undefined) return undefined
      bindings.push({ kind: "namespace", local: local.name })
      i = skipTrivia(source, local.end)
    } else if (source[i] === "{") {
      const specifiers = parseSpecifiers(source, i)
      if (specifiers === undefined) return undefined
      bindings.push({ kind: "named", pattern: specifiers.pattern })
      i = skipTrivia(source, specifiers.end)
    }
    if (bindings.length === 0) return undefined
    const from = readName(source, i)
    if (from?.name !== "from") return undefined
    i = skipTrivia(source, from.end)
  }
  if (source[i] !== "'" && source[i] !== '"') return undefined
  const specEnd = skipString(source, i)
  const specifier = source.slice(i, specEnd)
  let end = specEnd
  let options = ""
  const next = skipTrivia(source, specEnd)
  const keyword = readName(source, next)
  if (keyword !== undefined && (keyword.name === "with" || keyword.name === "assert")) {
    const open = skipTrivia(source, keyword.end)
    const close = source[open] === "{" ? skipBalanced(source, open) : undefined
    if (close === undefined) return undefined
    options = `, { ${keyword.name}: ${source.slice(open, close)} }`
    end = close
  }
  const semicolon = skipTrivia(source, end)
  if (source[semicolon] === ";" && !source.slice(end, semicolon).includes("\n")) end = semicolon + 1
  const load = `await ${IMPORT_NAME}(${specifier}${options})`
  const namespace = bindings.find((b) => b.kind === "namespace")
  const defaultBinding = bindings.find((b) => b.kind === "default")
  const named = bindings.find((b) => b.kind === "named")
  let code
  if (bindings.length === 0) code = `${load};`
  else if (namespace !== undefined) {
    code = `const ${namespace.local} = ${load};` + (defaultBinding ? ` const ${defaultBinding.local} = ${namespace.local}.default;` : "")
  } else {
    const members = []
    if (defaultBinding) members.push(`default: ${defaultBinding.local}`)
    if (named) members.push(named.pattern.slice(2, -2))
    code = `const { ${members.filter(Boolean).join(", ")} } = ${load};`
  }
  return { code, end }
}

/**
 * Rewrites a cell so it runs as a classic script: `import(` becomes a loader that resolves
 * from the kernel's working directory, and top-level `import ... from "x"` statements become
 * `const` bindings of awaited imports. Strings, comments, templates and regular expressions
 * are left alone; line breaks are kept, so error positions still match the cell.
 */
export const transformCell = (source) => {
  const edits = []
  let i = source.startsWith("#!") ? source.indexOf("\n") : 0
  if (i < 0) return source
  let prev = null
  let braces = 0
  let nesting = 0
  const templates = []

  const scanTemplate = (start) => {
    let j = start
    while (j < source.length) {
      const c = source[j]
      if (c === "\\") j += 2
      else if (c === "`") return { end: j + 1, open: false }
      else if (c === "$" && source[j + 1] === "{") return { end: j + 2, open: true }
      else j++
    }
    return { end: j, open: false }
  }
  const afterTemplate = (scan) => {
    if (scan.open) {
      braces++
      templates.push(braces)
      prev = { type: "punct", value: "{" }
    } else {
      prev = { type: "literal" }
    }
    return scan.end
  }

  while (i < source.length) {
    const next = skipTrivia(source, i)
    if (next !== i) {
      i = next
      continue
    }
    const c = source[i]
    if (c === "'" || c === '"') {
      i = skipString(source, i)
      prev = { type: "literal" }
    } else if (c === "`") {
      i = afterTemplate(scanTemplate(i + 1))
    } else if (c === "}" && templates.length > 0 && templates[templates.length - 1] === braces) {
      templates.pop()
      braces--
      i = afterTemplate(scanTemplate(i + 1))
    } else if (c === "/" && (prev === null || (prev.type === "punct" && prev.value !== ")" && prev.value !== "]") || (prev.type === "name" && REGEX_AFTER.has(prev.value)))) {
      let j = i + 1
      let inClass = false
      while (j < source.length && source[j] !== "\n") {
        if (source[j] === "\\") j++
        else if (source[j] === "[") inClass = true
        else if (source[j] === "]") inClass = false
        else if (source[j] === "/" && !inClass) break
        j++
      }
      if (source[j] === "/") {
        j++
        while (j < source.length && NAME_PART.test(source[j])) j++
        i = j
        prev = { type: "literal" }
      } else {
        i++
        prev = { type: "punct", value: "/" }
      }
    } else if (NAME_START.test(c)) {
      const read = readName(source, i)
      const member = prev?.type === "punct" && (prev.value === "." || prev.value === "?.")
      if (read.name === "import" && !member) {
        const after = skipTrivia(source, read.end)
        if (source[after] === "(") {
          edits.push({ start: i, end: read.end, code: IMPORT_NAME })
        } else if (source[after] !== "." && braces === 0 && nesting === 0) {
          const statement = parseImportStatement(source, read.end)
          if (statement !== undefined) {
            edits.push({ start: i, end: statement.end, code: statement.code })
            i = statement.end
            prev = { type: "punct", value: ";" }
            continue
          }
        }
      }
      i = read.end
      prev = { type: "name", value: read.name }
    } else if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(source[i + 1] ?? ""))) {
      let j = i + 1
      while (j < source.length && (NAME_PART.test(source[j]) || source[j] === "." || ((source[j] === "+" || source[j] === "-") && /[eE]/.test(source[j - 1])))) j++
      i = j
      prev = { type: "literal" }
    } else {
      let value = c
      if (c === "?" && source[i + 1] === "." && !/[0-9]/.test(source[i + 2] ?? "")) value = "?."
      else if (c === "." && source[i + 1] === "." && source[i + 2] === ".") value = "..."
      if (c === "{") braces++
      else if (c === "}") braces--
      else if (c === "(" || c === "[") nesting++
      else if (c === ")" || c === "]") nesting--
      i += value.length
      prev = { type: "punct", value }
    }
  }
  if (edits.length === 0) return source
  let out = ""
  let at = 0
  for (const edit of edits) {
    const replaced = source.slice(edit.start, edit.end)
    out += source.slice(at, edit.start) + edit.code + "\n".repeat(replaced.split("\n").length - 1)
    at = edit.end
  }
  return out + source.slice(at)
}

// ---------------------------------------------------------------------------
// Module loading from the kernel's working directory

const importers = new Map()
let requireDir
let currentRequire

const resolveFrom = (dir, specifier) => {
  if (specifier.startsWith("node:") || specifier.includes(":")) return specifier
  try {
    return pathToFileURL(createRequire(path.join(dir, "[cell]")).resolve(specifier)).href
  } catch {
    return specifier
  }
}

const importerFor = (dir) => {
  let importer = importers.get(dir)
  if (importer === undefined) {
    const loader = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER
    importer = loader === undefined
      ? (specifier, options) => import(resolveFrom(dir, String(specifier)), options)
      : new vm.Script("(specifier, options) => import(specifier, options)", {
        filename: path.join(dir, "[cell]"),
        importModuleDynamically: loader
      }).runInThisContext()
    importers.set(dir, importer)
  }
  return importer
}

const importFromCwd = (specifier, options) => importerFor(process.cwd())(specifier, options)

const requireHere = () => {
  const dir = process.cwd()
  if (dir !== requireDir) {
    requireDir = dir
    currentRequire = createRequire(path.join(dir, "[cell]"))
  }
  return currentRequire
}

/** require() for cells: resolves from the kernel's current working directory. */
function cellRequire(id) {
  return requireHere()(id)
}
cellRequire.resolve = (request, options) => requireHere().resolve(request, options)
cellRequire.resolve.paths = (request) => requireHere().resolve.paths(request)
Object.defineProperty(cellRequire, "cache", { get: () => Module._cache })

// ---------------------------------------------------------------------------
// Evaluation through the inspector's REPL mode

let session
let contextId
let baseline = new Map()

const post = (method, params) => {
  let answer
  session.post(method, params, (error, result) => {
    answer = { error, result }
  })
  if (answer === undefined) throw new Error(`the inspector did not answer ${method} at once`)
  if (answer.error) throw answer.error
  return answer.result
}

let taken
const TAKE = Symbol.for("veyyon.take")

const takeValue = (remote) => {
  const argument = remote.objectId !== undefined
    ? { objectId: remote.objectId }
    : remote.unserializableValue !== undefined
    ? { unserializableValue: remote.unserializableValue }
    : remote.type === "undefined"
    ? {}
    : { value: remote.value }
  taken = undefined
  post("Runtime.callFunctionOn", {
    functionDeclaration: `function (value) { globalThis[Symbol.for("veyyon.take")](value) }`,
    executionContextId: contextId,
    arguments: [argument],
    silent: true
  })
  const value = taken
  taken = undefined
  return value
}

const openInspector = () => {
  session = new inspector.Session()
  session.connect()
  session.on("Runtime.executionContextCreated", (message) => {
    if (contextId === undefined && message.params.context.auxData?.isDefault !== false) contextId = message.params.context.id
  })
  post("Runtime.enable", {})
  post("Runtime.disable", {})
  if (contextId === undefined) throw new Error("the inspector reported no execution context")
  Object.defineProperty(globalThis, TAKE, { value: (value) => (taken = value) })
  Object.defineProperty(globalThis, CELL_HOOK, { value: () => cellThunk() })
  trigger = new vm.Script(`globalThis[Symbol.for("veyyon.cell")]()`, { filename: "veyyon-runner" })
}

let cellThunk
let trigger

class Interrupt extends Error {}

const evaluate = (source, group) =>
  new Promise((resolve) => {
    cellThunk = () =>
      session.post("Runtime.evaluate", {
        expression: source,
        contextId,
        replMode: true,
        awaitPromise: true,
        objectGroup: group,
        silent: true,
        disableBreaks: true,
        generatePreview: false
      }, (error, result) => resolve({ error, result }))
    try {
      trigger.runInThisContext({ breakOnSigint: true })
    } catch (error) {
      if (error?.code === "ERR_SCRIPT_EXECUTION_INTERRUPTED") throw new Interrupt()
      throw error
    } finally {
      cellThunk = undefined
    }
  })

// ---------------------------------------------------------------------------
// Errors

const isRunnerFrame = (line) => RUNNER_FILES.some((file) => line.includes(file)) || line.includes("veyyon-runner")

/**
 * The lines of a util.inspect()ed error without runner frames: frames in the runner's files,
 * the node frames they called, and everything below the inspector call that ran the cell.
 */
const cleanTrace = (text) => {
  const kept = []
  let below = false
  let afterRunner = false
  for (const line of text.split("\n")) {
    if (!/^\s+at /.test(line)) {
      below = false
      afterRunner = false
      kept.push(line)
      continue
    }
    if (line.includes("node:inspector")) below = true
    const runner = isRunnerFrame(line)
    const drop = below || runner || (afterRunner && /\(node:|at node:/.test(line))
    afterRunner = runner || (afterRunner && drop)
    if (!drop) kept.push(line)
    else if (line.endsWith(" {") && kept.length > 0) kept[kept.length - 1] += " {"
  }
  return kept
}

const errorName = (error) => {
  const name = typeof error.name === "string" && error.name !== "" ? error.name : "Error"
  const constructorName = error.constructor?.name
  return name === "Error" && typeof constructorName === "string" && constructorName !== "" && constructorName !== "Object" ? constructorName : name
}

/** The error frame fields for a thrown value: ename, evalue and the stack as lines without runner frames. */
export const errorFields = (thrown) => {
  if (thrown instanceof Error || (thrown !== null && typeof thrown === "object" && typeof thrown.stack === "string")) {
    let text
    try {
      text = util.inspect(thrown)
    } catch {
      text = String(thrown.stack)
    }
    return { ename: errorName(thrown), evalue: String(thrown.message ?? ""), traceback: cleanTrace(text) }
  }
  const shown = plainText(thrown)
  return { ename: "Uncaught", evalue: shown, traceback: [`Uncaught ${shown}`] }
}

const syntaxErrorFields = (error, details, source, filename) => {
  const line = details.lineNumber ?? 0
  const column = details.columnNumber ?? 0
  const text = source.split("\n")[line] ?? ""
  return {
    ename: "SyntaxError",
    evalue: String(error.message),
    traceback: [`${filename}:${line + 1}`, text, `${" ".repeat(column)}^`, "", `SyntaxError: ${error.message}`]
  }
}

// ---------------------------------------------------------------------------
// Timers a cell sets, cleared when it is interrupted

const trackTimers = () => {
  const wrap = (create, kind) => {
    const wrapped = function (callback, ...rest) {
      const cell = state.active
      if (cell === null || typeof callback !== "function") return create(callback, ...rest)
      let handle
      const run = function (...args) {
        if (kind !== "interval") cell.timers.delete(handle)
        return callback.apply(this, args)
      }
      handle = create(run, ...rest)
      cell.timers.set(handle, kind)
      return handle
    }
    Object.defineProperty(wrapped, "name", { value: create.name })
    if (create[util.promisify.custom] !== undefined) wrapped[util.promisify.custom] = create[util.promisify.custom]
    return wrapped
  }
  globalThis.setTimeout = wrap(timers.setTimeout, "timeout")
  globalThis.setInterval = wrap(timers.setInterval, "interval")
  globalThis.setImmediate = wrap(timers.setImmediate, "immediate")
}

const clearCellTimers = (cell) => {
  for (const [handle, kind] of cell.timers) {
    if (kind === "immediate") timers.clearImmediate(handle)
    else timers.clearTimeout(handle)
  }
  cell.timers.clear()
}

// ---------------------------------------------------------------------------
// Globals every cell sees

const userNames = () => {
  const names = new Set(post("Runtime.globalLexicalScopeNames", { executionContextId: contextId }).names)
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    if (name === "_") continue
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, name)
    if (!baseline.has(name) || ("value" in descriptor && !Object.is(baseline.get(name), descriptor.value))) names.add(name)
  }
  return [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/

const userValue = (name) => {
  if (!IDENTIFIER.test(name)) return globalThis[name]
  try {
    return vm.runInThisContext(name)
  } catch {
    return undefined
  }
}

/** process.exit() in a cell: the kernel keeps running. */
export class KernelExit extends Error {
  constructor(code) {
    super(`process.exit(${code ?? ""}) was called in a cell; the kernel keeps running (pass reset: true for a fresh one)`)
    this.name = "KernelExit"
    this.code = code
  }
}

const installGlobals = () => {
  const prelude = createPrelude({
    bridgeCall,
    settleBeforeDone,
    bridgeError: (name, message) => new BridgeError(name, message),
    userNames,
    userValue,
    print: (text) => stdoutStream.write(text)
  })
  const define = (name, value) => Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false })
  for (const [name, value] of Object.entries(prelude)) define(name, value)
  define("display", display)
  define("require", cellRequire)
  define(IMPORT_NAME, importFromCwd)
  define("_", undefined)
  trackTimers()
  process.exit = function exit(code) {
    if (state.active !== null) throw new KernelExit(code)
    realExit(code)
  }
  baseline = new Map()
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, name)
    baseline.set(name, "value" in descriptor ? descriptor.value : undefined)
  }
}

// ---------------------------------------------------------------------------
// SIGINT
//
// vm's breakOnSigint swaps SIGINT handlers around each run: it removes the process's
// SIGINT listeners (libuv then restores the default action) and installs Node's watchdog
// handler, and on the way out sets the default action again before re-adding listeners. A
// signal landing between those steps kills the process. So the runner has no SIGINT
// listener at all, and a worker thread keeps one watchdog registered for the life of the
// process (blocked in Atomics.wait inside a breakOnSigint script): the watchdog handler
// then stays installed, runs on the main thread only nest inside it, and a signal goes to
// the most recent watchdog, the cell's while its synchronous code runs, the sentinel's
// otherwise, which tells the main thread. Listeners cells add for SIGINT are kept by the
// runner and called from there, so they cannot disturb this. The sentinel also checks once
// a second that the host is alive, so a kernel busy in a cell still ends with its host.

const SENTINEL_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads")
const vm = require("node:vm")
globalThis.sentinelCell = new Int32Array(new SharedArrayBuffer(4))
globalThis.sentinelArmed = () => parentPort.postMessage("armed")
globalThis.hostAlive = () => {
  try {
    process.kill(workerData.host, 0)
    return true
  } catch (error) {
    return error.code !== "ESRCH"
  }
}
globalThis.endKernel = () => process.kill(process.pid, "SIGKILL")
const watch = new vm.Script(
  "sentinelArmed(); for (;;) { Atomics.wait(sentinelCell, 0, 0, 1000); if (!hostAlive()) endKernel() }",
  { filename: "veyyon-runner-sigint" }
)
for (;;) {
  try {
    watch.runInThisContext({ breakOnSigint: true })
  } catch (error) {
    if (!error || error.code !== "ERR_SCRIPT_EXECUTION_INTERRUPTED") throw error
    parentPort.postMessage("sigint")
  }
}
`

const cellSigintListeners = []

const onSigint = () => {
  state.active?.interrupt()
  for (const { listener } of [...cellSigintListeners]) {
    try {
      listener.call(process, "SIGINT")
    } catch (error) {
      report("Uncaught exception in a SIGINT listener", error)
    }
  }
  for (let i = cellSigintListeners.length - 1; i >= 0; i--) if (cellSigintListeners[i].once) cellSigintListeners.splice(i, 1)
}

const keepSigintListeners = () => {
  const wrap = (method, once, prepend) => {
    const original = process[method]
    process[method] = function (event, listener) {
      if (event !== "SIGINT") return original.call(this, event, listener)
      if (prepend) cellSigintListeners.unshift({ listener, once })
      else cellSigintListeners.push({ listener, once })
      return this
    }
  }
  wrap("on", false, false)
  wrap("addListener", false, false)
  wrap("once", true, false)
  wrap("prependListener", false, true)
  wrap("prependOnceListener", true, true)
  for (const method of ["off", "removeListener"]) {
    const original = process[method]
    process[method] = function (event, listener) {
      if (event !== "SIGINT") return original.call(this, event, listener)
      const index = cellSigintListeners.findIndex((entry) => entry.listener === listener)
      if (index >= 0) cellSigintListeners.splice(index, 1)
      return this
    }
  }
}

const fallBack = () => {
  process.on("SIGINT", onSigint)
  watchParent()
}

/** Starts the SIGINT sentinel, which also ends the kernel when the host is gone; resolves once its watchdog is registered. */
const startSentinel = () =>
  new Promise((resolve) => {
    let worker
    try {
      worker = new Worker(SENTINEL_SOURCE, { eval: true, stdout: false, stderr: false, workerData: { host: process.ppid } })
    } catch (error) {
      diagnose(`no SIGINT sentinel (${error?.message ?? error}); interrupts fall back to a SIGINT listener`)
      fallBack()
      resolve()
      return
    }
    worker.on("message", (message) => {
      if (message === "armed") {
        worker.unref()
        resolve()
      } else if (message === "sigint") {
        onSigint()
      }
    })
    worker.on("error", (error) => {
      diagnose(`the SIGINT sentinel failed (${error?.message ?? error}); interrupts fall back to a SIGINT listener`)
      fallBack()
      resolve()
    })
  })

// ---------------------------------------------------------------------------
// Requests

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

/** Decodes one host line: {kind: "execute", request} | {kind: "exit"} | {kind: "bridge_result", message} | {kind: "invalid", id, text}. */
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
  if (message.type !== undefined && message.type !== "execute") {
    return { kind: "invalid", id: typeof message.id === "string" ? message.id : null, text: `unknown message type ${JSON.stringify(message.type)}` }
  }
  return parseRequest(message)
}

// ---------------------------------------------------------------------------
// Introspection: complete and inspect requests
//
// Answered as soon as the line arrives (beside a cell awaiting something; after a
// synchronous one), counted as no cell. Property chains are read through descriptors,
// so no getter, proxy trap or cell code runs; util.inspect runs with getters off.

const MAX_COMPLETIONS = 500
const MAX_INSPECT_CHARS = 65536
const MAX_INTROSPECT_CODE = 1 << 20
const MISSING = Symbol("missing")
const JS_KEYWORDS = [
  "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete", "do", "else",
  "export", "extends", "false", "finally", "for", "function", "if", "import", "in", "instanceof", "let", "new", "null",
  "return", "static", "super", "switch", "this", "throw", "true", "try", "typeof", "undefined", "var", "void", "while",
  "with", "yield"
]

/** Reads `name` of `value` through property descriptors: data properties only, never a getter. */
const staticProperty = (value, name) => {
  if (value === null || value === undefined) return MISSING
  let holder = typeof value === "object" || typeof value === "function" ? value : Object(value)
  if (util.types.isProxy(holder)) return MISSING
  while (holder !== null) {
    const descriptor = Object.getOwnPropertyDescriptor(holder, name)
    if (descriptor !== undefined) return "value" in descriptor ? descriptor.value : MISSING
    holder = Object.getPrototypeOf(holder)
    if (holder !== null && util.types.isProxy(holder)) return MISSING
  }
  return MISSING
}

const resolveChain = (chain) => {
  const [first, ...rest] = chain.split(".")
  const names = new Set(userNames())
  let value = names.has(first) || first in globalThis ? userValue(first) : MISSING
  if (value === undefined && !names.has(first) && !(first in globalThis)) value = MISSING
  for (const part of rest) {
    if (value === MISSING) break
    value = staticProperty(value, part)
  }
  return value
}

const propertyNames = (value) => {
  const names = new Set()
  let holder = typeof value === "object" || typeof value === "function" ? value : Object(value)
  for (let depth = 0; holder !== null && depth < 64 && !util.types.isProxy(holder); depth++) {
    for (const name of Object.getOwnPropertyNames(holder)) names.add(name)
    holder = Object.getPrototypeOf(holder)
  }
  return [...names].filter((name) => IDENTIFIER.test(name))
}

const visible = (names, prefix) =>
  [...new Set(names)].filter((name) => name.startsWith(prefix) && (prefix.startsWith("_") || !name.startsWith("_"))).sort()

/** {matches, cursorStart} for the token before `cursor`: properties after a dot, else names and keywords. */
export const completeJs = (code, cursor) => {
  const line = code.slice(0, cursor).split("\n").pop()
  const member = /([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\.([\w$]*)$/.exec(line)
  if (member !== null) {
    const value = resolveChain(member[1])
    const matches = value === MISSING || value === null || value === undefined ? [] : visible(propertyNames(value), member[2])
    return { matches: matches.slice(0, MAX_COMPLETIONS), cursorStart: cursor - member[2].length }
  }
  const prefix = /[A-Za-z_$][\w$]*$/.exec(line)?.[0] ?? ""
  if (/\d$/.test(line) && prefix === "") return { matches: [], cursorStart: cursor }
  const names = [...userNames(), ...Object.getOwnPropertyNames(globalThis).filter((n) => IDENTIFIER.test(n)), ...JS_KEYWORDS]
  return { matches: visible(names, prefix).slice(0, MAX_COMPLETIONS), cursorStart: cursor - prefix.length }
}

const nameAt = (code, cursor) => {
  let start = cursor
  while (start > 0 && /[\w$.]/.test(code[start - 1])) start--
  let end = cursor
  while (end < code.length && /[\w$]/.test(code[end])) end++
  const name = code.slice(start, end).replace(/^\.+|\.+$/g, "")
  if (/^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$/.test(name)) return name
  const open = code.slice(0, cursor).lastIndexOf("(")
  const callee = open < 0 ? null : /([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*$/.exec(code.slice(0, open))
  return callee === null ? null : callee[1]
}

const clip = (text, limit) => (text.length <= limit ? text : text.slice(0, limit - 1) + "…")

const signatureOf = (fn) => {
  let source
  try {
    source = Function.prototype.toString.call(fn)
  } catch {
    return null
  }
  if (source.includes("[native code]")) return `${fn.name || "anonymous"}(${fn.length} argument${fn.length === 1 ? "" : "s"})`
  const header = /^[^{]*?(?:=>|\{)/s.exec(source)
  return clip((header ? header[0].replace(/\s*(=>|\{)$/, "") : source).replace(/\s+/g, " ").trim(), 1000)
}

/** IPython-style `obj?` text for the name at `cursor` (detail 1: the function's source), or null. */
export const inspectJs = (code, cursor, detail) => {
  const name = nameAt(code, cursor)
  if (name === null) return null
  const value = resolveChain(name)
  if (value === MISSING) return null
  const fields = []
  if (typeof value === "function") {
    fields.push(["Signature", signatureOf(value)])
    if (detail === 1) {
      try {
        fields.push(["Source", Function.prototype.toString.call(value)])
      } catch {}
    }
  } else {
    fields.push(["String form", clip(util.inspect(value, { depth: 1, getters: false, customInspect: false, maxArrayLength: 20 }), 1000)])
    if (typeof value === "string" || Array.isArray(value)) fields.push(["Length", String(value.length)])
  }
  const type = value === null ? "null" : typeof value === "object" || typeof value === "function"
    ? (staticProperty(value, "constructor")?.name ?? typeof value) || typeof value
    : typeof value
  fields.push(["Type", typeof value === "function" && /^class\b/.test(Function.prototype.toString.call(value)) ? "class" : type])
  const text = fields
    .filter(([, text]) => text !== null)
    .map(([label, text]) => (text.includes("\n") ? `${label}:\n${text}` : `${(label + ":").padEnd(12)} ${text}`))
    .join("\n")
  return clip(text, MAX_INSPECT_CHARS)
}

const introspect = ({ type, id, code, cursor, detail }) => {
  const text = code
  const at = Array.from(code).slice(0, cursor).join("").length
  const toPoints = (utf16) => Array.from(text.slice(0, utf16)).length
  try {
    if (type === "complete") {
      const { matches, cursorStart } = completeJs(text, at)
      send({ type: "complete_reply", id, matches, cursorStart: toPoints(cursorStart), cursorEnd: cursor })
    } else {
      const found = inspectJs(text, at, detail)
      send({ type: "inspect_reply", id, found: found !== null, bundle: found === null ? {} : { "text/plain": found } })
    }
  } catch (error) {
    const why = clip(`${error?.name ?? "Error"}: ${error?.message ?? error}`, 1000)
    send(type === "complete"
      ? { type: "complete_reply", id, matches: [], cursorStart: 0, cursorEnd: 0, error: why }
      : { type: "inspect_reply", id, found: false, bundle: {}, error: why })
  }
}

const parseIntrospect = (message) => {
  if (typeof message.id !== "string") return { kind: "invalid", id: null, text: `${message.type} request id must be a string` }
  if (typeof message.code !== "string" || message.code.length > MAX_INTROSPECT_CODE) {
    return { kind: "invalid", id: message.id, text: `code must be a string of at most ${MAX_INTROSPECT_CODE} characters` }
  }
  const length = Array.from(message.code).length
  const cursor = Number.isInteger(message.cursorPos) && message.cursorPos >= 0 && message.cursorPos <= length ? message.cursorPos : length
  return { kind: "introspect", request: { type: message.type, id: message.id, code: message.code, cursor, detail: message.detailLevel === 1 ? 1 : 0 } }
}

const protocolError = (id, text) =>
  send({ type: "error", id, ename: PROTOCOL_ERROR, evalue: text, traceback: [`${PROTOCOL_ERROR}: ${text}`] })

const applyContext = (request) => {
  if (request.cwd !== undefined) process.chdir(request.cwd)
  if (request.env !== undefined) {
    for (const [key, value] of Object.entries(request.env)) {
      if (value === null) delete process.env[key]
      else process.env[key] = value
    }
  }
}

const runCell = async (request, filename, cell) => {
  const source = transformCell(request.code)
  const group = `cell-${state.cellSeq}`
  const evaluation = evaluate(`${source}\n//# sourceURL=${filename}`, group)
  const outcome = await Promise.race([evaluation, cell.interrupted])
  if (outcome === INTERRUPTED) {
    evaluation.then(() => post("Runtime.releaseObjectGroup", { objectGroup: group }), () => {})
    throw new Interrupt()
  }
  try {
    if (outcome.error) throw outcome.error
    const { result, exceptionDetails } = outcome.result
    if (exceptionDetails !== undefined) {
      const thrown = takeValue(exceptionDetails.exception ?? { type: "undefined" })
      const compileError = thrown instanceof SyntaxError && !String(thrown.stack).includes(`${filename}:`)
      return { failure: compileError ? syntaxErrorFields(thrown, exceptionDetails, source, filename) : errorFields(thrown) }
    }
    const value = takeValue(result)
    if (value !== undefined && !request.silent) {
      if (request.storeHistory) globalThis._ = value
      send({ type: "result", id: request.id, bundle: mimeBundle(value) })
    }
    return { failure: undefined }
  } finally {
    post("Runtime.releaseObjectGroup", { objectGroup: group })
  }
}

const INTERRUPT_FIELDS = {
  ename: "Interrupted",
  evalue: "the cell was interrupted (SIGINT)",
  traceback: ["Interrupted: the cell was interrupted (SIGINT)"]
}

/** `<cell-N>` for a cell that gets execution count N; `<hidden-K>` (K counts all requests) for the rest. */
const cellFilename = (request) =>
  !request.silent && request.storeHistory ? `<cell-${state.executionCount}>` : `<hidden-${state.cellSeq}>`

const handleRequest = async (request) => {
  state.currentId = request.id
  state.cellSeq++
  if (!request.silent && request.storeHistory) state.executionCount++
  let interrupt
  const interrupted = new Promise((resolve) => (interrupt = () => resolve(INTERRUPTED)))
  const cell = { id: request.id, timers: new Map(), interrupt, interrupted }
  state.active = cell
  send({ type: "started", id: request.id })
  let failure
  let cancelled = false
  try {
    applyContext(request)
    if (request.code.trim() !== "") failure = (await runCell(request, cellFilename(request), cell)).failure
  } catch (error) {
    if (error instanceof Interrupt) {
      cancelled = true
      clearCellTimers(cell)
      failure = INTERRUPT_FIELDS
    } else {
      failure = errorFields(error)
    }
  } finally {
    await settleCellWrites()
    state.active = null
  }
  try {
    if (failure !== undefined) send({ type: "error", id: request.id, ...failure })
  } finally {
    abandonBridgeCalls(request.id)
    send({ type: "done", id: request.id, status: failure === undefined ? "ok" : "error", executionCount: state.executionCount, cancelled })
  }
}

const queue = []
let wake
const END = Symbol("end of input")

const enqueue = (item) => {
  queue.push(item)
  wake?.()
}

const routeLine = (line) => {
  const kind = classifyLine(line)
  switch (kind.kind) {
    case "execute":
      return enqueue(kind.request)
    case "exit":
      return realExit(0)
    case "bridge_result":
      return resolveBridge(kind.message)
    case "introspect":
      return introspect(kind.request)
    case "invalid":
      return kind.id === null ? protocolError(null, kind.text) : enqueue(kind)
  }
}

const serve = async () => {
  while (true) {
    if (queue.length === 0) await new Promise((resolve) => (wake = resolve))
    wake = undefined
    const item = queue.shift()
    if (item === undefined) continue
    if (item === END) realExit(0)
    try {
      if (item.kind === "invalid") {
        protocolError(item.id, item.text)
        send({ type: "done", id: item.id, status: "error", executionCount: state.executionCount, cancelled: false })
      } else {
        await handleRequest(item)
      }
    } catch (error) {
      state.active = null
      diagnose(`internal error: ${error?.stack ?? error}`)
      if (item.id !== undefined && item.id !== null) {
        send({ type: "done", id: item.id, status: "error", executionCount: state.executionCount, cancelled: false })
      }
    }
  }
}

const readRequests = (input) => {
  let pending = Buffer.alloc(0)
  input.on("data", (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
    let newline
    while ((newline = pending.indexOf(10)) >= 0) {
      const line = pending.subarray(0, newline).toString("utf8")
      pending = pending.subarray(newline + 1)
      if (line.trim() === "") continue
      try {
        routeLine(line)
      } catch (error) {
        diagnose(`could not handle a host line: ${error?.stack ?? error}`)
      }
    }
  })
  input.on("end", () => enqueue(END))
  input.on("error", () => enqueue(END))
}

const openChannel = () => {
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

const watchParent = () => {
  const parent = process.ppid
  timers.setInterval(() => {
    try {
      process.kill(parent, 0)
    } catch (error) {
      if (error.code === "ESRCH") realExit(0)
    }
  }, 1000).unref()
}

const report = (label, reason) => {
  if (reason instanceof BridgeError && reason.code === "BridgeCancelled") return
  const fields = errorFields(reason)
  stderrStream.write(`${label}: ${fields.traceback.join("\n")}\n`)
}

/** Serves the protocol until an exit request, the end of input, or the host's death. */
export const main = () => {
  const input = openChannel()
  installOutput()
  installChildProcess()
  openInspector()
  installGlobals()
  process.on("uncaughtException", (error) => report("Uncaught exception", error))
  process.on("unhandledRejection", (reason) => report("Unhandled promise rejection", reason))
  startSentinel().then(() => {
    keepSigintListeners()
    readRequests(input)
    serve()
  })
}

if (process.argv[1] !== undefined && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) main()
