import { KernelOutput, type CellOutcome } from "../../src/kernel/KernelOutput.ts"

/** A `Done` event; an ok cell with execution count 1 unless told otherwise. */
export const done = (outcome: Partial<CellOutcome> = {}): KernelOutput =>
  KernelOutput.Done({ status: "ok", executionCount: 1, cancelled: false, timedOut: false, killed: false, ...outcome })

/** `count` stdout lines `line 1` … `line N` in one chunk. */
export const stdoutLines = (count: number): KernelOutput =>
  KernelOutput.Stdout({ text: Array.from({ length: count }, (_, index) => `line ${index + 1}\n`).join("") })

/** A ZeroDivisionError as the runner reports it. */
export const zeroDivision: KernelOutput = KernelOutput.Error({
  ename: "ZeroDivisionError",
  evalue: "division by zero",
  traceback: ["Traceback (most recent call last):", "  File \"<cell 4>\", line 1, in <module>", "ZeroDivisionError: division by zero"]
})

/** The kernel's notice for a cell that ran out of its 30 s budget. */
export const TIMEOUT_NOTICE =
  "eval cell timed out after 30s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted."
