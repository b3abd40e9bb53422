/**
 * The terminal view of a user-triggered execution: the output as a collapsed preview of
 * the last `EXECUTION_PREVIEW_LINES` lines (or all of it, expanded), every line clamped
 * to `EXECUTION_MAX_DISPLAY_COLUMNS` columns, at most `EXECUTION_STREAMING_LINE_CAP`
 * lines kept while streaming, then notices: the error, a cancellation, timeout or kill,
 * and truncation by the output sink.
 *
 * Streaming is a fold: `startExecution`, `pushExecutionOutput` per event, and
 * `finishExecution` with the full retained output once the cell is done; any state
 * renders with `renderExecutionView`. `renderExecution` draws a finished cell directly.
 */
import type { CellOutcome } from "../kernel/KernelOutput.ts"
import {
  clampLine,
  EXECUTION_MAX_DISPLAY_COLUMNS,
  EXECUTION_PREVIEW_LINES,
  EXECUTION_STREAMING_LINE_CAP
} from "./Columns.ts"
import {
  cellOutcome,
  errorSummary,
  measureShown,
  outcomeNotice,
  truncationNotice,
  type TruncationInfo
} from "./Notices.ts"
import { appendOutput, outputsText, type RenderableOutput } from "./OutputText.ts"
import { finishStreaming, heldLines, makeStreamingView, pushChunk, renderStreamingView, type StreamingView } from "./StreamingView.ts"
import { makeStyle } from "./Style.ts"

/** One execution as the interactive view holds it. */
export interface ExecutionView {
  readonly view: StreamingView
  /** Whether the kernel's colours are kept and ours added. */
  readonly color: boolean
  /** Whether the last streamed text ended at a line start. */
  readonly atLineStart: boolean
  readonly outcome: CellOutcome | undefined
  readonly error: string | undefined
}

/** Options fixed for the whole execution. */
export interface ExecutionViewOptions {
  readonly color?: boolean
  readonly lineCap?: number
}

/** How an execution is drawn. */
export interface ExecutionRenderOptions {
  readonly expanded?: boolean
  readonly previewLines?: number
  readonly maxColumns?: number
  readonly truncation?: TruncationInfo
}

/** A view for a cell that is starting. */
export const startExecution = (options: ExecutionViewOptions = {}): ExecutionView => ({
  view: makeStreamingView(options.lineCap ?? EXECUTION_STREAMING_LINE_CAP),
  color: options.color ?? true,
  atLineStart: true,
  outcome: undefined,
  error: undefined
})

/** Adds one event as it streams in. */
export const pushExecutionOutput = (execution: ExecutionView, output: RenderableOutput): ExecutionView => {
  if (output._tag === "Done") return { ...execution, outcome: output }
  const after = appendOutput({ text: "", atLineStart: execution.atLineStart }, output, { color: execution.color })
  const error = output._tag === "Error" ? errorSummary([output]) : execution.error
  return { ...execution, view: pushChunk(execution.view, after.text), atLineStart: after.atLineStart, error }
}

/** Replaces what streaming kept with the cell's full retained output. */
export const finishExecution = (execution: ExecutionView, outputs: ReadonlyArray<RenderableOutput>): ExecutionView => ({
  ...execution,
  view: finishStreaming(execution.view, outputsText(outputs, { color: execution.color })),
  atLineStart: true,
  outcome: cellOutcome(outputs) ?? execution.outcome,
  error: errorSummary(outputs) ?? execution.error
})

/** The execution as terminal lines: output, then notices. */
export const renderExecutionView = (
  execution: ExecutionView,
  options: ExecutionRenderOptions = {}
): ReadonlyArray<string> => {
  const style = makeStyle(execution.color)
  const maxColumns = options.maxColumns ?? EXECUTION_MAX_DISPLAY_COLUMNS
  const body = renderStreamingView(execution.view, {
    expanded: options.expanded ?? false,
    previewLines: options.previewLines ?? EXECUTION_PREVIEW_LINES,
    maxColumns,
    color: execution.color
  })
  const outcome = execution.outcome
  const stopped = outcome !== undefined && (outcome.cancelled || outcome.timedOut || outcome.killed)
  const errorLine = execution.error !== undefined && !stopped ? [style.red(`✗ ${execution.error}`)] : []
  const notice = outcomeNotice(outcome)
  const symbol = outcome?.killed === true ? "☠" : outcome?.timedOut === true ? "⏱" : "⏹"
  const noticeLine = notice === undefined ? [] : [style.yellow(`${symbol} ${notice}`)]
  const truncation = options.truncation === undefined
    ? []
    : [style.dim(truncationNotice(options.truncation, measureShown(heldLines(execution.view).join("\n"))))]
  return [...body, ...[...errorLine, ...noticeLine, ...truncation].map((line) => clampLine(line, maxColumns))]
}

/** A finished cell's terminal lines, straight from its events. */
export const renderExecution = (
  outputs: ReadonlyArray<RenderableOutput>,
  options: ExecutionRenderOptions & ExecutionViewOptions = {}
): ReadonlyArray<string> =>
  renderExecutionView(finishExecution(startExecution(options), outputs), options)
