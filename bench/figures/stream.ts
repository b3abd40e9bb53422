/**
 * Figure 3: a cell printing 100 MiB in 1 KiB lines, MB/s through `EvalTool.run` and the
 * bare kernel, against the floor's raw pipe rate and Jupyter; and the host's RSS growth.
 */
import { Effect } from "effect"
import type { BenchContext, FigureResult } from "../context.ts"
import { rawPipe } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { hostRss } from "../procs.ts"
import { mib } from "../stats.ts"
import { target, type Row } from "../table.ts"
import { rawKernel, runCell } from "../veyyon.ts"

const code = (lines: number) => `line = "x" * 1023\nfor _ in range(${lines}):\n    print(line)`

/** Where the host's memory was, in MiB: resident, V8 heap, and outside it (Buffers). */
const memory = (usage: NodeJS.MemoryUsage) => ({
  rss: mib(usage.rss),
  heapTotal: mib(usage.heapTotal),
  heapUsed: mib(usage.heapUsed),
  external: mib(usage.external),
  arrayBuffers: mib(usage.arrayBuffers)
})

const rssWatcher = async () => {
  const base = await hostRss()
  const baseUsage = process.memoryUsage()
  let peak = process.memoryUsage()
  const sample = () => {
    const usage = process.memoryUsage()
    if (usage.rss > peak.rss) peak = usage
  }
  const timer = setInterval(sample, 5)
  return {
    stop: () => {
      clearInterval(timer)
      sample()
      return { growth: Math.max(peak.rss, base) - base, base: memory(baseUsage), peak: memory(peak) }
    }
  }
}

/** Measures figure 3. */
export const stream = async (context: BenchContext): Promise<FigureResult> => {
  const lines = context.quick ? 2048 : 102_400
  const notes: Array<string> = []
  const floor = await rawPipe(context.python.executable, lines)
  const cellContext = { sessionId: "bench-stream", cwd: context.workDir }
  await context.veyyon.runPromise(runCell({ code: "pass" }, cellContext))
  let toolBytes = 0
  const watcher = await rssWatcher()
  const toolStart = performance.now()
  const result = await context.veyyon.runPromise(
    runCell({ code: code(lines), timeout: 600 }, {
      ...cellContext,
      onEvent: (output) => {
        if (output._tag === "Stdout") toolBytes += output.text.length
      }
    })
  )
  const toolMs = performance.now() - toolStart
  const { growth: rssGrowth, base: memoryBefore, peak: memoryAtPeak } = watcher.stop()
  if (result.status !== "ok") notes.push(`the streaming cell ended with status ${result.status}`)
  const raw = await context.veyyon.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const kernel = yield* rawKernel(context.python.executable, context.artifactsDir, context.workDir, "bench-stream-raw")
        let bytes = 0
        const start = performance.now()
        yield* kernel.run({ code: code(lines) }, (output) =>
          Effect.sync(() => {
            if (output._tag === "Stdout") bytes += output.text.length
          }))
        return { bytes, ms: performance.now() - start }
      })
    )
  )
  const jupyter = await tryJupyter<{ bytes: number; ms: number; clientRssGrowth: number }>(context, notes, "stream", { code: code(lines) })
  const rate = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000)
  const floorRate = rate(floor.bytes, floor.ms)
  const size = `${Math.round(lines / 1024)} MiB`
  const toolRate = rate(toolBytes, toolMs)
  const rows: Array<Row> = [
    {
      figure: "3 streaming",
      measure: `${size} in 1 KiB lines, EvalTool.run`,
      unit: "MB/s",
      veyyon: toolRate,
      floor: floorRate,
      jupyter: jupyter === undefined ? null : rate(jupyter.bytes, jupyter.ms),
      target: target(">= 80% of floor raw pipe", toolRate, floorRate * 0.8, "at-least")
    },
    { figure: "3 streaming", measure: `${size} in 1 KiB lines, Kernel.run`, unit: "MB/s", veyyon: rate(raw.bytes, raw.ms), floor: floorRate, jupyter: null },
    {
      figure: "3 streaming",
      measure: "host RSS growth during the cell",
      unit: "MiB",
      veyyon: mib(rssGrowth),
      floor: null,
      jupyter: jupyter === undefined ? null : mib(jupyter.clientRssGrowth),
      target: target("<= 20 MiB", mib(rssGrowth), 20, "at-most")
    }
  ]
  return {
    id: "stream",
    title: `streaming ${lines} lines of 1 KiB`,
    rows,
    details: {
      lines,
      bytes: { tool: toolBytes, raw: raw.bytes, floor: floor.bytes, jupyter: jupyter?.bytes ?? null },
      ms: { tool: toolMs, raw: raw.ms, floor: floor.ms, jupyter: jupyter?.ms ?? null },
      truncated: result.truncation !== undefined,
      hostRssGrowthBytes: rssGrowth,
      hostMemoryMiB: { settledBefore: memoryBefore, atPeak: memoryAtPeak }
    },
    notes
  }
}
