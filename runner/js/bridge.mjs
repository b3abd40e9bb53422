/** The host bridge: agent()/completion()/parallel() calls answered by bridge_result lines. */
import { PROTOCOL_ERROR, diagnose, send, state } from "./protocol.mjs"
import { emitStatus } from "./display.mjs"

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
// Set when the host's input has ended (or it sent exit): no bridge call can be answered any more.
let bridgeEnded = false
const noHost = (method) =>
  new BridgeError("BridgeCancelled", `the runner's input has ended, so no host can answer this ${method} call (run without a host, the runner has no bridge)`)

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
  if (bridgeEnded) return Promise.reject(noHost(method))
  const callId = `c${++nextCallId}`
  return new Promise((resolve, reject) => {
    bridgeCalls.set(callId, { requestId, method, resolve, reject, resumed: false })
    emitStatus("timeout", { action: "pause" }, requestId)
    send({ type: "bridge", id: requestId, callId, method, params })
  })
}

export const resolveBridge = (message) => {
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

export const settleBeforeDone = (promise) => {
  cellWrites.add(promise)
  promise.then(() => cellWrites.delete(promise), () => cellWrites.delete(promise))
}

export const settleCellWrites = async () => {
  while (cellWrites.size > 0) await Promise.allSettled([...cellWrites])
}

/** The host's input has ended: open bridge calls fail now, and later ones at once. */
export const endBridge = () => {
  bridgeEnded = true
  for (const [callId, call] of bridgeCalls) {
    bridgeCalls.delete(callId)
    resumeCall(call)
    call.reject(noHost(call.method))
  }
}

export const abandonBridgeCalls = (requestId) => {
  for (const [callId, call] of bridgeCalls) {
    if (call.requestId !== requestId) continue
    bridgeCalls.delete(callId)
    resumeCall(call)
    call.reject(new BridgeError("BridgeCancelled", "the cell ended before the host answered"))
  }
}

// ---------------------------------------------------------------------------
