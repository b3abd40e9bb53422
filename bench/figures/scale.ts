/**
 * Figure 6: 64 session kernels alive at once: memory per idle kernel (kernel RSS and
 * PSS from /proc, host RSS growth), the time to run one cell in each, and errors.
 */
import { Effect } from "effect"
import type { BenchContext, FigureResult } from "../context.ts"
import { startFloor, type Floor } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { descendants, hostRss, pssOf, rssOf } from "../procs.ts"
import { median, mib } from "../stats.ts"
import type { Row } from "../table.ts"
import { resetSession, runCell } from "../veyyon.ts"

const SETTLE_MS = 1000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Memory {
  readonly rss: Array<number>
  readonly pss: Array<number>
}

const memoryOf = (pids: ReadonlyArray<number>): Memory => ({
  rss: pids.map((pid) => rssOf(pid) ?? 0),
  pss: pids.map((pid) => pssOf(pid) ?? 0)
})

interface Measured {
  readonly startMs: number
  readonly cellMs: number
  readonly errors: number
  readonly memory: Memory
  readonly hostGrowth: number
  readonly alive: number
}

const veyyonScale = async (context: BenchContext, kernels: number): Promise<Measured> => {
  const sessions = Array.from({ length: kernels }, (_, i) => `bench-scale-${i}`)
  const base = await hostRss()
  let errors = 0
  const all = (code: string) =>
    context.veyyon.runPromise(
      Effect.forEach(
        sessions,
        (sessionId) =>
          runCell({ code, timeout: 120 }, { sessionId, cwd: context.workDir }).pipe(
            Effect.map((result) => (result.status === "ok" ? result.text : undefined)),
            Effect.catch(() => Effect.succeed(undefined))
          ),
        { concurrency: "unbounded" }
      )
    )
  const failures = (texts: ReadonlyArray<string | undefined>) => texts.filter((text) => text === undefined).length
  try {
    let start = performance.now()
    const first = await all("import os\nx = 1\nos.getpid()")
    const startMs = performance.now() - start
    errors += failures(first)
    await sleep(SETTLE_MS)
    const ours = new Set(descendants())
    const pids = first.map((text) => Number(text)).filter((pid) => Number.isInteger(pid) && ours.has(pid))
    const memory = memoryOf(pids)
    const hostGrowth = await hostRss() - base
    start = performance.now()
    errors += failures(await all("x = x + 1"))
    const cellMs = performance.now() - start
    return { startMs, cellMs, errors, memory, hostGrowth, alive: pids.length }
  } finally {
    await context.veyyon.runPromise(Effect.forEach(sessions, resetSession, { concurrency: "unbounded" }))
  }
}

const floorScale = async (python: string, kernels: number): Promise<Measured> => {
  const base = await hostRss()
  let floors: Array<Floor> = []
  try {
    let start = performance.now()
    floors = await Promise.all(Array.from({ length: kernels }, () => startFloor(python)))
    const first = await Promise.all(floors.map((f) => f.run("x = 1")))
    const startMs = performance.now() - start
    await sleep(SETTLE_MS)
    const memory = memoryOf(floors.map((f) => f.pid))
    const hostGrowth = await hostRss() - base
    start = performance.now()
    const second = await Promise.all(floors.map((f) => f.run("x = x + 1")))
    const cellMs = performance.now() - start
    const errors = [...first, ...second].filter((d) => d.status !== "ok").length
    return { startMs, cellMs, errors, memory, hostGrowth, alive: floors.length }
  } finally {
    await Promise.all(floors.map((f) => f.close()))
  }
}

/** Measures figure 6. */
export const scale = async (context: BenchContext): Promise<FigureResult> => {
  const kernels = context.quick ? 4 : 64
  const notes: Array<string> = []
  const tool = await veyyonScale(context, kernels)
  if (tool.alive !== kernels) notes.push(`found ${tool.alive} of ${kernels} veyyon kernel processes`)
  const floor = await floorScale(context.python.executable, kernels)
  const jupyter = await tryJupyter<{
    startMs: number
    cellMs: number
    errors: number
    restarts: number
    kernelRss: Array<number>
    kernelPss: Array<number>
    clientRssGrowth: number
  }>(context, notes, "scale", { kernels, settleMs: SETTLE_MS, code: "x = 1" }, 600_000)
  if (jupyter !== undefined && jupyter.restarts > 0) notes.push(`${jupyter.restarts} Jupyter kernel(s) died during start-up and were started again`)
  const figure = `6 scale (${kernels} kernels)`
  const rows: Array<Row> = [
    { figure, measure: "kernel RSS per idle kernel, median", unit: "MiB", veyyon: mib(median(tool.memory.rss)), floor: mib(median(floor.memory.rss)), jupyter: jupyter === undefined ? null : mib(median(jupyter.kernelRss)) },
    { figure, measure: "kernel PSS per idle kernel, median", unit: "MiB", veyyon: mib(median(tool.memory.pss)), floor: mib(median(floor.memory.pss)), jupyter: jupyter === undefined ? null : mib(median(jupyter.kernelPss)) },
    { figure, measure: "host RSS growth per kernel", unit: "MiB", veyyon: mib(tool.hostGrowth / kernels), floor: mib(floor.hostGrowth / kernels), jupyter: jupyter === undefined ? null : mib(jupyter.clientRssGrowth / kernels) },
    { figure, measure: "start all (first cell in each, concurrently)", unit: "ms", veyyon: tool.startMs, floor: floor.startMs, jupyter: jupyter?.startMs ?? null },
    { figure, measure: "one cell in each, concurrently", unit: "ms", veyyon: tool.cellMs, floor: floor.cellMs, jupyter: jupyter?.cellMs ?? null },
    { figure, measure: "errors", unit: "count", veyyon: tool.errors, floor: floor.errors, jupyter: jupyter?.errors ?? null }
  ]
  return {
    id: "scale",
    title: `${kernels} session kernels alive at once`,
    rows,
    details: {
      kernels,
      veyyon: { ...tool, memory: undefined, kernelRss: tool.memory.rss, kernelPss: tool.memory.pss },
      floor: { ...floor, memory: undefined, kernelRss: floor.memory.rss, kernelPss: floor.memory.pss },
      jupyter: jupyter ?? null
    },
    notes
  }
}
