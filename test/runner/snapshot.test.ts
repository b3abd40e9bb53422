/**
 * Snapshots and restores (PROTOCOL.md) against the real Python runner, standalone: a snapshot's
 * chunks, handed to a NEW runner process as restore pieces, bring back the user's state (values,
 * sharing, cell classes and functions, modules, random states, cwd and env); what cannot be saved
 * is named; a cell that arrives during a long snapshot makes it yield; a corrupt payload is refused
 * and the runner keeps serving.
 */
import * as NodeCrypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { findPython, findPythonWith, integrationEnabled } from "../support/python.ts"
import { integrationOff, titled } from "../support/skip.ts"
import { type Frame, type Kernel, killAll, pythonRunner, sleep, startWithPrelude } from "./harness.ts"

const MiB = 1024 * 1024
const numpyPython = integrationEnabled() ? findPythonWith(["numpy"]) : undefined
const python = numpyPython ?? (integrationEnabled() ? findPython() : undefined)

let seq = 0

interface Saved {
  readonly done: Frame
  readonly chunks: ReadonlyArray<Frame>
  readonly payload: Buffer
}

/** Send a snapshot request and collect its chunks up to its snapshot_done. */
const takeSnapshot = async (
  kernel: Kernel,
  options: { budget?: number; valueBudget?: number; known?: string } = {}
): Promise<Saved> => {
  const id = `snap${++seq}`
  const from = kernel.frames.length
  kernel.send({ type: "snapshot", id, budget: options.budget ?? 256 * MiB, valueBudget: options.valueBudget ?? 256 * MiB, ...(options.known !== undefined ? { known: options.known } : {}) })
  const done = await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === id, 120_000, from)
  const chunks = kernel.framesOf(id).filter((f) => f.type === "snapshot_chunk")
  return { done, chunks, payload: Buffer.concat(chunks.map((f) => Buffer.from(String(f.data), "base64"))) }
}

/** Send payload as restore pieces of about pieceBytes each and wait for restore_done. */
const restorePayload = async (kernel: Kernel, payload: Buffer, executionCount?: number, pieceBytes = 1000): Promise<Frame> => {
  const id = `restore${++seq}`
  const from = kernel.frames.length
  for (let at = 0; at < payload.length || at === 0; at += pieceBytes) {
    const last = at + pieceBytes >= payload.length
    kernel.send({
      type: "restore",
      id,
      data: payload.subarray(at, at + pieceBytes).toString("base64"),
      more: !last,
      ...(last && executionCount !== undefined ? { executionCount } : {})
    })
    if (last) break
  }
  return kernel.waitFor((f) => f.type === "restore_done" && f.id === id, 120_000, from)
}

const plainResultOf = (cell: { results: ReadonlyArray<Record<string, unknown>> }): unknown => cell.results[0]?.["text/plain"]

const start = (): Promise<Kernel> => startWithPrelude(pythonRunner(python)!)

describe.skipIf(!integrationEnabled() || python === undefined)(titled("python runner snapshots", integrationOff()), () => {
  let workdir: string

  beforeAll(() => {
    workdir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-snapshot-")))
  })

  afterAll(() => {
    killAll()
    fs.rmSync(workdir, { recursive: true, force: true })
  })

  it("brings a session's state back in a new runner process", async () => {
    const first = await start()
    const withNumpy = numpyPython !== undefined
    const setup = await first.execute([
      "import random, socket",
      withNumpy ? "import numpy as np\nnp.random.seed(5)\narr = np.arange(10) * 3" : "",
      "class Account:",
      "    def __init__(self, owner, balance):",
      "        self.owner, self.balance = owner, balance",
      "    def deposit(self, amount):",
      "        self.balance += amount",
      "        return self.balance",
      "def greet(name):",
      "    return 'hello ' + name",
      "twice = lambda v: v * 2",
      "from dataclasses import dataclass",
      "from collections import namedtuple",
      "@dataclass",
      "class Pt:",
      "    x: int",
      "    y: int = 0",
      "Pair = namedtuple('Pair', 'a b')",
      "pts = [Pt(1, 2), Pair(3, 4)]",
      "data = {'xs': [1, 2, 3], 'label': 'é'}",
      "alias = data",
      "acct = Account('ann', 10)",
      "random.seed(42)",
      `%cd ${workdir}`,
      "%env SNAPSHOT_TEST_VAR=kept",
      "conn = socket.socket()",
      "huge = bytes(3 * 1024 * 1024)"
    ].join("\n"))
    expect(setup.error).toBeUndefined()
    const count = Number(setup.done.executionCount)

    const saved = await takeSnapshot(first, { valueBudget: 2 * MiB })
    expect(saved.done).toMatchObject({ status: "saved", bytes: saved.payload.length })
    expect(saved.done.digest).toBe(NodeCrypto.createHash("sha256").update(saved.payload).digest("hex"))
    expect(saved.done.names).toEqual(expect.arrayContaining(["random", "socket", "Account", "greet", "data", "alias", "acct", "twice", "dataclass", "Pt", "Pair", "pts"]))
    expect(saved.done.names).not.toContain("kv")
    expect(saved.done.skipped).toEqual([
      { name: "conn", reason: "socket objects cannot be saved" },
      { name: "huge", reason: "at least 3 MiB, over the 2 MiB per-value budget" }
    ])
    for (const chunk of saved.chunks) expect(Buffer.from(String(chunk.data), "base64").length).toBeLessThanOrEqual(4 * MiB)

    const unchanged = await takeSnapshot(first, { valueBudget: 2 * MiB, known: String(saved.done.digest) })
    expect(unchanged.done).toMatchObject({ status: "unchanged", digest: saved.done.digest })
    expect(unchanged.chunks).toEqual([])

    const probe = [
      "import os",
      "print(alias is data, data['label'], acct.deposit(5), type(acct).__name__, greet('bo'), twice(4))",
      "print(pts, pts[0] == Pt(1, 2), type(pts[1]) is Pair)",
      "print(os.getcwd(), os.environ.get('SNAPSHOT_TEST_VAR'), random.random())",
      withNumpy ? "print(np.__name__, arr.sum(), np.random.randint(1000))" : ""
    ].join("\n")
    const expected = await first.execute(probe)
    expect(expected.error).toBeUndefined()

    const second = await start()
    const restored = await restorePayload(second, saved.payload, count)
    expect(restored.error).toBeUndefined()
    expect(restored.skipped).toEqual([])
    expect(restored.restored).toEqual(expect.arrayContaining(saved.done.names as Array<string>))
    const again = await second.execute(probe)
    expect(again.error).toBeUndefined()
    expect(again.stdout).toBe(expected.stdout)
    expect(again.stdout).toContain(`True é 15 Account hello bo 8\n[Pt(x=1, y=2), Pair(a=3, b=4)] True True\n${workdir} kept `)
    expect(again.done.executionCount).toBe(count + 1)
    // The restored kernel saves the same names in turn (its definitions are recorded again as they are replayed).
    const resaved = await takeSnapshot(second, { valueBudget: 2 * MiB })
    expect(resaved.done.status).toBe("saved")
    expect([...(resaved.done.names as Array<string>)].sort()).toEqual([...(saved.done.names as Array<string>), "os"].sort())
    expect(first.badLines).toEqual([])
    expect(second.badLines).toEqual([])
  })

  it("yields to a cell that arrives during a long snapshot", async () => {
    const kernel = await start()
    const fill = await kernel.execute("for _i in range(60):\n    globals()['v%d' % _i] = [str(j) for j in range(10000)]")
    expect(fill.error).toBeUndefined()
    const began = Date.now()
    const full = await takeSnapshot(kernel)
    const fullMs = Date.now() - began
    expect(full.done.status).toBe("saved")

    const id = `snap${++seq}`
    kernel.send({ type: "snapshot", id, budget: 256 * MiB, valueBudget: 256 * MiB })
    await sleep(Math.min(100, fullMs / 4))
    const sent = Date.now()
    const cell = await kernel.execute("40 + 2")
    const cellMs = Date.now() - sent
    const done = kernel.frames.find((f) => f.type === "snapshot_done" && f.id === id)
    expect(done).toMatchObject({ status: "yielded", names: [], skipped: [] })
    expect(cell.results[0]?.["text/plain"]).toBe("42")
    expect(kernel.frames.indexOf(done!)).toBeLessThan(kernel.frames.findIndex((f) => f.id === cell.id))
    // The cell waited for at most a little of the snapshot, not for all of it.
    expect(cellMs, `cell ${cellMs} ms, whole snapshot ${fullMs} ms`).toBeLessThan(fullMs / 2)

    // SIGINT during a snapshot is ignored, as between cells.
    const interrupted = `snap${++seq}`
    const from = kernel.frames.length
    kernel.send({ type: "snapshot", id: interrupted, budget: 256 * MiB, valueBudget: 256 * MiB })
    await sleep(Math.min(50, fullMs / 4))
    kernel.interrupt()
    const after = await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === interrupted, 120_000, from)
    expect(after).toMatchObject({ status: "saved", digest: full.done.digest })
    expect(plainResultOf(await kernel.execute("len(v0)"))).toBe("10000")
    expect(kernel.badLines).toEqual([])
  })

  it("runs a snapshot sent during a cell after that cell, as of its end", async () => {
    const kernel = await start()
    const cell = kernel.request("import time\ntime.sleep(0.3)\nlate = 'set at the end'")
    await kernel.waitFor((f) => f.type === "started" && f.id === cell)
    const saved = await takeSnapshot(kernel)
    expect(saved.done).toMatchObject({ status: "saved", names: ["time", "late"] })
    const done = kernel.frames.findIndex((f) => f.type === "done" && f.id === cell)
    expect(done).toBeGreaterThan(-1)
    expect(done).toBeLessThan(kernel.frames.indexOf(saved.done))
  })

  it("keeps what a restore prints out of the frames", async () => {
    const first = await start()
    await first.execute("def loud(fn):\n    print('decorating', fn.__name__)\n    return fn\n@loud\ndef quiet():\n    return 'q'")
    const saved = await takeSnapshot(first)
    const second = await start()
    const from = second.frames.length
    const restored = await restorePayload(second, saved.payload)
    expect(restored).toMatchObject({ skipped: [] })
    expect(restored.restored).toEqual(["loud", "quiet"])
    expect(second.frames.slice(from).map((f) => f.type)).toEqual(["restore_done"])
    expect(plainResultOf(await second.execute("quiet()"))).toBe("'q'")
  })

  it("refuses a corrupt payload and keeps serving", async () => {
    const kernel = await start()
    const bad = await restorePayload(kernel, Buffer.from("this is no snapshot"))
    expect(bad).toMatchObject({ restored: [], skipped: [] })
    expect(String(bad.error)).toContain("not a Python runner snapshot")
    const cell = await kernel.execute("1 + 1")
    expect(cell.results[0]?.["text/plain"]).toBe("2")
    expect(kernel.badLines).toEqual([])
  })

  it("saves nothing after %reset", async () => {
    const kernel = await start()
    await kernel.execute("x = 1\ndef f():\n    return x")
    expect((await takeSnapshot(kernel)).done.names).toEqual(["f", "x"])
    await kernel.execute("%reset -f")
    const after = await takeSnapshot(kernel)
    expect(after.done).toMatchObject({ status: "saved", names: [], skipped: [] })
  })
})
