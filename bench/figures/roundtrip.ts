/**
 * Figure 1: the warm round trip of a trivial cell (`x = 1 + 1`), p50 and p99, through
 * `EvalTool.run` and through the bare `Kernel.run`, against the floor and Jupyter;
 * and, to show what the fiber runtime itself costs, the same floor loop driven from Effect
 * with one Deferred per cell, with this process's CPU per cell for each loop. The tool and
 * the bare kernel run in four alternated rounds, each of as many cells as the floor's loop
 * and warmed up again as long before it is timed.
 */
import { Effect, Exit, Scope } from "effect"
import type { BenchContext, FigureResult } from "../context.ts"
import { effectFloor, startFloor } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { median, quantile } from "../stats.ts"
import { target, type Row } from "../table.ts"
import { rawExecute, rawKernel, runCell } from "../veyyon.ts"

const CODE = "x = 1 + 1"

/** Microsecond samples of each cell, and this process's CPU (user + system) per cell in microseconds. */
interface Sampled {
  readonly samples: Array<number>
  readonly cpuPerCell: number
}

const sampleEffect = <E, R>(cells: number, warmup: number, once: Effect.Effect<unknown, E, R>) =>
  Effect.gen(function*() {
    for (let i = 0; i < warmup; i++) yield* once
    const samples: Array<number> = []
    const cpu = process.cpuUsage()
    for (let i = 0; i < cells; i++) {
      const start = performance.now()
      yield* once
      samples.push((performance.now() - start) * 1000)
    }
    return { samples, cpuPerCell: cpuSince(cpu) / cells } satisfies Sampled
  })

const cpuSince = (start: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(start)
  return used.user + used.system
}

/** The floor loop's round trip from plain Node. */
const floorSamples = async (python: string, cells: number, warmup: number): Promise<Sampled> => {
  const floor = await startFloor(python)
  try {
    for (let i = 0; i < warmup; i++) await floor.run(CODE)
    const samples: Array<number> = []
    const cpu = process.cpuUsage()
    for (let i = 0; i < cells; i++) {
      const start = performance.now()
      await floor.run(CODE)
      samples.push((performance.now() - start) * 1000)
    }
    return { samples, cpuPerCell: cpuSince(cpu) / cells }
  } finally {
    await floor.close()
  }
}

/** The same floor loop driven from Effect with one Deferred per cell. */
const effectFloorSamples = async (python: string, cells: number, warmup: number): Promise<Sampled> => {
  const floor = await effectFloor(python)
  try {
    return await Effect.runPromise(sampleEffect(cells, warmup, floor.run(CODE)))
  } finally {
    await floor.close()
  }
}

/** Pools the rounds of one loop: every round's samples, and the median of the rounds' CPU per cell. */
const pooled = (rounds: ReadonlyArray<Sampled>): Sampled => ({
  samples: rounds.flatMap((round) => round.samples),
  cpuPerCell: median(rounds.map((round) => round.cpuPerCell))
})

const ROUNDS = 4

/** Measures figure 1. */
export const roundtrip = async (context: BenchContext): Promise<FigureResult> => {
  const cells = context.quick ? 50 : 2000
  const warmup = context.quick ? 10 : 2000
  const notes: Array<string> = []
  const floorRun = await floorSamples(context.python.executable, cells, warmup)
  const effectRun = await effectFloorSamples(context.python.executable, cells, warmup)
  const cellContext = { sessionId: "bench-roundtrip", cwd: context.workDir }
  const perRound = cells
  const loops = { tool: [] as Array<Sampled>, raw: [] as Array<Sampled> }
  const kernelScope = Scope.makeUnsafe()
  try {
    const kernel = await context.veyyon.runPromise(
      Scope.provide(rawKernel(context.python.executable, context.artifactsDir, context.workDir, "bench-roundtrip-raw"), kernelScope)
    )
    const rawCell = rawExecute(kernel, { code: CODE })
    const toolCell = runCell({ code: CODE }, cellContext)
    for (let round = 0; round < ROUNDS; round++) {
      const first = warmup
      loops.tool.push(await context.veyyon.runPromise(sampleEffect(perRound, first, toolCell)))
      loops.raw.push(await context.veyyon.runPromise(sampleEffect(perRound, first, rawCell)))
    }
  } finally {
    await Effect.runPromise(Scope.close(kernelScope, Exit.void))
  }
  const [toolRun, rawRun] = [pooled(loops.tool), pooled(loops.raw)]
  const [floor, effect, tool, raw] = [floorRun.samples, effectRun.samples, toolRun.samples, rawRun.samples]
  const jupyter = (await tryJupyter<{ samplesMs: Array<number> }>(context, notes, "roundtrip", { warmup, cells, code: CODE }))?.samplesMs.map(
    (ms) => ms * 1000
  )
  const p = (samples: ReadonlyArray<number> | undefined, q: number) => (samples === undefined ? null : quantile(samples, q))
  const floorP50 = p(floor, 0.5)!
  const figure = "1 warm round trip"
  const rows: Array<Row> = [
    {
      figure,
      measure: "p50, EvalTool.run",
      unit: "us",
      veyyon: p(tool, 0.5),
      floor: floorP50,
      jupyter: p(jupyter, 0.5),
      target: target("<= 2x floor p50", p(tool, 0.5), 2 * floorP50, "at-most")
    },
    { figure, measure: "p99, EvalTool.run", unit: "us", veyyon: p(tool, 0.99), floor: p(floor, 0.99), jupyter: p(jupyter, 0.99) },
    {
      figure,
      measure: "p50, Kernel.run",
      unit: "us",
      veyyon: p(raw, 0.5),
      floor: floorP50,
      jupyter: p(jupyter, 0.5),
      target: target("<= 1.5x floor p50", p(raw, 0.5), 1.5 * floorP50, "at-most")
    },
    { figure, measure: "p99, Kernel.run", unit: "us", veyyon: p(raw, 0.99), floor: p(floor, 0.99), jupyter: p(jupyter, 0.99) },
    { figure, measure: "p50, Effect loop over floor.py (one Deferred per cell, no veyyon code)", unit: "us", veyyon: p(effect, 0.5), floor: floorP50, jupyter: null },
    {
      figure,
      measure: "host CPU per cell, EvalTool.run (median of 4 rounds alternated with Kernel.run's)",
      unit: "us",
      veyyon: toolRun.cpuPerCell,
      floor: floorRun.cpuPerCell,
      jupyter: null,
      target: target("<= 2x Kernel.run's", toolRun.cpuPerCell, 2 * rawRun.cpuPerCell, "at-most")
    },
    { figure, measure: "host CPU per cell, Kernel.run", unit: "us", veyyon: rawRun.cpuPerCell, floor: floorRun.cpuPerCell, jupyter: null },
    { figure, measure: "host CPU per cell, Effect loop over floor.py", unit: "us", veyyon: effectRun.cpuPerCell, floor: floorRun.cpuPerCell, jupyter: null }
  ]
  return {
    id: "roundtrip",
    title: `warm trivial-cell round trip (\`${CODE}\`), ${cells} cells after ${warmup} warm-up (the tool and the bare kernel: ${ROUNDS} alternated rounds of that)`,
    rows,
    details: {
      cells,
      warmup,
      hostCpuPerCellUs: { tool: toolRun.cpuPerCell, raw: rawRun.cpuPerCell, rounds: { tool: loops.tool.map((round) => round.cpuPerCell), raw: loops.raw.map((round) => round.cpuPerCell) }, effect: effectRun.cpuPerCell, floor: floorRun.cpuPerCell },
      quantilesUs: Object.fromEntries(
        Object.entries({ tool, raw, effect, floor, jupyter }).map(([name, samples]) => [
          name,
          samples === undefined ? null : { p50: p(samples, 0.5), p90: p(samples, 0.9), p99: p(samples, 0.99), max: p(samples, 1) }
        ])
      )
    },
    notes
  }
}
