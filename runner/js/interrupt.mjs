/** SIGINT: the sentinel workers that keep a watchdog registered, cell listeners, and the host watch. */
import * as timers from "node:timers"
import { Worker } from "node:worker_threads"
import { diagnose, realExit, state } from "./protocol.mjs"
import { report } from "./execution.mjs"

// SIGINT
//
// vm's breakOnSigint swaps SIGINT handlers around each run: it removes the process's
// SIGINT listeners (libuv then restores the default action) and installs Node's watchdog
// handler, and on the way out sets the default action again before re-adding listeners. A
// signal landing between those steps kills the process. So the runner has no SIGINT
// listener at all, and worker threads keep watchdogs registered for the life of the
// process (each blocked in Atomics.wait inside a breakOnSigint script): the watchdog handler
// then stays installed, runs on the main thread only nest inside it, and a signal goes to
// the most recent watchdog, the cell's while its synchronous code runs, a sentinel's
// otherwise, which tells the main thread. A sentinel a signal stopped is unregistered until
// its next run starts; there are two, so a second signal landing in that gap finds the other
// one instead of the default action. Listeners cells add for SIGINT are kept by the
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

export const keepSigintListeners = () => {
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

let fellBack = false

/** With no sentinel left, a SIGINT listener and a parent watch stand in (once). */
const fallBack = () => {
  if (fellBack) return
  fellBack = true
  diagnose("no SIGINT sentinel left; interrupts fall back to a SIGINT listener")
  process.on("SIGINT", onSigint)
  watchParent()
}

/** Sentinels kept: one stays registered while another re-arms after a signal. */
const SENTINELS = 2

let sentinelsLeft = 0

/** Starts one sentinel; resolves once its watchdog is registered, or it could not be. */
const startOneSentinel = () =>
  new Promise((resolve) => {
    let worker
    try {
      worker = new Worker(SENTINEL_SOURCE, { eval: true, stdout: false, stderr: false, workerData: { host: process.ppid } })
    } catch (error) {
      diagnose(`no SIGINT sentinel (${error?.message ?? error})`)
      resolve()
      return
    }
    sentinelsLeft++
    worker.on("message", (message) => {
      if (message === "armed") {
        worker.unref()
        resolve()
      } else if (message === "sigint") {
        onSigint()
      }
    })
    worker.on("error", (error) => {
      diagnose(`a SIGINT sentinel failed (${error?.message ?? error})`)
      if (--sentinelsLeft === 0) fallBack()
      resolve()
    })
  })

/** Starts the SIGINT sentinels, which also end the kernel when the host is gone; resolves once their watchdogs are registered. */
export const startSentinels = () =>
  Promise.all(Array.from({ length: SENTINELS }, startOneSentinel)).then(() => {
    if (sentinelsLeft === 0) fallBack()
  })

// ---------------------------------------------------------------------------

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
