/**
 * What the scripts that run one figure's cell through each layer in alternated rounds
 * share (`streamparts.ts`, `richparts.ts`): a scratch workspace whose processes and files
 * go with it, this process's CPU per cell, an optional profile of the cells alone, and the
 * per-round and median lines they print.
 */
import { Session } from "node:inspector/promises"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { RUN_MARKER_VARIABLE } from "./jupyter.ts"
import { killAll, withEnvironment } from "./procs.ts"
import { median } from "./stats.ts"

/** A private scratch directory with a work and an artifacts directory in it; `cleanUp` kills what it started and removes it. */
export interface ScratchWorkspace {
  readonly workDir: string
  readonly artifactsDir: string
  readonly cleanUp: () => void
}

/** Makes the scratch workspace and marks this run's processes with its name. */
export const scratchWorkspace = (prefix: string): ScratchWorkspace => {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  process.env[RUN_MARKER_VARIABLE] = path.basename(scratch)
  const workDir = path.join(scratch, "work")
  const artifactsDir = path.join(scratch, "artifacts")
  fs.mkdirSync(workDir)
  fs.mkdirSync(artifactsDir)
  return {
    workDir,
    artifactsDir,
    cleanUp: () => {
      killAll(withEnvironment(`${RUN_MARKER_VARIABLE}=${path.basename(scratch)}`))
      fs.rmSync(scratch, { recursive: true, force: true })
    }
  }
}

/** This process's CPU (user + system) in milliseconds since `start`. */
export const cpuMsSince = (start: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(start)
  return (used.user + used.system) / 1000
}

/** Starts profiling when `file` is given; `stop` writes the profile there (nothing to do without one). */
export const profileCells = async (file: string | undefined): Promise<{ readonly stop: () => Promise<void> }> => {
  if (file === undefined) return { stop: async () => {} }
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.start")
  return {
    stop: async () => {
      const { profile } = await session.post("Profiler.stop")
      fs.writeFileSync(file, JSON.stringify(profile))
    }
  }
}

/** Samples by layer. */
export type LayerSamples = Record<string, Array<number>>

const taken = (samples: LayerSamples) => Object.entries(samples).filter(([, values]) => values.length > 0)

/** One round's line: each layer's last rate, then its host CPU. */
export const roundLine = (round: number, rates: LayerSamples, cpu: LayerSamples): string =>
  `round ${round}: ` + taken(rates).map(([layer, values]) => `${layer} ${values.at(-1)!.toFixed(1)}`).join("  ") +
  "  host CPU ms: " + taken(cpu).map(([layer, values]) => `${layer} ${values.at(-1)!.toFixed(0)}`).join("  ")

/** The closing lines: each layer's median rate (its ratio to `base`'s median, its range) and median host CPU. */
export const medianLines = (rates: LayerSamples, cpu: LayerSamples, base: string, baseName: string): ReadonlyArray<string> => {
  const baseMedian = (rates[base] ?? []).length > 0 ? median(rates[base]!) : Number.NaN
  return [
    `median MB/s (ratio to ${baseName}'s median): ` + taken(rates).map(([layer, values]) =>
      `${layer} ${median(values).toFixed(1)} (${(median(values) / baseMedian).toFixed(2)}) [${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)}]`
    ).join("  "),
    "median host CPU ms per cell: " + taken(cpu).map(([layer, values]) => `${layer} ${median(values).toFixed(0)}`).join("  ")
  ]
}
