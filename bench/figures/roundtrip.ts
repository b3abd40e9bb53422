/**
 * Figure 1: the warm round trip of a trivial cell (`x = 1 + 1`), p50 and p99, through
 * `EvalTool.run` and through the bare `Kernel.run`, against the floor and Jupyter.
 */
import { Effect } from "effect"
import type { BenchContext, FigureResult } from "../context.ts"
import { startFloor } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { quantile } from "../stats.ts"
import { target, type Row } from "../table.ts"
import { rawExecute, rawKernel, runCell } from "../veyyon.ts"

const CODE = "x = 1 + 1"

const sampleEffect = <E, R>(cells: number, warmup: number, once: Effect.Effect<unknown, E, R>) =>
  Effect.gen(function*() {
    for (let i = 0; i < warmup; i++) yield* once
    const samples: Array<number> = []
    for (let i = 0; i < cells; i++) {
      const start = performance.now()
      yield* once
      samples.push((performance.now() - start) * 1000)
    }
    return samples
  })

/** Microsecond samples of the floor loop's round trip. */
const floorSamples = async (python: string, cells: number, warmup: number): Promise<Array<number>> => {
  const floor = await startFloor(python)
  try {
    for (let i = 0; i < warmup; i++) await floor.run(CODE)
    const samples: Array<number> = []
    for (let i = 0; i < cells; i++) {
      const start = performance.now()
      await floor.run(CODE)
      samples.push((performance.now() - start) * 1000)
    }
    return samples
  } finally {
    await floor.close()
  }
}

/** Measures figure 1. */
export const roundtrip = async (context: BenchContext): Promise<FigureResult> => {
  const cells = context.quick ? 50 : 2000
  const warmup = context.quick ? 10 : 300
  const notes: Array<string> = []
  const floor = await floorSamples(context.python.executable, cells, warmup)
  const cellContext = { sessionId: "bench-roundtrip", cwd: context.workDir }
  const tool = await context.veyyon.runPromise(sampleEffect(cells, warmup, runCell({ code: CODE }, cellContext)))
  const raw = await context.veyyon.runPromise(
    Effect.scoped(
      Effect.flatMap(
        rawKernel(context.python.executable, context.artifactsDir, context.workDir, "bench-roundtrip-raw"),
        (kernel) => sampleEffect(cells, warmup, rawExecute(kernel, { code: CODE }))
      )
    )
  )
  const jupyter = (await tryJupyter<{ samplesMs: Array<number> }>(context, notes, "roundtrip", { warmup, cells, code: CODE }))?.samplesMs.map(
    (ms) => ms * 1000
  )
  const p = (samples: ReadonlyArray<number> | undefined, q: number) => (samples === undefined ? null : quantile(samples, q))
  const floorP50 = p(floor, 0.5)!
  const rows: Array<Row> = [
    {
      figure: "1 warm round trip",
      measure: "p50, EvalTool.run",
      unit: "us",
      veyyon: p(tool, 0.5),
      floor: floorP50,
      jupyter: p(jupyter, 0.5),
      target: target("<= 2x floor p50", p(tool, 0.5), 2 * floorP50, "at-most")
    },
    { figure: "1 warm round trip", measure: "p99, EvalTool.run", unit: "us", veyyon: p(tool, 0.99), floor: p(floor, 0.99), jupyter: p(jupyter, 0.99) },
    { figure: "1 warm round trip", measure: "p50, Kernel.run", unit: "us", veyyon: p(raw, 0.5), floor: floorP50, jupyter: p(jupyter, 0.5) },
    { figure: "1 warm round trip", measure: "p99, Kernel.run", unit: "us", veyyon: p(raw, 0.99), floor: p(floor, 0.99), jupyter: p(jupyter, 0.99) }
  ]
  return {
    id: "roundtrip",
    title: `warm trivial-cell round trip (\`${CODE}\`), ${cells} cells after ${warmup} warm-up`,
    rows,
    details: {
      cells,
      warmup,
      quantilesUs: Object.fromEntries(
        Object.entries({ tool, raw, floor, jupyter }).map(([name, samples]) => [
          name,
          samples === undefined ? null : { p50: p(samples, 0.5), p90: p(samples, 0.9), p99: p(samples, 0.99), max: p(samples, 1) }
        ])
      )
    },
    notes
  }
}
