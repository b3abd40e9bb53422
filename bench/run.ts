/**
 * `npm run bench`: measures every figure side by side (veyyon, the floor, Jupyter),
 * writes `bench/results.json` and `bench/results.md` (keeping the cluster soak's section), and prints the table.
 *
 * Flags: `--quick` (tiny sample counts, results not written unless `--out` is given),
 * `--only a,b` (figure ids), `--no-jupyter`, `--out DIR`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { BenchContext, Figure, FigureResult } from "./context.ts"
import { cluster } from "./figures/cluster.ts"
import { cold } from "./figures/cold.ts"
import { interrupt } from "./figures/interrupt.ts"
import { mcp } from "./figures/mcp.ts"
import { rich } from "./figures/rich.ts"
import { roundtrip } from "./figures/roundtrip.ts"
import { scale } from "./figures/scale.ts"
import { stream } from "./figures/stream.ts"
import { RUN_MARKER_VARIABLE } from "./jupyter.ts"
import { fullGc, killAll, ourPythons, withEnvironment } from "./procs.ts"
import { benchInterpreter, jupyterInterpreter, type Interpreter } from "./python.ts"
import { sectionOf } from "./soakcluster/report.ts"
import { markdownTable, textTable, type Row } from "./table.ts"
import { makeVeyyon } from "./veyyon.ts"

/** Every figure, by id, in the order they run. */
export const FIGURES: ReadonlyArray<readonly [string, Figure]> = [
  ["roundtrip", roundtrip],
  ["cold", cold],
  ["stream", stream],
  ["rich", rich],
  ["interrupt", interrupt],
  ["scale", scale],
  ["cluster", cluster],
  ["mcp", mcp]
]

/** How to run the bench. */
export interface BenchOptions {
  readonly quick?: boolean
  readonly only?: ReadonlyArray<string>
  readonly jupyter?: boolean
  readonly log?: (line: string) => void
}

/** What results.json holds. */
export interface BenchResults {
  readonly generatedAt: string
  readonly quick: boolean
  readonly machine: {
    readonly cpus: number
    readonly memoryGiB: number
    readonly node: string
    readonly platform: string
    readonly loadAverage: { readonly start: ReadonlyArray<number>; readonly end: ReadonlyArray<number> }
    /** `calibrate()` at the start and the end. */
    readonly calibrationMs: { readonly start: number; readonly end: number }
  }
  readonly interpreters: { readonly veyyon: string; readonly floor: string; readonly jupyter: string }
  readonly rows: ReadonlyArray<Row>
  readonly figures: ReadonlyArray<FigureResult>
  readonly failures: ReadonlyArray<{ readonly id: string; readonly error: string }>
  readonly notes: ReadonlyArray<string>
  readonly summary: { readonly targets: number; readonly met: number; readonly missed: ReadonlyArray<string> }
}

const loadAverage = (): ReadonlyArray<number> => os.loadavg().map((n) => Math.round(n * 100) / 100)

const spin = (n: number): number => {
  let x = 0
  for (let i = 0; i < n; i++) x += i
  return x
}

/** Milliseconds for a fixed loop of 10^8 additions: how fast this machine was for the run (~100 ms when idle). */
const calibrate = (): number => {
  spin(1e6)
  const start = performance.now()
  spin(1e8)
  return Math.round(performance.now() - start)
}

const describe = (interpreter: Interpreter, how: string): string => `${interpreter.version} (${how})`

/** Leaves in a report no path below the home directory or the scratch directory. */
const scrub = (text: string, scratch: string): string =>
  text.replaceAll(scratch, "<scratch>").replaceAll(os.homedir(), "~")

/** Runs the bench; always shuts down and kills everything it started. */
export const runBench = async (options: BenchOptions = {}): Promise<BenchResults> => {
  const log = options.log ?? ((line: string) => console.log(line))
  const python = benchInterpreter()
  if (python === undefined) throw new Error("no python3 on PATH runs; set VEYYON_BENCH_PYTHON")
  const jupyter = options.jupyter === false ? { missing: "disabled with --no-jupyter" } : jupyterInterpreter()
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-bench-"))
  const marker = `${RUN_MARKER_VARIABLE}=${path.basename(scratch)}`
  process.env[RUN_MARKER_VARIABLE] = path.basename(scratch)
  const dirs = { workDir: path.join(scratch, "work"), artifactsDir: path.join(scratch, "artifacts"), jupyterRuntimeDir: path.join(scratch, "jupyter") }
  for (const dir of Object.values(dirs)) fs.mkdirSync(dir, { recursive: true })
  const veyyon = makeVeyyon(python.executable, dirs.artifactsDir)
  const context: BenchContext = { python, jupyter, ...dirs, veyyon, quick: options.quick === true, log }
  const start = loadAverage()
  const calibrationStart = calibrate()
  const figures: Array<FigureResult> = []
  const failures: Array<{ id: string; error: string }> = []
  const notes: Array<string> = []
  if ("missing" in jupyter) notes.push(`Jupyter column skipped: ${jupyter.missing}`)
  try {
    for (const [id, figure] of FIGURES) {
      if (options.only !== undefined && !options.only.includes(id)) continue
      const began = performance.now()
      log(`bench: ${id}...`)
      try {
        figures.push(await figure(context))
      } catch (error) {
        failures.push({ id, error: scrub(String(error instanceof Error ? error.message : error), scratch) })
        log(`bench: ${id} failed: ${String(error)}`)
      }
      fullGc()
      const heap = process.memoryUsage()
      log(`bench: ${id} took ${((performance.now() - began) / 1000).toFixed(1)} s; host heap after a full collection ${Math.round(heap.heapUsed / 1048576)} MiB used of ${Math.round(heap.heapTotal / 1048576)}, rss ${Math.round(heap.rss / 1048576)} MiB`)
    }
  } finally {
    await veyyon.dispose().catch(() => undefined)
    killAll(withEnvironment(marker))
    fs.rmSync(scratch, { recursive: true, force: true })
  }
  const rows = figures.flatMap((f) => f.rows)
  const targets = rows.filter((r) => r.target !== undefined)
  return {
    generatedAt: new Date().toISOString(),
    quick: context.quick,
    machine: {
      cpus: os.cpus().length,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      loadAverage: { start, end: loadAverage() },
      calibrationMs: { start: calibrationStart, end: calibrate() }
    },
    interpreters: {
      veyyon: describe(python, "the real executable behind python3 on PATH; python.interpreter is set to it"),
      floor: describe(python, "same interpreter as veyyon"),
      jupyter: "missing" in jupyter ? `skipped: ${jupyter.missing}` : describe(jupyter, jupyter.packages)
    },
    rows,
    figures: figures.map((f) => ({ ...f, notes: f.notes.map((n) => scrub(n, scratch)) })),
    failures,
    notes,
    summary: {
      targets: targets.length,
      met: targets.filter((r) => r.target!.met).length,
      missed: targets.filter((r) => !r.target!.met).map((r) => `${r.figure}: ${r.measure}`)
    }
  }
}

/**
 * `earlier` with the figures `fresh` measured replaced (`--only ids --merge`): a part of
 * the bench re-measured without re-running the rest. The machine line stays the earlier
 * run's; the fresh run's machine is noted.
 */
export const mergeResults = (earlier: BenchResults, fresh: BenchResults): BenchResults => {
  const ids = new Set([...fresh.figures.map((f) => f.id), ...fresh.failures.map((f) => f.id)])
  const figureOf = (row: Row) => earlier.figures.find((f) => f.rows.some((r) => r.figure === row.figure && r.measure === row.measure))?.id
  const rows = [...earlier.rows.filter((row) => !ids.has(figureOf(row) ?? "")), ...fresh.rows]
  const targets = rows.filter((r) => r.target !== undefined)
  const m = fresh.machine
  return {
    ...earlier,
    rows,
    figures: [...earlier.figures.filter((f) => !ids.has(f.id)), ...fresh.figures],
    failures: [...earlier.failures.filter((f) => !ids.has(f.id)), ...fresh.failures],
    notes: [
      ...earlier.notes.filter((n) => ![...ids].some((id) => n.startsWith(`${id}: measured separately`))),
      ...[...ids].map((id) =>
        `${id}: measured separately on ${fresh.generatedAt.slice(0, 10)} (load average ${m.loadAverage.start.join(" ")} at the start, calibration ${m.calibrationMs.start} ms)`)
    ],
    summary: {
      targets: targets.length,
      met: targets.filter((r) => r.target!.met).length,
      missed: targets.filter((r) => !r.target!.met).map((r) => `${r.figure}: ${r.measure}`)
    }
  }
}

/** The markdown the README includes. */
export const resultsMarkdown = (results: BenchResults): string => {
  const m = results.machine
  const lines = [
    `Measured ${results.generatedAt.slice(0, 10)} on ${m.cpus} cores, Node ${m.node}; load average ${m.loadAverage.start.join(" ")} at the start, ` +
    `${m.loadAverage.end.join(" ")} at the end; a fixed loop of 10^8 additions took ${m.calibrationMs.start} / ${m.calibrationMs.end} ms (about 100 ms on an idle core).`,
    `veyyon and the floor: ${results.interpreters.veyyon}. Jupyter: ${results.interpreters.jupyter}.`,
    "",
    "Columns: **veyyon** through `EvalTool.run` (rows naming `Kernel` use the bare kernel below the tool); " +
    "**floor**: a ~20-line stdlib NDJSON exec loop (`bench/floor.py`) driven from Node over the same pipes (for streaming: Python printing the same lines into a pipe Node reads); " +
    "**Jupyter**: ipykernel driven by jupyter_client's BlockingKernelClient, timed inside that client. **met** gives veyyon's value over the target's limit.",
    "",
    markdownTable(results.rows),
    "",
    `Targets met: ${results.summary.met} of ${results.summary.targets}.`,
    ...results.notes.map((n) => `- ${n}`),
    ...results.figures.flatMap((f) => f.notes.map((n) => `- ${f.id}: ${n}`)),
    ...results.failures.map((f) => `- ${f.id} failed: ${f.error}`)
  ]
  return lines.join("\n") + "\n"
}

const main = async () => {
  const args = process.argv.slice(2)
  const flag = (name: string) => args.includes(name)
  const value = (name: string) => {
    const i = args.indexOf(name)
    return i >= 0 ? args[i + 1] : undefined
  }
  const quick = flag("--quick")
  const only = value("--only")?.split(",")
  const merge = flag("--merge")
  const out = value("--out") ?? (quick || (only !== undefined && !merge) ? undefined : path.dirname(fileURLToPath(import.meta.url)))
  const fresh = await runBench({ quick, jupyter: !flag("--no-jupyter"), ...(only === undefined ? {} : { only }) })
  const results = merge && out !== undefined ? mergeResults(JSON.parse(fs.readFileSync(path.join(out, "results.json"), "utf8")) as BenchResults, fresh) : fresh
  console.log("")
  console.log(textTable(results.rows))
  for (const failure of results.failures) console.log(`failed: ${failure.id}: ${failure.error}`)
  console.log(`targets met: ${results.summary.met} of ${results.summary.targets}`)
  if (out !== undefined) {
    fs.writeFileSync(path.join(out, "results.json"), JSON.stringify(results, null, 2) + "\n")
    const page = path.join(out, "results.md")
    const soakSection = fs.existsSync(page) ? sectionOf(fs.readFileSync(page, "utf8")) : ""
    fs.writeFileSync(page, resultsMarkdown(results) + (soakSection === "" ? "" : `\n${soakSection}`))
    console.log(`wrote ${path.join(path.relative(process.cwd(), out) || ".", "results.json")} and results.md`)
  }
  process.exitCode = results.failures.length > 0 ? 1 : 0
}

const stopOnSignal = (signal: NodeJS.Signals) =>
  process.once(signal, () => {
    const run = process.env[RUN_MARKER_VARIABLE]
    killAll(ourPythons(run === undefined ? undefined : `${RUN_MARKER_VARIABLE}=${run}`))
    process.exit(130)
  })

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  stopOnSignal("SIGINT")
  stopOnSignal("SIGTERM")
  main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
