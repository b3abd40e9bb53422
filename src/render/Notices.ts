/**
 * The short lines renderers add about a cell rather than from it: its status
 * (`✓ ok [3]`, `✗ error [4]`, `⏹ cancelled`, `⏱ timed out after 30s`,
 * `☠ kernel killed`, `⋯ running`), the notice for a cell that did not end normally,
 * its error summary, and the truncation notice
 * `… output truncated: N lines / M bytes omitted; full output: artifact://…`.
 */
import { Buffer } from "node:buffer"
import stripAnsi from "strip-ansi"
import type { CellOutcome } from "../kernel/KernelOutput.ts"
import type { RenderableOutput } from "./OutputText.ts"
import { makeStyle, type Style } from "./Style.ts"
import { splitLines } from "./TextLines.ts"

/** What the output sink reports when it kept only part of a cell's output. */
export interface TruncationInfo {
  readonly totalBytes: number
  readonly totalLines: number
  readonly shownBytes?: number
  readonly shownLines?: number
  readonly artifactUri?: string
  /** Why the full output could not be saved, when it could not. */
  readonly artifactError?: string
}

/** The size of the output actually shown, used where `TruncationInfo` leaves it out. */
export interface ShownSize {
  readonly bytes: number
  readonly lines: number
}

/** The size of shown output text, escape sequences not counted. */
export const measureShown = (text: string): ShownSize => {
  const plain = stripAnsi(text)
  return { bytes: Buffer.byteLength(plain, "utf8"), lines: splitLines(plain).length }
}

/** The outcome of the cell's `Done` event, or `undefined` while it still runs. */
export const cellOutcome = (outputs: ReadonlyArray<RenderableOutput>): CellOutcome | undefined => {
  for (let index = outputs.length - 1; index >= 0; index--) {
    const output = outputs[index]!
    if (output._tag === "Done") return output
  }
  return undefined
}

const TIMEOUT_SECONDS = /timed out after (\d+(?:\.\d+)?)s/

/** The one-line status of a cell, coloured by `style`. */
export const cellStatusLabel = (
  outcome: CellOutcome | undefined,
  options: { readonly timeoutSeconds?: number; readonly style?: Style } = {}
): string => {
  const style = options.style ?? makeStyle(false)
  if (outcome === undefined) return style.dim("⋯ running")
  if (outcome.killed) return style.red("☠ kernel killed")
  if (outcome.timedOut) {
    const seconds = options.timeoutSeconds ?? TIMEOUT_SECONDS.exec(outcome.notice ?? "")?.[1]
    return style.yellow(seconds === undefined ? "⏱ timed out" : `⏱ timed out after ${seconds}s`)
  }
  if (outcome.cancelled) return style.yellow("⏹ cancelled")
  const count = outcome.executionCount > 0 ? ` [${outcome.executionCount}]` : ""
  return outcome.status === "error" ? style.red(`✗ error${count}`) : style.green(`✓ ok${count}`)
}

/** The sentence for a cell that was cancelled, timed out or killed; `undefined` otherwise. */
export const outcomeNotice = (outcome: CellOutcome | undefined): string | undefined => {
  if (outcome === undefined) return undefined
  if (outcome.notice !== undefined) return outcome.notice
  if (outcome.killed) return "the kernel was killed; the next call starts a fresh kernel and earlier state is gone."
  if (outcome.cancelled) return "eval cell was cancelled; kernel interrupted but remains running."
  return undefined
}

/** `Ename: evalue` of the last error the cell raised, if any. */
export const errorSummary = (outputs: ReadonlyArray<RenderableOutput>): string | undefined => {
  for (let index = outputs.length - 1; index >= 0; index--) {
    const output = outputs[index]!
    if (output._tag === "Error") return output.evalue.length > 0 ? `${output.ename}: ${output.evalue}` : output.ename
  }
  return undefined
}

/** The truncation notice; sizes the sink did not report are taken from what is shown. */
export const truncationNotice = (info: TruncationInfo, shown: ShownSize): string => {
  const lines = Math.max(0, info.totalLines - (info.shownLines ?? shown.lines))
  const bytes = Math.max(0, info.totalBytes - (info.shownBytes ?? shown.bytes))
  const where = info.artifactError !== undefined
    ? `; the full output could not be saved: ${info.artifactError}`
    : info.artifactUri !== undefined && info.artifactUri.length > 0
    ? `; full output: ${info.artifactUri}`
    : ""
  return `… output truncated: ${lines} ${lines === 1 ? "line" : "lines"} / ${bytes} ${bytes === 1 ? "byte" : "bytes"} omitted${where}`
}
