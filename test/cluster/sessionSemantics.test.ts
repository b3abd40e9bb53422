/**
 * A cluster session behaves as an in-process one: a Python cell and a JavaScript cell of
 * one session run beside each other (each waits for a file the other writes), while a
 * second cell of a running language is answered busy; a caller interrupted mid-cell, and a
 * caller that goes away between two requests of its call, both leave the cell interrupted
 * on its runner (it stops writing, and the session's next cell runs). Real kernels, one
 * runner, a short call lease; liveness bounds only.
 */
import { Effect, Fiber, Layer, ManagedRuntime, Result } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { CALL_LEASE_ENV, resolveClusterSettings } from "../../src/cluster/ClusterSettings.ts"
import { clientShardingLayer, postgresLayer } from "../../src/cluster/ClusterTransport.ts"
import { KernelSession } from "../../src/cluster/KernelSession.ts"
import { stateVersions } from "../../src/cluster/ProtocolVersion.ts"
import type { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { titled } from "../support/skip.ts"
import { LOCK_EXPIRATION_MS, startCluster, type TestCluster } from "./support.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()

/** The runner's call lease here: far shorter than the cells below, which only an interruption ends early. */
const CALL_LEASE_MS = 10_000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Python that appends a line to `file` every 0.1 s for `seconds`, after printing "go". */
const ticking = (file: string, seconds: number) =>
  `import time\nprint('go', flush=True)\nend = time.time() + ${seconds}\nwhile time.time() < end:\n    open(${JSON.stringify(file)}, 'a').write('.')\n    time.sleep(0.1)\nopen(${JSON.stringify(`${file}.done`)}, 'w').close()`

describe.skipIf(skipReason !== undefined)(titled("a cluster session's semantics, as in-process", skipReason), () => {
  let cluster: TestCluster

  beforeAll(async () => {
    cluster = await startCluster(1, { runnerEnv: { [CALL_LEASE_ENV]: String(CALL_LEASE_MS) } })
  }, 180_000)

  afterAll(async () => {
    await cluster?.stop()
  }, 120_000)

  const run = (sessionId: string, language: string, code: string, options: { readonly onEvent?: (output: KernelOutput) => void; readonly timeout?: number } = {}) =>
    Effect.flatMap(EvalTool, (tool) =>
      tool.run({ language, code, ...(options.timeout === undefined ? {} : { timeout: options.timeout }) }, {
        sessionId,
        cwd: cluster.dir,
        ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent })
      }))

  const entities = () => {
    const settings = Result.getOrThrow(resolveClusterSettings({ postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS }, {}))
    return ManagedRuntime.make(clientShardingLayer(settings).pipe(Layer.provide(postgresLayer(settings))))
  }

  /** Resolves once the session's runner says no cell of it runs, within `ms`. */
  const idle = async (sessionId: string, ms: number) => {
    const observer = entities()
    try {
      const deadline = Date.now() + ms
      while (Date.now() < deadline) {
        const status = await observer.runPromise(Effect.flatMap(KernelSession.client, (client) => stateVersions(client(sessionId).Status())))
        if (status.running === null) return
        await sleep(200)
      }
      throw new Error(`a cell of session ${sessionId} still ran after ${ms} ms`)
    } finally {
      await observer.dispose()
    }
  }

  /** Whether `file` stays the same size for `ms`. */
  const stopsGrowing = async (file: string, ms: number) => {
    const before = fs.existsSync(file) ? fs.statSync(file).size : 0
    await sleep(ms)
    return (fs.existsSync(file) ? fs.statSync(file).size : 0) === before
  }

  it("runs a Python cell and a JavaScript cell of one session beside each other, and answers a second Python cell busy", async () => {
    const fromPython = path.join(cluster.dir, "from-python")
    const fromJs = path.join(cluster.dir, "from-js")
    let started!: () => void
    const pythonStarted = new Promise<void>((resolve) => (started = resolve))
    const python = cluster.client.runPromise(run(
      "both",
      "py",
      `import os, time\nopen(${JSON.stringify(fromPython)}, 'w').close()\nprint('waiting', flush=True)\n` +
        `end = time.time() + 90\nwhile not os.path.exists(${JSON.stringify(fromJs)}) and time.time() < end:\n    time.sleep(0.05)\n` +
        `print('python saw javascript' if os.path.exists(${JSON.stringify(fromJs)}) else 'python waited alone')`,
      {
        timeout: 120,
        onEvent: (output) => {
          if (output._tag === "Stdout" && output.text.includes("waiting")) started()
        }
      }
    ))
    await pythonStarted
    const busy = await cluster.client.runPromise(run("both", "py", "print('should not run')"))
    expect(busy.error?.ename, busy.text).toBe("SessionBusy")
    const javascript = await cluster.client.runPromise(run(
      "both",
      "js",
      `const fs = require('fs')\nconst pause = new Int32Array(new SharedArrayBuffer(4))\nconst end = Date.now() + 90000\n` +
        `while (!fs.existsSync(${JSON.stringify(fromPython)}) && Date.now() < end) Atomics.wait(pause, 0, 0, 50)\n` +
        `fs.writeFileSync(${JSON.stringify(fromJs)}, '')\nconsole.log(fs.existsSync(${JSON.stringify(fromPython)}) ? 'javascript saw python' : 'javascript waited alone')`,
      { timeout: 120 }
    ))
    expect(javascript.status, javascript.text).toBe("ok")
    expect(javascript.text).toBe("javascript saw python")
    const pythonResult = await python
    expect(pythonResult.status, pythonResult.text).toBe("ok")
    expect(pythonResult.text).toBe("waiting\npython saw javascript")
  }, 240_000)

  it("a caller interrupted mid-cell leaves its cell interrupted on the runner: it stops writing, a cell of another language beside it runs on, and the next cell runs", async () => {
    const ticks = path.join(cluster.dir, "interrupted-ticks")
    const beside = path.join(cluster.dir, "beside-ticks")
    let started!: () => void
    const startedPromise = new Promise<void>((resolve) => (started = resolve))
    const fiber = cluster.client.runFork(run("interrupted", "py", ticking(ticks, 110), {
      timeout: 120,
      onEvent: (output) => {
        if (output._tag === "Stdout") started()
      }
    }))
    await startedPromise
    const js = cluster.client.runPromise(run(
      "interrupted",
      "js",
      `const fs = require('fs')\nconst pause = new Int32Array(new SharedArrayBuffer(4))\nconst end = Date.now() + 20000\n` +
        `while (Date.now() < end) { fs.appendFileSync(${JSON.stringify(beside)}, '.'); Atomics.wait(pause, 0, 0, 100) }\nconsole.log('beside done')`,
      { timeout: 120 }
    ))
    await cluster.client.runPromise(Fiber.interrupt(fiber))
    const deadline = Date.now() + 60_000
    while (!(await stopsGrowing(ticks, 1500))) if (Date.now() > deadline) throw new Error("the interrupted cell still wrote after 60 s")
    expect(await stopsGrowing(beside, 1500)).toBe(false)
    const after = await cluster.client.runPromise(run("interrupted", "py", "print('next')"))
    expect(after.text).toBe("next")
    expect((await js).text).toBe("beside done")
    expect(fs.existsSync(`${ticks}.done`)).toBe(false)
  }, 240_000)

  it("a caller that goes away between two requests of its call leaves its cell interrupted once the call lease passes", async () => {
    const ticks = path.join(cluster.dir, "abandoned-ticks")
    const params = { language: "py", code: ticking(ticks, 110), timeout: 120 }
    const caller = entities()
    const session = await caller.runPromise(Effect.map(KernelSession.client, (client) => client("abandoned")))
    const first = await caller.runPromise(stateVersions(session.Execute({ params, callId: "abandoned-1", from: 0 })))
    expect(first.outputs).toEqual([{ _tag: "Stdout", text: "go\n" }])
    // The caller goes away with no request of its call waiting: the runner hears nothing more of it.
    await caller.dispose()
    await idle("abandoned", 90_000)
    expect(await stopsGrowing(ticks, 1500)).toBe(true)
    expect(cluster.runners[0]!.log()).toContain("call abandoned-1 of session abandoned its caller sent no request for 10s; its cell is interrupted")
    const after = await cluster.client.runPromise(run("abandoned", "py", "print('next')"))
    expect(after.text).toBe("next")
    expect(fs.existsSync(`${ticks}.done`)).toBe(false)
  }, 240_000)
})
