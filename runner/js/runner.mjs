/**
 * veyyon JavaScript kernel runner: one Node process serving code cells over the same NDJSON
 * protocol as runner.py.
 *
 * Plain ESM, Node 22.19+, no dependencies. Start it as `node runner.mjs` with the protocol on
 * fd 3, a socket the host both writes requests to and reads frames from (spawn with
 * stdio ["ignore", "pipe", "pipe", "pipe"]). Frames never travel on fd 1: console.*,
 * process.stdout/stderr, fs.write(Sync)/writev(Sync) to fd 1 or 2 and the stdio of child
 * processes become stdout/stderr frames, in the order the cell wrote them, and whatever still
 * reaches fd 1 or fd 2 (native code, a file opened on /dev/stdout) is plain output the host
 * shows as such, so nothing a cell prints can pass for a frame. Child processes
 * never inherit fd 3. Without an open fd 3 the runner serves stdin/stdout instead, for
 * piping a script of requests by hand. Importing this module does not start the server.
 *
 * The protocol (frames, their order, executionCount, interrupts, bad input, the bridge) is
 * PROTOCOL.md at the root of the repository, checked against the host's schemas.
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
 *
 * The runner is this entry and its modules beside it, one concern each: protocol.mjs (frame
 * writing, kernel state, host lines), output.mjs (stdout/stderr and child stdio as frames),
 * display.mjs (MIME bundles, display()), bridge.mjs (host bridge), transform.mjs (import
 * rewriting), execution.mjs (evaluation, errors, timers, globals), interrupt.mjs (SIGINT),
 * introspect.mjs (complete/inspect), snapshot.mjs (snapshots and restores of the user's
 * state), egress.mjs (the in-sandbox forwarder to the host's
 * egress proxy), and prelude.mjs.
 */
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { INTERRUPTED, classifyLine, diagnose, openChannel, protocolError, realExit, send, state } from "./protocol.mjs"
import { installChildProcess, installFdWrites, installOutput } from "./output.mjs"
import { abandonBridgeCalls, endBridge, resolveBridge, settleCellWrites } from "./bridge.mjs"
import { INTERRUPT_FIELDS, Interrupt, applyContext, clearCellTimers, errorFields, installGlobals, openInspector, report, runCell } from "./execution.mjs"
import { keepSigintListeners, startSentinels } from "./interrupt.mjs"
import { introspect } from "./introspect.mjs"
import { startEgressForwarder } from "./egress.mjs"
import { markEnvironmentBaseline, runRestore, runSnapshot } from "./snapshot.mjs"

export { BridgeError, bridgeCall } from "./bridge.mjs"
export { display, emitStatus, MIME_HOOK, mimeBundle } from "./display.mjs"
export { errorFields, KernelExit } from "./execution.mjs"
export { completeJs, inspectJs } from "./introspect.mjs"
export { redirectStdio } from "./output.mjs"
export { classifyLine, STATUS_MIME } from "./protocol.mjs"
export { transformCell } from "./transform.mjs"

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
    // The host's init request (silent, not stored, carrying the session's env): what a snapshot's env is measured against.
    if (request.silent && !request.storeHistory && request.env !== undefined) markEnvironmentBaseline()
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

let inputEnded = false

/** Whether an execute request waits in the queue: a snapshot then yields to it. */
const cellWaiting = () => queue.some((item) => item !== END && item.kind === undefined)

/** Restore pieces received so far, by request id, until the one with more: false. */
const restorePieces = new Map()

const receiveRestorePiece = (piece) => {
  const pieces = restorePieces.get(piece.id) ?? []
  pieces.push(Buffer.from(piece.data, "base64"))
  if (piece.more) restorePieces.set(piece.id, pieces)
  else {
    restorePieces.delete(piece.id)
    enqueue({ kind: "restore", id: piece.id, pieces, executionCount: piece.executionCount })
  }
}

/** The host's input has ended, or it sent exit: the queued requests still run, then the runner exits. */
const endOfInput = () => {
  if (inputEnded) return
  inputEnded = true
  endBridge()
  enqueue(END)
}

const routeLine = (line) => {
  const kind = classifyLine(line)
  switch (kind.kind) {
    case "execute":
      return enqueue(kind.request)
    case "exit":
      return endOfInput()
    case "bridge_result":
      return resolveBridge(kind.message)
    case "introspect":
      return introspect(kind.request)
    case "snapshot":
      return enqueue({ kind: "snapshot", ...kind.request })
    case "restore":
      return receiveRestorePiece(kind.request)
    case "snapshot_invalid":
      return send({ type: "snapshot_done", id: kind.id, status: "failed", names: [], skipped: [], error: kind.text })
    case "restore_invalid":
      restorePieces.delete(kind.id)
      return send({ type: "restore_done", id: kind.id, restored: [], skipped: [], error: kind.text })
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
      if (item.kind === "snapshot") {
        await runSnapshot(item, cellWaiting)
      } else if (item.kind === "restore") {
        await runRestore(item)
      } else if (item.kind === "invalid") {
        protocolError(item.id, item.text)
        send({ type: "done", id: item.id, status: "error", executionCount: state.executionCount, cancelled: false })
      } else {
        await handleRequest(item)
      }
    } catch (error) {
      state.active = null
      diagnose(`internal error: ${error?.stack ?? error}`)
      if (item.kind === "snapshot" || item.kind === "restore") {
        const type = item.kind === "snapshot" ? "snapshot_done" : "restore_done"
        const answer = item.kind === "snapshot" ? { status: "failed", names: [] } : { restored: [] }
        send({ type, id: item.id, ...answer, skipped: [], error: `internal error: ${error?.message ?? error}` })
      } else if (item.id !== undefined && item.id !== null) {
        send({ type: "done", id: item.id, status: "error", executionCount: state.executionCount, cancelled: false })
      }
    }
  }
}

const readRequests = (input) => {
  // The pieces of a line not yet ended: joined once its newline arrives, so a long line (a
  // restore piece of megabytes) costs its length once, not once per chunk that carries it.
  let pending = []
  input.on("data", (chunk) => {
    if (inputEnded) return
    let newline
    while (!inputEnded && (newline = chunk.indexOf(10)) >= 0) {
      pending.push(chunk.subarray(0, newline))
      const line = (pending.length === 1 ? pending[0] : Buffer.concat(pending)).toString("utf8")
      pending = []
      chunk = chunk.subarray(newline + 1)
      if (line.trim() === "") continue
      try {
        routeLine(line)
      } catch (error) {
        diagnose(`could not handle a host line: ${error?.stack ?? error}`)
      }
    }
    if (!inputEnded && chunk.length > 0) pending.push(chunk)
  })
  input.on("end", endOfInput)
  input.on("error", endOfInput)
}

/** Serves the protocol until an exit request, the end of input, or the host's death. */
export const main = () => {
  const input = openChannel()
  installOutput()
  installFdWrites()
  installChildProcess()
  openInspector()
  installGlobals()
  process.on("uncaughtException", (error) => report("Uncaught exception", error))
  process.on("unhandledRejection", (reason) => report("Unhandled promise rejection", reason))
  Promise.all([startEgressForwarder(process.env, diagnose), startSentinels()]).then(() => {
    keepSigintListeners()
    readRequests(input)
    serve()
  })
}

if (process.argv[1] !== undefined && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) main()
