/**
 * Runs one figure of `jupyter_driver.py` and returns what it measured. The driver and
 * any kernel it leaves behind are killed when it ends, whatever the outcome.
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { hasJupyter, jupyterSkipReason, type BenchContext } from "./context.ts"
import { killAll, withEnvironment } from "./procs.ts"

const DRIVER = fileURLToPath(new URL("./jupyter_driver.py", import.meta.url))

/** The environment variable every process a bench run starts carries, so leftovers can be found. */
export const RUN_MARKER_VARIABLE = "VEYYON_BENCH_RUN"

/** Runs `figure` with `params` in the Jupyter driver; rejects with its stderr tail on failure. */
export const runJupyter = <A>(context: BenchContext, figure: string, params: unknown, timeoutMs = 240_000): Promise<A> => {
  if (!hasJupyter(context)) return Promise.reject(new Error(jupyterSkipReason(context)))
  const child = spawn(context.jupyter.executable, [DRIVER, figure, JSON.stringify(params)], {
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, JUPYTER_RUNTIME_DIR: context.jupyterRuntimeDir, PYDEVD_DISABLE_FILE_VALIDATION: "1" }
  })
  let stdout = ""
  let stderr = ""
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr = (stderr + chunk).slice(-4000)))
  const timer = setTimeout(() => killAll([child.pid!]), timeoutMs)
  return new Promise<A>((resolve, reject) => {
    child.once("error", reject)
    child.once("exit", (code, signal) => {
      clearTimeout(timer)
      const line = stdout.split("\n").find((l) => l.startsWith("RESULT "))
      if (code === 0 && line !== undefined) resolve(JSON.parse(line.slice("RESULT ".length)) as A)
      else reject(new Error(`jupyter driver ${figure} ended with ${signal ?? `code ${code}`}: ${stderr.trim().split("\n").slice(-5).join(" | ")}`))
    })
  }).finally(() => {
    const marker = `${RUN_MARKER_VARIABLE}=${process.env[RUN_MARKER_VARIABLE] ?? ""}`
    killAll(withEnvironment(marker).filter((pid) => pid !== process.pid && isJupyterKernel(pid)))
  })
}

/** Runs a Jupyter figure when Jupyter is available; on a skip or a failure, notes why and gives undefined. */
export const tryJupyter = async <A>(
  context: BenchContext,
  notes: Array<string>,
  figure: string,
  params: unknown,
  timeoutMs?: number
): Promise<A | undefined> => {
  if (!hasJupyter(context)) {
    notes.push(`Jupyter skipped: ${jupyterSkipReason(context)}`)
    return undefined
  }
  try {
    return await runJupyter<A>(context, figure, params, timeoutMs)
  } catch (error) {
    notes.push(`Jupyter column missing: ${error instanceof Error ? error.message : String(error)}`)
    return undefined
  }
}

const isJupyterKernel = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("ipykernel")
  } catch {
    return false
  }
}
