/**
 * Figure 2: cold start to the first result (spawn, init, prelude, `1 + 1`), median of
 * 20, against the interpreter's own `python -c pass`, the floor and Jupyter.
 */
import { Effect } from "effect"
import type { BenchContext, FigureResult } from "../context.ts"
import { startFloor } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { pythonPass } from "../spawn.ts"
import { median } from "../stats.ts"
import { target, type Row } from "../table.ts"
import { rawExecute, rawKernel, resetSession, runCell } from "../veyyon.ts"

const repeat = async (runs: number, once: (i: number) => Promise<number>): Promise<Array<number>> => {
  const samples: Array<number> = []
  for (let i = 0; i < runs; i++) samples.push(await once(i))
  return samples
}

/** Measures figure 2. */
export const cold = async (context: BenchContext): Promise<FigureResult> => {
  const runs = context.quick ? 3 : 20
  const notes: Array<string> = []
  const python = context.python.executable
  await pythonPass(python)
  const pass = await repeat(runs, () => pythonPass(python))
  const floor = await repeat(runs, async () => {
    const start = performance.now()
    const loop = await startFloor(python)
    await loop.run("1 + 1")
    const elapsed = performance.now() - start
    await loop.close()
    return elapsed
  })
  const tool = await repeat(runs, (i) =>
    context.veyyon.runPromise(
      Effect.gen(function*() {
        const sessionId = `bench-cold-${i}`
        const start = performance.now()
        const result = yield* runCell({ code: "1 + 1" }, { sessionId, cwd: context.workDir })
        const elapsed = performance.now() - start
        if (result.text !== "2") return yield* Effect.dieMessage(`cold start cell answered ${JSON.stringify(result.text)}`)
        yield* resetSession(sessionId)
        return elapsed
      })
    )
  )
  const raw = await repeat(runs, (i) =>
    context.veyyon.runPromise(
      Effect.scoped(
        Effect.gen(function*() {
          const start = performance.now()
          const kernel = yield* rawKernel(python, context.artifactsDir, context.workDir, `bench-cold-raw-${i}`)
          yield* rawExecute(kernel, { code: "1 + 1" })
          return performance.now() - start
        })
      )
    )
  )
  const jupyterPython = "executable" in context.jupyter ? context.jupyter.executable : undefined
  const jupyterPass = jupyterPython === undefined ? undefined : await repeat(runs, () => pythonPass(jupyterPython))
  const jupyter = (await tryJupyter<{ samplesMs: Array<number> }>(context, notes, "cold", { runs }))?.samplesMs
  const passMedian = median(pass)
  const m = (samples: ReadonlyArray<number> | undefined) => (samples === undefined ? null : median(samples))
  const rows: Array<Row> = [
    {
      figure: "2 cold start",
      measure: "median, EvalTool.run (new session)",
      unit: "ms",
      veyyon: m(tool),
      floor: m(floor),
      jupyter: m(jupyter),
      target: target("<= python -c pass + 40 ms", m(tool), passMedian + 40, "at-most")
    },
    { figure: "2 cold start", measure: "median, PythonKernel.make + execute", unit: "ms", veyyon: m(raw), floor: m(floor), jupyter: m(jupyter) },
    { figure: "2 cold start", measure: "median, python -c pass", unit: "ms", veyyon: passMedian, floor: passMedian, jupyter: m(jupyterPass) }
  ]
  return {
    id: "cold",
    title: `cold start to the first result, median of ${runs}`,
    rows,
    details: { runs, samplesMs: { tool, raw, floor, pythonPass: pass, jupyter: jupyter ?? null, jupyterPythonPass: jupyterPass ?? null } },
    notes
  }
}
