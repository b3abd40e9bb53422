/**
 * Recognising a cell that ran into one of its kernel's limits, and saying so: which limit,
 * its value, and the setting that raises it. A cell's error counts as a breach of
 * `limits.memoryMb` when the language reports an allocation that failed (Python
 * `MemoryError`, Ruby `NoMemoryError`, a JavaScript `RangeError` for an array buffer), and
 * of `limits.pids` when starting a process or thread failed with EAGAIN (a non-blocking
 * socket's EAGAIN is not one); a kernel death counts when V8 or Ruby reported running out
 * of memory on its stderr. Only a limit that is set can be breached.
 */
import { KernelOutput } from "../../kernel/KernelOutput.ts"
import { type KernelLimits, LIMIT_SETTINGS } from "./SandboxSettings.ts"

/** The limits a cell can run into. */
export type BreachedLimit = "memoryMb" | "pids"

/** A cell's error as the kernel reported it. */
export interface CellError {
  readonly ename: string
  readonly evalue: string
  readonly traceback: ReadonlyArray<string>
}

const MEMORY_ENAMES: ReadonlySet<string> = new Set(["MemoryError", "NoMemoryError"])
const ARRAY_BUFFER_FAILED = /Array buffer allocation failed/
const AGAIN = /Resource temporarily unavailable|EAGAIN/
const STARTING_A_PROCESS = /\bfork|_fork_exec|posix_spawn|Popen|\bspawn|\bThread\b|start_new_thread/
const NO_NEW_THREAD = /can't (start|create) (new )?thread/i
const OUT_OF_MEMORY_DEATH = /JavaScript heap out of memory|Fatal (JavaScript|process) out of memory|failed to allocate memory \(NoMemoryError\)/

/** The limit a cell's error shows it ran into, if any. */
export const breachOfError = (error: CellError, limits: KernelLimits): BreachedLimit | undefined => {
  const text = [error.ename, error.evalue, ...error.traceback].join("\n")
  if (limits.memoryMb !== undefined && (MEMORY_ENAMES.has(error.ename) || (error.ename === "RangeError" && ARRAY_BUFFER_FAILED.test(error.evalue)))) {
    return "memoryMb"
  }
  if (limits.pids !== undefined && ((AGAIN.test(text) && STARTING_A_PROCESS.test(text)) || NO_NEW_THREAD.test(text))) return "pids"
  return undefined
}

/** The limit a kernel's death shows it ran into (from its last stderr), if any. */
export const breachOfDeath = (stderr: string, limits: KernelLimits): BreachedLimit | undefined =>
  limits.memoryMb !== undefined && OUT_OF_MEMORY_DEATH.test(stderr) ? "memoryMb" : undefined

/** The sentence naming a limit, its value and its setting. */
export const limitSentence = (limit: BreachedLimit, limits: KernelLimits): string =>
  limit === "memoryMb"
    ? `the kernel reached its memory limit of ${limits.memoryMb} MiB (${LIMIT_SETTINGS.memoryMb}; raise it, or set it to off)`
    : `the kernel reached its limit of ${limits.pids} processes and threads (${LIMIT_SETTINGS.pids}; raise it, or set it to off)`

/** What happens to the kernel after a breach: kept after a failed allocation, replaced after a full process table. */
export const breachNotice = (limit: BreachedLimit, limits: KernelLimits, kernelReplaced: boolean): string =>
  `${limitSentence(limit, limits)}. ${
    kernelReplaced
      ? "The kernel was replaced: the next call starts a fresh one, and earlier state is gone."
      : "The allocation failed and the kernel lives on with its state."
  }`

/** `output` with a breach named after its message, when it is an error showing one; else `output` itself. */
export const explainBreach = (
  output: KernelOutput,
  limits: KernelLimits
): { readonly output: KernelOutput; readonly breach: BreachedLimit | undefined } => {
  if (output._tag !== "Error") return { output, breach: undefined }
  const breach = breachOfError(output, limits)
  if (breach === undefined) return { output, breach }
  const note = limitSentence(breach, limits)
  return {
    output: KernelOutput.Error({
      ename: output.ename,
      evalue: output.evalue === "" ? note : `${output.evalue} (${note})`,
      traceback: [...output.traceback, note]
    }),
    breach
  }
}
