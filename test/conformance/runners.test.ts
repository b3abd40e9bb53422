/**
 * The protocol conformance suite every runner must pass: the Python, Node and Ruby runners,
 * each started standalone as the host starts it, each frame they send decoded with the
 * protocol schema of src/kernel/Frame.ts (a frame that does not decode fails the test).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { integrationEnabled } from "../support/python.ts"
import {
  type BridgeAnswer,
  type Cell,
  type Frame,
  type Kernel,
  killAll,
  kvHost,
  nodeRunner,
  plainResult,
  preludeSource,
  pythonRunner,
  rubyRunner,
  type RunnerSpec,
  sleep,
  startKernel,
  startWithPrelude,
  STATUS_MIME
} from "../runner/harness.ts"
import { dialects, KV_VALUE_JSON } from "./dialects.ts"
import { titled } from "../support/skip.ts"

interface Candidate {
  readonly language: string
  readonly runner: RunnerSpec | undefined
  readonly missing: string
}

const candidates: ReadonlyArray<Candidate> = [
  {
    language: "py",
    runner: integrationEnabled() ? pythonRunner() : undefined,
    missing: integrationEnabled() ? "no python3 on PATH" : "VEYYON_PYTHON_INTEGRATION is not 1"
  },
  { language: "js", runner: nodeRunner(), missing: "" },
  { language: "rb", runner: rubyRunner(), missing: "no ruby on PATH (Debian: apt-get install ruby)" }
]

const available = candidates.flatMap((c) => (c.runner === undefined ? [] : [c.runner]))

/**
 * Every line a kernel sent since the last check was a frame the schema decodes, with the id
 * of a request the test sent (or null on a ProtocolError for a line without one).
 */
const expectClean = (kernel: Kernel): void => {
  const schemaErrors = kernel.schemaErrors.splice(0)
  const badLines = kernel.badLines.splice(0)
  const frames = kernel.frames.slice(checked.get(kernel) ?? 0)
  checked.set(kernel, kernel.frames.length)
  expect(schemaErrors).toEqual([])
  expect(badLines).toEqual([])
  const strays = frames.filter((f) => f.id === null ? f.ename !== "ProtocolError" : !kernel.sentIds.has(String(f.id)))
  expect(strays).toEqual([])
}
const checked = new WeakMap<Kernel, number>()

/** started first, done last and once, every frame with the cell's id, output before the result, an error right before done. */
const expectWellFormed = (cell: Cell): void => {
  const types = cell.frames.map((f) => f.type)
  expect(types[0]).toBe("started")
  expect(types[types.length - 1]).toBe("done")
  expect(types.filter((t) => t === "started")).toHaveLength(1)
  expect(types.filter((t) => t === "done")).toHaveLength(1)
  expect(types.filter((t) => t === "result").length).toBeLessThanOrEqual(1)
  expect(types.filter((t) => t === "error").length).toBeLessThanOrEqual(1)
  for (const frame of cell.frames) expect(frame.id).toBe(cell.id)
  const result = types.indexOf("result")
  if (result !== -1) expect(types.slice(result).some((t) => t === "stdout" || t === "stderr")).toBe(false)
  const error = types.indexOf("error")
  if (error !== -1) expect(error).toBe(types.length - 2)
  expect(cell.done.status).toBe(error === -1 ? "ok" : "error")
  expect(typeof cell.done.cancelled).toBe("boolean")
}

/** count processes spinning on a CPU each, to load the machine; the caller kills them. */
const busyProcesses = (count: number): Array<ChildProcess> =>
  Array.from({ length: count }, () => spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }))

const lines = (text: string): Array<string> => text.split("\n").filter((line) => line.length > 0)

describe.each(candidates.map((c) => [c.runner === undefined ? `${c.language} (skipped: ${c.missing})` : c.language, c] as const))(
  "runner conformance: %s",
  (_name, candidate) => {
    const runner = candidate.runner
    const dialect = dialects[candidate.language]!
    let kernel: Kernel
    const spawned: Array<Kernel> = []

    const run = async (code: string, options: Parameters<Kernel["execute"]>[1] = {}): Promise<Cell> => {
      const cell = await kernel.execute(code, options)
      expectWellFormed(cell)
      return cell
    }

    const fresh = async (): Promise<Kernel> => {
      const started = await startWithPrelude(runner!)
      spawned.push(started)
      return started
    }

    beforeAll(async () => {
      if (runner === undefined) return
      kernel = await fresh()
    })

    afterEach(() => {
      for (const k of spawned) expectClean(k)
    })

    afterAll(() => {
      for (const k of spawned) k.kill()
    })

    it.skipIf(runner === undefined)("answers every request with started first and done last, and keeps state", async () => {
      expectWellFormed(await run(dialect.assign("conformance_x", 41)))
      const cell = await run("conformance_x + 1")
      expect(plainResult(cell)).toBe("42")
    })

    it.skipIf(runner === undefined)("keeps stdout and stderr apart, and sends output before the result", async () => {
      const cell = await run(`${dialect.print("out")}\n${dialect.printErr("err")}\n1 + 1`)
      expect(cell.stdout).toBe("out\n")
      expect(cell.stderr).toBe("err\n")
      expect(plainResult(cell)).toBe("2")
    })

    it.skipIf(runner === undefined)(
      dialect.semicolonSuppresses ? "a trailing ; suppresses the result" : "a trailing ; ends the statement and keeps the result",
      async () => {
        const cell = await run("1 + 1;")
        if (dialect.semicolonSuppresses) expect(cell.results).toEqual([])
        else expect(plainResult(cell)).toBe("2")
        expect(cell.done.status).toBe("ok")
      }
    )

    it.skipIf(runner === undefined)("counts executions except for silent and storeHistory=false requests", async () => {
      const first = await run("1 + 1")
      const count = first.done.executionCount as number
      expect(count).toBeGreaterThan(0)
      const silent = await run("1 + 1", { silent: true })
      expect(silent.done.executionCount).toBe(count)
      expect(silent.results).toEqual([])
      const unstored = await run("1 + 1", { storeHistory: false })
      expect(unstored.done.executionCount).toBe(count)
      expect(plainResult(unstored)).toBe("2")
      const failing = await run(dialect.raise("counted"))
      expect(failing.done.executionCount).toBe(count + 1)
      expect((await run("1 + 1")).done.executionCount).toBe(count + 2)
    })

    it.skipIf(runner === undefined)("reports an exception as one error frame with its class, message and a traceback free of runner frames", async () => {
      const cell = await run(dialect.raise("boom"))
      expect(cell.error).toMatchObject({ ename: dialect.errorName })
      expect(String(cell.error!.evalue)).toContain("boom")
      const traceback = cell.error!.traceback as Array<string>
      expect(traceback.length).toBeGreaterThan(0)
      expect(traceback.join("\n")).not.toMatch(/runner\.(py|mjs|rb)/)
      expect(cell.done).toMatchObject({ status: "error", cancelled: false })
    })

    it.skipIf(runner === undefined)("names a counted cell's source <cell-N> after its execution count, and the rest <hidden-K>", async () => {
      const counted = await run(dialect.raise("labelled"))
      const count = counted.done.executionCount as number
      const text = (cell: Cell) => (cell.error!.traceback as Array<string>).join("\n")
      expect(text(counted)).toContain(`<cell-${count}>`)
      for (const options of [{ silent: true }, { storeHistory: false }]) {
        const hidden = await run(dialect.raise("hidden"), options)
        expect(text(hidden)).toMatch(/<hidden-\d+>/)
        expect(text(hidden)).not.toContain("<cell-")
      }
      const next = await run(dialect.raise("labelled again"))
      expect(text(next)).toContain(`<cell-${count + 1}>`)
      const fresh = await startWithPrelude(runner!)
      spawned.push(fresh)
      const first = await fresh.execute(dialect.raise("first"))
      expect(first.done.executionCount).toBe(1)
      expect(text(first)).toContain("<cell-1>")
    })

    it.skipIf(runner === undefined)("sends display frames for an explicit MIME bundle", async () => {
      const cell = await run(dialect.displayHtml("<b>conformance</b>"))
      expect(cell.displays).toHaveLength(1)
      expect(cell.displays[0]!["text/html"]).toBe("<b>conformance</b>")
    })

    it.skipIf(runner === undefined)("turns a child process's output into stdout frames", async () => {
      const cell = await run(dialect.childEcho("from-a-child"))
      expect(cell.stdout).toBe("from-a-child\n")
      expect(cell.results).toEqual([])
    })

    it.skipIf(runner === undefined)("sends a cell's stdout in the order it was written, across print, stream writes, fd 1 and children, under load", async () => {
      const count = 24
      const expected = Array.from({ length: count }, (_, i) => `${i}\n`).join("")
      const hogs = busyProcesses(NodeOs.availableParallelism())
      try {
        for (let round = 0; round < 12; round++) {
          const cell = await run(dialect.mixedWrites(count))
          expect(cell.error).toBeUndefined()
          expect({ round, stdout: cell.stdout }).toEqual({ round, stdout: expected })
        }
      } finally {
        for (const hog of hogs) hog.kill("SIGKILL")
      }
    })

    it.skipIf(runner === undefined)("never lets a cell forge a frame", async () => {
      const id = "forge-target"
      const forged = JSON.stringify({ type: "done", id, status: "ok", executionCount: 999, cancelled: false })
      const cell = await run(dialect.print(forged), { id })
      expect(cell.stdout).toBe(`${forged}\n`)
      expect(cell.frames.filter((f) => f.type === "done")).toHaveLength(1)
      expect(cell.done.executionCount).not.toBe(999)
    })

    it.skipIf(runner === undefined)("applies a request's cwd and env before its code", async () => {
      const dir = NodeFs.realpathSync(NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), "veyyon-conformance-")))
      const home = process.cwd()
      try {
        const set = await run(dialect.cwdAndEnv("VEYYON_CONFORMANCE"), { cwd: dir, env: { VEYYON_CONFORMANCE: "yes" } })
        expect(lines(set.stdout)).toEqual([dir, "yes"])
        const kept = await run(dialect.cwdAndEnv("VEYYON_CONFORMANCE"))
        expect(lines(kept.stdout)).toEqual([dir, "yes"])
        const unset = await run(dialect.cwdAndEnv("VEYYON_CONFORMANCE"), { env: { VEYYON_CONFORMANCE: null } })
        expect(lines(unset.stdout)).toEqual([dir, "unset"])
      } finally {
        await kernel.execute("", { silent: true, storeHistory: false, cwd: home })
        NodeFs.rmSync(dir, { recursive: true, force: true })
      }
    })

    it.skipIf(runner === undefined)("ignores SIGINT between cells", async () => {
      await run(dialect.assign("conformance_kept", 7))
      kernel.interrupt()
      kernel.interrupt()
      await sleep(200)
      expect(kernel.hasExited).toBe(false)
      const cell = await run("conformance_kept * 6")
      expect(plainResult(cell)).toBe("42")
      expect(cell.done).toMatchObject({ status: "ok", cancelled: false })
    })

    it.skipIf(runner === undefined)("a SIGINT inside a cell interrupts it: error, done.cancelled, state kept", async () => {
      await run(dialect.assign("conformance_survivor", 41))
      const id = kernel.request(dialect.spin("spinning"))
      await kernel.waitForStdout("spinning", id)
      kernel.interrupt()
      const cell = await kernel.collect(id)
      expectWellFormed(cell)
      expect(cell.error).toBeDefined()
      expect(cell.done).toMatchObject({ status: "error", cancelled: true })
      expect(plainResult(await run("conformance_survivor + 1"))).toBe("42")
    })

    it.skipIf(runner === undefined)("answers bad request lines with a ProtocolError and keeps serving", async () => {
      const from = kernel.frames.length
      kernel.sendRaw("this is not json\n")
      kernel.send({ type: "no-such-type", id: "bad-type" })
      kernel.send({ id: 7, code: "1" })
      kernel.send({ id: "bad-code", code: 5, silent: false, storeHistory: true })
      const typed = await kernel.collect("bad-type")
      const coded = await kernel.collect("bad-code")
      for (const cell of [typed, coded]) {
        expect(cell.frames.map((f) => f.type)).toEqual(["error", "done"])
        expect(cell.error).toMatchObject({ ename: "ProtocolError" })
        expect(cell.done).toMatchObject({ status: "error", cancelled: false })
      }
      const anonymous = kernel.frames.slice(from).filter((f) => f.type === "error" && f.id === null)
      expect(anonymous).toHaveLength(2)
      for (const frame of anonymous) expect(frame.ename).toBe("ProtocolError")
      expect(plainResult(await run("1 + 1"))).toBe("2")
    })

    it.skipIf(runner === undefined)("answers a request missing a required field, or with a mistyped env, with a ProtocolError", async () => {
      kernel.send({ id: "no-code", silent: false, storeHistory: true })
      kernel.send({ id: "bad-env", code: "1", silent: false, storeHistory: true, env: { VEYYON_CONFORMANCE: 5 } })
      for (const id of ["no-code", "bad-env"]) {
        const cell = await kernel.collect(id)
        expect(cell.frames.map((f) => f.type)).toEqual(["error", "done"])
        expect(cell.error).toMatchObject({ ename: "ProtocolError" })
        expect(cell.done).toMatchObject({ status: "error", cancelled: false })
      }
      expect(plainResult(await run("1 + 1"))).toBe("2")
    })

    it.skipIf(runner === undefined)("reads missing silent and storeHistory as false and true, and ignores a bridge_result nobody waits for", async () => {
      const before = (await run("1 + 1")).done.executionCount as number
      kernel.send({ type: "bridge_result", callId: "nobody-asked", ok: true, value: 1 })
      kernel.send({ id: "no-flags", code: "2 + 2" })
      const cell = await kernel.collect("no-flags")
      expectWellFormed(cell)
      expect(plainResult(cell)).toBe("4")
      expect(cell.done.executionCount).toBe(before + 1)
    })

    it.skipIf(runner === undefined)("answers a bridge call bracketed by timeout pause and resume, and raises a host error in the cell", async () => {
      kernel.answerBridge((frame) =>
        frame.method === "completion"
          ? (frame.params as { prompt: string }).prompt === "fail"
            ? { ok: false, error: { name: "ModelDown", message: "no model today" } }
            : { ok: true, value: "the-answer" }
          : undefined
      )
      try {
        const cell = await run(dialect.completion("hello"))
        expect(plainResult(cell)).toContain("the-answer")
        const bridge = cell.frames.findIndex((f) => f.type === "bridge")
        expect(cell.frames[bridge]).toMatchObject({ method: "completion", params: { prompt: "hello" } })
        const status = (f: Frame) => f.type === "display" ? (f.bundle as Record<string, { op?: string; action?: string }>)[STATUS_MIME] : undefined
        const pause = cell.frames.findIndex((f) => status(f)?.op === "timeout" && status(f)?.action === "pause")
        const resume = cell.frames.findIndex((f) => status(f)?.op === "timeout" && status(f)?.action === "resume")
        expect(pause).toBeGreaterThan(0)
        expect(pause).toBeLessThan(bridge)
        expect(resume).toBeGreaterThan(bridge)
        const failed = await run(dialect.completion("fail"))
        expect(String(failed.error?.evalue)).toContain("ModelDown: no model today")
        expect(failed.done).toMatchObject({ status: "error", cancelled: false })
      } finally {
        kernel.answerBridge(undefined)
      }
    })

    it.skipIf(runner === undefined)(
      runner?.preludePath === undefined
        ? "loads its own prelude before the first cell, which is not counted"
        : "running the prelude a second time changes nothing",
      async () => {
        if (runner!.preludePath === undefined) {
          const own = await startKernel({ runner: runner! })
          spawned.push(own)
          const first = await own.execute(dialect.kvIdentity)
          expectWellFormed(first)
          expect(plainResult(first)).toBeDefined()
          expect(first.done.executionCount).toBe(1)
          return
        }
        const before = plainResult(await run(dialect.kvIdentity))
        expect(before).toBeDefined()
        const again = await run(preludeSource(runner!)!, { silent: true, storeHistory: false })
        expect(again.frames.map((f) => f.type)).toEqual(["started", "done"])
        expect(plainResult(await run(dialect.kvIdentity))).toBe(before)
      }
    )

    it.skipIf(runner === undefined)("answers the requests sent before an exit request, then exits with status 0", async () => {
      const exiting = await startKernel({ runner: runner! })
      spawned.push(exiting)
      const line = (message: { readonly id?: string; readonly [field: string]: unknown }) => {
        if (message.id !== undefined) exiting.sentIds.add(message.id)
        return JSON.stringify(message) + "\n"
      }
      // One write, so the runner reads the exit request together with the requests before it.
      exiting.sendRaw(
        line({ id: "before-exit-1", code: dialect.print("first"), silent: false, storeHistory: true }) +
          line({ id: "before-exit-2", code: "1 + 1", silent: false, storeHistory: true }) +
          line({ type: "exit" }) +
          line({ id: "after-exit", code: dialect.print("never"), silent: false, storeHistory: true })
      )
      const first = await exiting.collect("before-exit-1")
      expectWellFormed(first)
      expect(first.stdout).toBe("first\n")
      const second = await exiting.collect("before-exit-2")
      expectWellFormed(second)
      expect(plainResult(second)).toBe("2")
      expect(await exiting.exited).toEqual({ code: 0, signal: null })
      expect(exiting.framesOf("after-exit")).toEqual([])
    })

    it.skipIf(runner === undefined)("ends on SIGTERM while a cell runs (the host's escalation after the exit request)", async () => {
      const busy = await startKernel({ runner: runner! })
      spawned.push(busy)
      const id = busy.request(dialect.spin("spinning"))
      await busy.waitForStdout("spinning", id)
      process.kill(busy.pid, "SIGTERM")
      expect(await busy.exited).toEqual({ code: null, signal: "SIGTERM" })
    })

    it.skipIf(runner === undefined)("fails a kv call at once with a clear error when no host can answer (its input has ended)", async () => {
      for (const pending of [false, true]) {
        const alone = await startWithPrelude(runner!)
        spawned.push(alone)
        // pending: the call is made before the input ends, and must not wait for an answer that cannot come.
        const id = alone.request(dialect.kvSet("standalone"))
        if (pending) await alone.waitFor((f) => f.type === "bridge" && f.id === id, 30_000)
        alone.endInput()
        const cell = await alone.collect(id, 30_000)
        expectWellFormed(cell)
        expect(cell.done.status).toBe("error")
        expect(String(cell.error?.evalue)).toMatch(/BridgeCancelled: .*input has ended/)
        expect(await alone.exited).toEqual({ code: 0, signal: null })
      }
    })

    it.skipIf(runner === undefined)("exits with status 0 on an exit request, and at the end of its input", async () => {
      const exiting = await startKernel({ runner: runner! })
      spawned.push(exiting)
      exiting.send({ type: "exit" })
      expect(await exiting.exited).toEqual({ code: 0, signal: null })
      const ending = await startKernel({ runner: runner! })
      spawned.push(ending)
      const id = ending.request("1 + 1")
      ending.endInput()
      expect(plainResult(await ending.collect(id))).toBe("2")
      expect(await ending.exited).toEqual({ code: 0, signal: null })
    })
  }
)

describe.skipIf(available.length < 2)(titled("kv across runners", available.length < 2 ? "fewer than two runners available" : undefined), () => {
  const root = NodeFs.realpathSync(NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), "veyyon-kv-conformance-")))
  const kernels = new Map<string, Kernel>()

  beforeAll(async () => {
    for (const runner of available) {
      const kernel = await startWithPrelude(runner, { env: { VEYYON_ARTIFACTS_DIR: root } })
      kernel.answerBridge(kvHost(path.join(root, "kv")))
      kernels.set(runner.language, kernel)
    }
  })

  afterAll(() => {
    killAll()
    NodeFs.rmSync(root, { recursive: true, force: true })
  })

  it(`reads in every runner the key each runner wrote (${available.map((r) => r.language).join(", ")})`, async () => {
    for (const [writer, kernel] of kernels) {
      const set = await kernel.execute(dialects[writer]!.kvSet(`from-${writer}`))
      expect(set.error).toBeUndefined()
      for (const [reader, other] of kernels) {
        if (reader === writer) continue
        const got = await other.execute(dialects[reader]!.kvPrint(`from-${writer}`))
        expect({ writer, reader, stdout: got.stdout }).toEqual({ writer, reader, stdout: `${KV_VALUE_JSON}\n` })
      }
    }
    for (const kernel of kernels.values()) expectClean(kernel)
  })
})

/** Answers every `kv` call from memory, as a shared store (the cluster's) does: set, get, list, delete. */
const kvMemoryHost = (stored: Map<string, string>) => (frame: Frame): BridgeAnswer | undefined => {
  if (frame.method !== "kv") return undefined
  const params = frame.params as { op: string; key?: string; value?: string }
  if (params.op === "set") stored.set(params.key!, params.value!)
  if (params.op === "get") return { ok: true, value: stored.get(params.key!) ?? null }
  if (params.op === "list") return { ok: true, value: [...stored.keys()].sort() }
  if (params.op === "delete") return { ok: true, value: stored.delete(params.key!) }
  return { ok: true, value: null }
}

describe.skipIf(available.length < 2)(titled("kv across runners, read through the host (VEYYON_KV_READS=host)", available.length < 2 ? "fewer than two runners available" : undefined), () => {
  const root = NodeFs.realpathSync(NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), "veyyon-kv-host-conformance-")))
  const stored = new Map<string, string>()
  const kernels = new Map<string, Kernel>()

  beforeAll(async () => {
    for (const runner of available) {
      const kernel = await startWithPrelude(runner, { env: { VEYYON_ARTIFACTS_DIR: root, VEYYON_KV_READS: "host" } })
      kernel.answerBridge(kvMemoryHost(stored))
      kernels.set(runner.language, kernel)
    }
  })

  afterAll(() => {
    killAll()
    NodeFs.rmSync(root, { recursive: true, force: true })
  })

  it(`reads in every runner, from the host, the key each runner wrote (${available.map((r) => r.language).join(", ")})`, async () => {
    for (const [writer, kernel] of kernels) {
      const set = await kernel.execute(dialects[writer]!.kvSet(`from-${writer}`))
      expect(set.error).toBeUndefined()
      for (const [reader, other] of kernels) {
        const got = await other.execute(dialects[reader]!.kvPrint(`from-${writer}`))
        expect({ writer, reader, stdout: got.stdout }).toEqual({ writer, reader, stdout: `${KV_VALUE_JSON}\n` })
      }
    }
    expect(NodeFs.readdirSync(root)).toEqual([])
    for (const kernel of kernels.values()) {
      const reads = kernel.frames.filter((f) => f.type === "bridge" && (f.params as { op?: string } | undefined)?.op === "get")
      expect(reads.length).toBe(kernels.size)
      expectClean(kernel)
    }
  })
})
