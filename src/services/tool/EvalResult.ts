/**
 * A finished cell as the tool answers it, and whether it counts as a success.
 */
import type { ImagePayload } from "../../render/Mime.ts"
import type { SinkOutput, Truncation } from "../output/OutputSink.ts"
import type { EvalLanguage } from "../config/Settings.ts"

/** What one call returns. */
export interface EvalResult {
  readonly language: EvalLanguage
  readonly title?: string
  readonly status: "ok" | "error"
  readonly cancelled: boolean
  readonly timedOut: boolean
  readonly killed: boolean
  readonly executionCount: number
  /** The retained outputs in order (text bounded, with omission markers). */
  readonly outputs: ReadonlyArray<SinkOutput>
  /** The rendered text an agent reads, notices included. */
  readonly text: string
  /** PNG and JPEG images the cell displayed. */
  readonly images: ReadonlyArray<ImagePayload>
  /** The cell's exception, when it raised one. */
  readonly error?: { readonly ename: string; readonly evalue: string; readonly traceback: ReadonlyArray<string> }
  /** Present when the text was cut; the full text is in the artifact. */
  readonly truncation?: Truncation
  readonly artifactIds: ReadonlyArray<string>
  /** Why the cell did not end normally (timeout, kill, a kernel death and retry), when it did not. */
  readonly notice?: string
  /** Present when the kernel died during the cell and the cell ran again: side effects may have happened twice. */
  readonly retried?: true
  /** How the kernel ended when it died during the cell's last attempt too (the `error` is then `KernelDied`). */
  readonly kernelExit?: { readonly code: number | null; readonly signal: string | null }
  readonly durationMs: number
}

/** Whether a finished cell counts as a success: it ended normally, without an error, a cancel, a timeout or a kill. */
export const cellSucceeded = (result: EvalResult): boolean =>
  result.status === "ok" && !result.cancelled && !result.timedOut && !result.killed
