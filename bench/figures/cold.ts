/**
 * Figure 2: cold start to the first result (spawn, prelude, init, `1 + 1`), median of
 * 20, against the interpreter's own `python -c pass`, the floor and Jupyter (the first
 * four taken in turn, one sample of each per round, so they see the same load); and the
 * same through a sandboxed tool (`sandbox.mode: required`), alternated run by run with
 * an unsandboxed one so both see the same load; and a new session's first cell when a
 * spare kernel is ready (`kernel.spares: 1`).
 */
import { spawnSync } from "node:child_process"
import { Duration, Effect, Schedule } from "effect"
import type { BenchContext, FigureResult } from "../context.ts"
import { startFloor } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { pythonPass } from "../spawn.ts"
import { median } from "../stats.ts"
import { target, type Row } from "../table.ts"
import { KernelRegistry } from "../../dist/services/registry/KernelRegistry.js"
import { makeVeyyon, rawExecute, rawKernel, resetSession, runCell, type VeyyonRuntime } from "../veyyon.ts"

const repeat = async (runs: number, once: (i: number) => Promise<number>): Promise<Array<number>> => {
  const samples: Array<number> = []
  for (let i = 0; i < runs; i++) samples.push(await once(i))
  return samples
}

const coldCell = (runtime: VeyyonRuntime, sessionId: string, cwd: string): Promise<number> =>
  runtime.runPromise(
    Effect.gen(function*() {
      const start = performance.now()
      const result = yield* runCell({ code: "1 + 1" }, { sessionId, cwd })
      const elapsed = performance.now() - start
      if (result.text !== "2") return yield* Effect.die(new Error(`cold start cell answered ${JSON.stringify(result.text)}`))
      yield* resetSession(sessionId)
      return elapsed
    })
  )

/** Unsandboxed and sandboxed cold starts, alternated; undefined (with a note) when bwrap cannot run here. */
const sandboxedPairs = async (context: BenchContext, runs: number, notes: Array<string>) => {
  const probe = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"], { encoding: "utf8" })
  if (probe.status !== 0) {
    notes.push(`sandboxed cold start not measured: bwrap cannot run here (${probe.error?.message ?? probe.stderr.trim()})`)
    return undefined
  }
  const sandboxed = makeVeyyon(context.python.executable, context.artifactsDir, { sandbox: { mode: "required" } })
  try {
    await coldCell(sandboxed, "bench-cold-sandbox-warmup", context.workDir)
    const plain: Array<number> = []
    const boxed: Array<number> = []
    for (let i = 0; i < runs; i++) {
      plain.push(await coldCell(context.veyyon, `bench-cold-pair-${i}`, context.workDir))
      boxed.push(await coldCell(sandboxed, `bench-cold-sandbox-${i}`, context.workDir))
    }
    return { plain, boxed }
  } finally {
    await sandboxed.dispose()
  }
}

/** How long a listed spare is given to finish booting its interpreter (the pool lists it once spawned). */
const SPARE_SETTLE_MS = 300

/** New sessions' first cells through a tool that keeps one spare kernel, each started once a spare is ready. */
const withSpares = async (context: BenchContext, runs: number): Promise<Array<number>> => {
  const pooled = makeVeyyon(context.python.executable, context.artifactsDir, { kernel: { spares: 1 } })
  const spareReady = () => pooled.runPromise(KernelRegistry.use((registry) =>
    registry.sparePids.pipe(
      Effect.repeat({ until: (pids) => pids.length > 0, schedule: Schedule.spaced(Duration.millis(5)) }),
      Effect.timeoutOrElse({ duration: Duration.seconds(120), orElse: () => Effect.fail(new Error("no spare kernel became ready")) })
    )))
  try {
    await coldCell(pooled, "bench-cold-spare-warmup", context.workDir)
    return await repeat(runs, async (i) => {
      await spareReady()
      await new Promise((resolve) => setTimeout(resolve, SPARE_SETTLE_MS))
      return coldCell(pooled, `bench-cold-spare-${i}`, context.workDir)
    })
  } finally {
    await pooled.dispose()
  }
}

/** Measures figure 2. */
export const cold = async (context: BenchContext): Promise<FigureResult> => {
  const runs = context.quick ? 3 : 20
  const notes: Array<string> = []
  const python = context.python.executable
  await pythonPass(python)
  // One sample of each per round, so the references and the tool see the same load.
  const pass: Array<number> = []
  const floor: Array<number> = []
  const tool: Array<number> = []
  const raw: Array<number> = []
  for (let i = 0; i < runs; i++) {
    pass.push(await pythonPass(python))
    const start = performance.now()
    const loop = await startFloor(python)
    await loop.run("1 + 1")
    floor.push(performance.now() - start)
    await loop.close()
    tool.push(await coldCell(context.veyyon, `bench-cold-${i}`, context.workDir))
    raw.push(
      await context.veyyon.runPromise(
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
  }
  const spared = await withSpares(context, runs)
  const pairs = await sandboxedPairs(context, runs, notes)
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
      target: target("<= python -c pass + 20 ms", m(tool), passMedian + 20, "at-most")
    },
    {
      figure: "2 cold start",
      measure: "median, EvalTool.run (new session, a spare kernel ready)",
      unit: "ms",
      veyyon: m(spared),
      floor: null,
      jupyter: null,
      target: target("<= 10 ms", m(spared), 10, "at-most")
    },
    { figure: "2 cold start", measure: "median, Kernel.make + execute", unit: "ms", veyyon: m(raw), floor: m(floor), jupyter: m(jupyter) },
    { figure: "2 cold start", measure: "median, python -c pass", unit: "ms", veyyon: passMedian, floor: passMedian, jupyter: m(jupyterPass) },
    ...(pairs === undefined ? [] : [
      {
        figure: "2 cold start",
        measure: "median, EvalTool.run (new session), sandboxed",
        unit: "ms",
        veyyon: m(pairs.boxed),
        floor: null,
        jupyter: null,
        target: target(
          `<= unsandboxed (${Math.round(median(pairs.plain))} ms, alternated) + 20 ms`,
          m(pairs.boxed),
          median(pairs.plain) + 20,
          "at-most"
        )
      }
    ])
  ]
  return {
    id: "cold",
    title: `cold start to the first result, median of ${runs}`,
    rows,
    details: {
      runs,
      samplesMs: {
        tool,
        raw,
        floor,
        pythonPass: pass,
        jupyter: jupyter ?? null,
        jupyterPythonPass: jupyterPass ?? null,
        unsandboxedAlternated: pairs?.plain ?? null,
        sandboxed: pairs?.boxed ?? null
      }
    },
    notes
  }
}
