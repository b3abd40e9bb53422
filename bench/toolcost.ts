/**
 * The tool's own cost over a real kernel: the warm `x = 1 + 1` through `EvalTool.run`,
 * through `KernelRegistry.run` (the layer below the tool) and through the bare `Kernel.run`
 * of the same interpreter, rounds alternated in one process,
 * printing this process's CPU per cell (user + system) and the p50 of each round, then
 * the medians and the tool's CPU over the kernel's. `TOOLCOST_PROFILE=file.cpuprofile`
 * profiles the tool's cells alone; `TOOLCOST_SETTINGS` (JSON) adds settings, e.g.
 * `{"session":{"snapshots":"off"}}`. Measures the built package: `npm run build` first.
 * `node --import tsx bench/toolcost.ts [rounds] [cells]`
 */
import { Effect } from "effect"
import { profileCells, scratchWorkspace } from "./layerRounds.ts"
import { benchInterpreter } from "./python.ts"
import { median, quantile } from "./stats.ts"
import { KernelRegistry } from "../dist/services/registry/KernelRegistry.js"
import { makeVeyyon, rawExecute, rawKernel, runCell } from "./veyyon.ts"

const CODE = "x = 1 + 1"
const rounds = Number(process.argv[2] ?? 6)
const cells = Number(process.argv[3] ?? 2000)
const python = benchInterpreter()
if (python === undefined) throw new Error("no python3 to run the cells")
const workspace = scratchWorkspace("veyyon-toolcost-")
const veyyon = makeVeyyon(python.executable, workspace.artifactsDir, JSON.parse(process.env.TOOLCOST_SETTINGS ?? "{}"))

/** Runs `cells` cells of `once` after as many warm-up cells; CPU per cell and p50 in microseconds. */
const sample = <E, R>(once: Effect.Effect<unknown, E, R>, profile: boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < cells; i++) yield* once
    const profiler = profile ? yield* Effect.promise(() => profileCells(process.env.TOOLCOST_PROFILE)) : undefined
    const samples: Array<number> = []
    const cpu = process.cpuUsage()
    const thread = process.threadCpuUsage()
    for (let i = 0; i < cells; i++) {
      const start = performance.now()
      yield* once
      samples.push((performance.now() - start) * 1000)
    }
    const used = process.cpuUsage(cpu)
    const usedMain = process.threadCpuUsage(thread)
    if (profiler !== undefined) yield* Effect.promise(() => profiler.stop())
    return { cpu: (used.user + used.system) / cells, main: (usedMain.user + usedMain.system) / cells, p50: quantile(samples, 0.5) }
  })

try {
  const cpu: Record<"tool" | "registry" | "kernel", Array<number>> = { tool: [], registry: [], kernel: [] }
  const p50: Record<"tool" | "registry" | "kernel", Array<number>> = { tool: [], registry: [], kernel: [] }
  const registryCell = KernelRegistry.use((registry) =>
    registry.run({ language: "py", sessionId: "toolcost-registry", cwd: workspace.workDir, code: CODE, timeoutSeconds: 30 }, () => Effect.void)
  )
  const context = { sessionId: "toolcost", cwd: workspace.workDir }
  for (let round = 0; round < rounds; round++) {
    const tool = await veyyon.runPromise(sample(runCell({ code: CODE }, context), round === rounds - 1))
    const registry = await veyyon.runPromise(sample(registryCell, false))
    const kernel = await veyyon.runPromise(Effect.scoped(Effect.flatMap(
      rawKernel(python.executable, workspace.artifactsDir, workspace.workDir, "toolcost-raw"),
      (raw) => sample(rawExecute(raw, { code: CODE }), false)
    )))
    cpu.tool.push(tool.cpu)
    cpu.kernel.push(kernel.cpu)
    cpu.registry.push(registry.cpu)
    p50.registry.push(registry.p50)
    p50.tool.push(tool.p50)
    p50.kernel.push(kernel.p50)
    console.log(`round ${round}: host CPU per cell tool ${tool.cpu.toFixed(1)} us, registry ${registry.cpu.toFixed(1)} us, kernel ${kernel.cpu.toFixed(1)} us (main thread ${tool.main.toFixed(1)}, ${registry.main.toFixed(1)}, ${kernel.main.toFixed(1)}); p50 tool ${tool.p50.toFixed(0)} us, registry ${registry.p50.toFixed(0)} us, kernel ${kernel.p50.toFixed(0)} us`)
  }
  const tool = median(cpu.tool)
  const kernel = median(cpu.kernel)
  console.log(`median host CPU per cell: tool ${tool.toFixed(1)} us, registry ${median(cpu.registry).toFixed(1)} us, kernel ${kernel.toFixed(1)} us, tool / kernel ${(tool / kernel).toFixed(2)}x`)
  console.log(`median p50: tool ${median(p50.tool).toFixed(0)} us, registry ${median(p50.registry).toFixed(0)} us, kernel ${median(p50.kernel).toFixed(0)} us`)
} finally {
  await veyyon.dispose()
  workspace.cleanUp()
}
