/**
 * Figure 5: interrupt latency, from SIGINT (an aborted signal, for the tool) to the
 * cell's `done`, for a sleeping cell and a busy loop; median.
 */
import { Deferred, Effect } from "effect"
import type { BenchContext, FigureResult } from "../context.ts"
import { startFloor } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { median } from "../stats.ts"
import { target, type Row } from "../table.ts"
import { rawKernel, runCell } from "../veyyon.ts"

/** The cells interrupted: each prints `go` once it is running, then never ends by itself. */
export const INTERRUPT_CELLS = {
  sleep: "print('go', flush=True)\nimport time\ntime.sleep(60)",
  busy: "print('go', flush=True)\nwhile True:\n    pass"
} as const

type CellName = keyof typeof INTERRUPT_CELLS

const SETTLE_MS = 30

const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS))

const toolOnce = (context: BenchContext, code: string): Promise<number> => {
  const controller = new AbortController()
  let firedAt = 0
  return context.veyyon
    .runPromise(
      runCell({ code, timeout: 120 }, {
        sessionId: "bench-interrupt",
        cwd: context.workDir,
        signal: controller.signal,
        onEvent: (output) => {
          if (output._tag === "Stdout" && output.text.includes("go") && firedAt === 0) {
            void settle().then(() => {
              firedAt = performance.now()
              controller.abort()
            })
          }
        }
      })
    )
    .then((result) => {
      const elapsed = performance.now() - firedAt
      if (!result.cancelled || result.killed) throw new Error(`interrupted cell ended cancelled=${result.cancelled} killed=${result.killed}`)
      return elapsed
    })
}

const rawSamples = (context: BenchContext, runs: number) =>
  context.veyyon.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const kernel = yield* rawKernel(context.python.executable, context.artifactsDir, context.workDir, "bench-interrupt-raw")
        const out: Record<string, Array<number>> = {}
        for (const [name, code] of Object.entries(INTERRUPT_CELLS)) {
          out[name] = []
          for (let i = 0; i < runs; i++) {
            const cancel = yield* Deferred.make<void>()
            let firedAt = 0
            yield* kernel.run({ code, cancel: Deferred.await(cancel) }, (output) =>
              output._tag === "Stdout" && firedAt === 0
                ? Effect.sync(() => {
                  void settle().then(() => {
                    firedAt = performance.now()
                    Deferred.doneUnsafe(cancel, Effect.void)
                  })
                })
                : Effect.void)
            out[name].push(performance.now() - firedAt)
          }
        }
        return out as Record<CellName, Array<number>>
      })
    )
  )

const floorSamples = async (python: string, runs: number): Promise<Record<CellName, Array<number>>> => {
  const floor = await startFloor(python)
  try {
    const out: Record<string, Array<number>> = {}
    for (const [name, code] of Object.entries(INTERRUPT_CELLS)) {
      out[name] = []
      for (let i = 0; i < runs; i++) {
        let firedAt = 0
        const done = await floor.run(code, (frame) => {
          if (frame.type === "stdout" && firedAt === 0 && frame.data?.includes("go")) {
            void settle().then(() => {
              firedAt = performance.now()
              floor.interrupt()
            })
          }
        })
        out[name].push(performance.now() - firedAt)
        if (done.status !== "error") throw new Error("the floor's interrupted cell did not fail")
      }
    }
    return out as Record<CellName, Array<number>>
  } finally {
    await floor.close()
  }
}

/** Measures figure 5. */
export const interrupt = async (context: BenchContext): Promise<FigureResult> => {
  const runs = context.quick ? 2 : 15
  const notes: Array<string> = []
  const tool: Record<string, Array<number>> = {}
  for (const [name, code] of Object.entries(INTERRUPT_CELLS)) {
    tool[name] = []
    for (let i = 0; i < runs; i++) tool[name].push(await toolOnce(context, code))
  }
  const raw = await rawSamples(context, runs)
  const floor = await floorSamples(context.python.executable, runs)
  const jupyter = (await tryJupyter<{ samplesMs: Record<CellName, Array<number>> }>(context, notes, "interrupt", {
    runs,
    settleMs: SETTLE_MS,
    cells: INTERRUPT_CELLS
  }))?.samplesMs
  const rows: Array<Row> = []
  for (const name of Object.keys(INTERRUPT_CELLS) as Array<CellName>) {
    const value = median(tool[name]!)
    rows.push({
      figure: "5 interrupt",
      measure: `${name} cell, median, EvalTool.run (AbortSignal)`,
      unit: "ms",
      veyyon: value,
      floor: median(floor[name]),
      jupyter: jupyter === undefined ? null : median(jupyter[name]),
      target: target("<= 20 ms", value, 20, "at-most")
    })
    rows.push({
      figure: "5 interrupt",
      measure: `${name} cell, median, Kernel.run (cancel)`,
      unit: "ms",
      veyyon: median(raw[name]),
      floor: median(floor[name]),
      jupyter: jupyter === undefined ? null : median(jupyter[name])
    })
  }
  return {
    id: "interrupt",
    title: `interrupt latency, median of ${runs}`,
    rows,
    details: { runs, settleMs: SETTLE_MS, samplesMs: { tool, raw, floor, jupyter: jupyter ?? null } },
    notes
  }
}
