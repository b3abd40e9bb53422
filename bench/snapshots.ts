/**
 * What session snapshots cost, through the built package (`npm run build` first):
 *
 * 1. The warm round trip (`x = 1 + 1`) with `session.snapshots` `every-cell` and `off`,
 *    rounds alternated in one run: p50 latency and this process's CPU per cell (the host's
 *    share: the request, the payload's digest check and the store write run here). Back to
 *    back, as a benchmark loop sends them, and with a 50 ms pause after each answer, as an
 *    agent's calls come (then every cell is followed by a snapshot).
 * 2. A large namespace (numpy arrays and a pandas DataFrame when the interpreter has them,
 *    else lists and dicts) of about `SNAPSHOT_BENCH_MB` (default 100): the cell's own
 *    answer beside the same cell with snapshots off (the save is off its path), how long
 *    after the answer the snapshot is on disk, and the restore: the first cell after a
 *    `kill -9` of the kernel against the first cell of a fresh session (a kernel start
 *    without a restore), in MB/s both ways.
 *
 * `node --import tsx bench/snapshots.ts [rounds] [cells]`
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EvalTool, type EvalResult } from "../dist/services/tool/EvalTool.js"
import { sessionArtifactsDir } from "../dist/services/output/ArtifactStore.js"
import { snapshotsRoot } from "../dist/services/snapshots/FileSnapshotStore.js"
import { benchInterpreter } from "./python.ts"
import { quantile } from "./stats.ts"
import { makeVeyyon } from "./veyyon.ts"

const rounds = Number(process.argv[2] ?? 4)
const cells = Number(process.argv[3] ?? 500)
const mb = Number(process.env.SNAPSHOT_BENCH_MB ?? 100)

const python = benchInterpreter()
if (python === undefined) throw new Error("no python3 to bench with")
const root = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-bench-snapshots-"))
const cwd = fs.mkdtempSync(path.join(root, "cwd-"))

const runtimes = {
  on: makeVeyyon(python.executable, path.join(root, "on"), { session: { snapshots: "every-cell" } }),
  off: makeVeyyon(python.executable, path.join(root, "off"), { session: { snapshots: "off" } })
}
type Mode = keyof typeof runtimes

const run = (mode: Mode, code: string, sessionId: string): Promise<EvalResult> =>
  runtimes[mode].runPromise(EvalTool.use((tool) => tool.run({ language: "py", code, timeout: 600 }, { sessionId, cwd })))

const cpu = () => {
  const used = process.cpuUsage()
  return used.user + used.system
}

const GAP_MS = 50

const warmRound = async (mode: Mode, gap = 0, count = cells) => {
  const samples: Array<number> = []
  let busy = 0
  for (let i = 0; i < count; i++) {
    if (gap > 0) await new Promise((resolve) => setTimeout(resolve, gap))
    const before = cpu()
    const start = performance.now()
    await run(mode, "x = 1 + 1", `warm-${mode}-${gap}`)
    samples.push((performance.now() - start) * 1000)
    busy += cpu() - before
  }
  // With a pause, the snapshot is made during the next pause: its host CPU is counted by measuring the whole pause too.
  return { p50: quantile(samples, 0.5), cpu: busy / count }
}

const pausedRound = async (mode: Mode, count: number) => {
  const before = cpu()
  const result = await warmRound(mode, GAP_MS, count)
  return { p50: result.p50, cpu: (cpu() - before) / count }
}

const metaOf = (sessionId: string) => path.join(sessionArtifactsDir(snapshotsRoot(path.join(root, "on")), sessionId), "py.meta")
const asOf = (sessionId: string): number => {
  try {
    return (JSON.parse(JSON.parse(fs.readFileSync(metaOf(sessionId), "utf8")).text) as { asOfCell: number }).asOfCell
  } catch {
    return -1
  }
}
const waitFor = async (check: () => boolean) => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5))
}

const hasNumpy = (await run("off", "import importlib.util as u; print(u.find_spec('numpy') is not None and u.find_spec('pandas') is not None)", "probe")).text.trim() === "True"
const BUILD = hasNumpy
  ? `import numpy as np, pandas as pd\nrng = np.random.default_rng(1)\narrays = [rng.random(${Math.round(mb * 0.7 * 131072 / 8)}) for _ in range(8)]\nframe = pd.DataFrame({'a': rng.random(${Math.round(mb * 0.3 * 131072 / 2)}), 'b': rng.random(${Math.round(mb * 0.3 * 131072 / 2)})})`
  : `rows = [{'i': i, 'name': 'row-%d' % i, 'values': [float(i)] * 8} for i in range(${Math.round(mb * 4000)})]`

const big = async () => {
  const answered = { off: 0, on: 0 }
  let start = performance.now()
  await run("off", BUILD, "big-off")
  answered.off = performance.now() - start
  start = performance.now()
  const result = await run("on", BUILD, "big-on")
  answered.on = performance.now() - start
  const afterAnswer = performance.now()
  await waitFor(() => asOf("big-on") >= result.executionCount)
  const savedAfter = performance.now() - afterAnswer
  const payload = fs.readdirSync(path.dirname(metaOf("big-on"))).find((name) => name.endsWith(".payload"))!
  const bytes = fs.statSync(path.join(path.dirname(metaOf("big-on")), payload)).size
  const pid = Number((await run("on", "import os; print(os.getpid())", "big-on")).text.trim())
  await waitFor(() => asOf("big-on") >= result.executionCount + 1)
  process.kill(pid, "SIGKILL")
  await new Promise((resolve) => setTimeout(resolve, 500))
  start = performance.now()
  const restored = await run("on", "len(globals())", "big-on")
  const restoreCell = performance.now() - start
  start = performance.now()
  await run("on", "len(globals())", "fresh-on")
  const freshCell = performance.now() - start
  if (!(restored.notice ?? "").includes("restored as of")) throw new Error(`no restore: ${restored.notice}`)
  return { bytes, answered, savedAfter, restoreCell, freshCell }
}

try {
  for (const mode of ["on", "off"] as const) await warmRound(mode)
  const figures: Record<Mode, Array<{ p50: number; cpu: number }>> = { on: [], off: [] }
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 === 0 ? (["on", "off"] as const) : (["off", "on"] as const)) figures[mode].push(await warmRound(mode))
  }
  const show = (mode: Mode) =>
    `${mode.padEnd(3)} p50 ${figures[mode].map((f) => f.p50.toFixed(0)).join(" / ")} us; host CPU per cell ${figures[mode].map((f) => f.cpu.toFixed(0)).join(" / ")} us`
  console.log(`warm round trip, ${rounds} alternated rounds of ${cells} cells (load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}):`)
  console.log(`  ${show("on")}\n  ${show("off")}`)
  const paused: Record<Mode, Array<{ p50: number; cpu: number }>> = { on: [], off: [] }
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 === 0 ? (["on", "off"] as const) : (["off", "on"] as const)) paused[mode].push(await pausedRound(mode, Math.ceil(cells / 5)))
  }
  const showPaused = (mode: Mode) =>
    `${mode.padEnd(3)} p50 ${paused[mode].map((f) => f.p50.toFixed(0)).join(" / ")} us; host CPU per cell and its pause ${paused[mode].map((f) => f.cpu.toFixed(0)).join(" / ")} us`
  console.log(`with a ${GAP_MS} ms pause after each answer, ${rounds} alternated rounds of ${Math.ceil(cells / 5)} cells:`)
  console.log(`  ${showPaused("on")}\n  ${showPaused("off")}`)
  const large = await big()
  const mbOf = (bytes: number) => bytes / 1024 / 1024
  const restoreMs = large.restoreCell - large.freshCell
  console.log(`${hasNumpy ? "numpy + pandas" : "lists and dicts"} namespace, snapshot ${mbOf(large.bytes).toFixed(1)} MiB:`)
  console.log(`  the cell's answer: ${large.answered.on.toFixed(0)} ms with snapshots, ${large.answered.off.toFixed(0)} ms without`)
  console.log(`  saved ${large.savedAfter.toFixed(0)} ms after the answer (${(mbOf(large.bytes) / (large.savedAfter / 1000)).toFixed(0)} MiB/s)`)
  console.log(`  restored: first cell after kill -9 ${large.restoreCell.toFixed(0)} ms, a fresh session's first cell ${large.freshCell.toFixed(0)} ms, so ${restoreMs.toFixed(0)} ms for the restore (${(mbOf(large.bytes) / (restoreMs / 1000)).toFixed(0)} MiB/s)`)
} finally {
  await runtimes.on.dispose()
  await runtimes.off.dispose()
  fs.rmSync(root, { recursive: true, force: true })
}
