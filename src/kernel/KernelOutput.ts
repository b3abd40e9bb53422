/**
 * What one executed cell produces, in order, ending with exactly one `Done`.
 */
import { Data } from "effect"
import type { MimeBundle } from "./Frame.ts"

/** How a cell ended. */
export interface CellOutcome {
  readonly status: "ok" | "error"
  readonly executionCount: number
  /** The cell was stopped by SIGINT (timeout, cancel) rather than finishing by itself. */
  readonly cancelled: boolean
  /** The watchdog's budget ran out. */
  readonly timedOut: boolean
  /** The kernel did not stop after SIGINT and was killed; the next call gets a fresh kernel. */
  readonly killed: boolean
  /** A sentence for the caller when the cell did not end normally. */
  readonly notice?: string
  /** The kernel died during the cell and the cell ran again in a fresh one (its side effects may have happened twice). */
  readonly retried?: boolean
  /** How the kernel ended when it died during the cell's last attempt (the cell then has no result of its own). */
  readonly kernelExit?: { readonly code: number | null; readonly signal: string | null }
}

/** One event of a running cell. */
export type KernelOutput = Data.TaggedEnum<{
  Stdout: { readonly text: string }
  Stderr: { readonly text: string }
  Display: { readonly bundle: MimeBundle }
  Result: { readonly bundle: MimeBundle }
  Status: { readonly op: string; readonly fields: Readonly<Record<string, unknown>> }
  Error: { readonly ename: string; readonly evalue: string; readonly traceback: ReadonlyArray<string> }
  Done: CellOutcome
}>
/** Constructors and matchers of `KernelOutput`. */
export const KernelOutput = Data.taggedEnum<KernelOutput>()
