/**
 * The lines an execution view holds. While a cell streams, text arrives in chunks that
 * may split lines anywhere; at most a cap of lines is kept and the oldest are dropped
 * (counted, for the footer `… N earlier lines dropped while streaming`). When the cell
 * finishes, its full output replaces what streaming kept and the dropped count is gone.
 *
 * Rendering shows the last lines (a collapsed preview, with the hint
 * `… N more lines (ctrl+o to expand)` above them) or all kept lines (expanded), each
 * clamped to a column limit. Expanding reveals hidden lines; it cannot bring back
 * dropped ones, so the two notes stay separate.
 */
import {
  clampLine,
  EXECUTION_MAX_DISPLAY_COLUMNS,
  EXECUTION_PREVIEW_LINES,
  EXECUTION_STREAMING_LINE_CAP
} from "./Columns.ts"
import { makeStyle } from "./Style.ts"
import { collapseCarriageReturns, displayLine, splitLines } from "./TextLines.ts"

/** The held lines of one execution. */
export interface StreamingView {
  /** Complete lines kept, oldest first, carriage returns already applied. */
  readonly lines: ReadonlyArray<string>
  /** The line still being written (no newline yet). */
  readonly partial: string
  /** Complete lines dropped while streaming. */
  readonly dropped: number
  /** Whether the cell is still streaming (the cap applies and dropped lines are reported). */
  readonly streaming: boolean
  /** Most lines kept while streaming, the partial line included. */
  readonly lineCap: number
}

/** An empty view for a cell that starts streaming. */
export const makeStreamingView = (lineCap: number = EXECUTION_STREAMING_LINE_CAP): StreamingView => ({
  lines: [],
  partial: "",
  dropped: 0,
  streaming: true,
  lineCap: Math.max(1, Math.floor(lineCap))
})

/** Keeps only what still matters of an unfinished line: text a later `\r` overwrote is gone. */
const trimOverwritten = (partial: string): string => {
  if (!partial.includes("\r")) return partial
  const visible = collapseCarriageReturns(partial)
  return partial.endsWith("\r") ? visible + "\r" : visible
}

/** Appends a chunk of streamed text; past the cap, the oldest complete lines are dropped. */
export const pushChunk = (view: StreamingView, chunk: string): StreamingView => {
  if (!view.streaming || chunk.length === 0) return view
  const pieces = (view.partial + chunk).split("\n")
  const partial = trimOverwritten(pieces.pop()!)
  const room = view.lineCap - (partial.length > 0 ? 1 : 0)
  const arrived = pieces.length > room ? pieces.slice(pieces.length - room) : pieces
  const combined = view.lines.length + arrived.length > room
    ? [...view.lines.slice(Math.max(0, view.lines.length + arrived.length - room)), ...arrived.map(collapseCarriageReturns)]
    : [...view.lines, ...arrived.map(collapseCarriageReturns)]
  const dropped = view.dropped + view.lines.length + pieces.length - combined.length
  return { ...view, lines: combined, partial, dropped }
}

/** The view of a finished cell: its full output, nothing dropped. */
export const finishStreaming = (view: StreamingView, fullOutput: string): StreamingView => ({
  ...view,
  lines: splitLines(fullOutput).map(collapseCarriageReturns),
  partial: "",
  dropped: 0,
  streaming: false
})

/** Every line the view currently holds, the unfinished one included. */
export const heldLines = (view: StreamingView): ReadonlyArray<string> =>
  view.partial.length > 0 ? [...view.lines, collapseCarriageReturns(view.partial)] : view.lines

/** How a view is drawn. */
export interface StreamingViewRenderOptions {
  /** Show every held line instead of the collapsed preview. */
  readonly expanded?: boolean
  /** Lines of the collapsed preview. */
  readonly previewLines?: number
  /** Column limit per line. */
  readonly maxColumns?: number
  /** Dim the notes with ANSI codes. */
  readonly color?: boolean
}

const count = (n: number, singular: string, plural: string): string => `${n} ${n === 1 ? singular : plural}`

/** The hint above a collapsed preview. */
export const moreLinesHint = (hidden: number): string => `… ${count(hidden, "more line", "more lines")} (ctrl+o to expand)`

/** The footer of a streaming view that dropped lines. */
export const droppedLinesNote = (dropped: number): string =>
  `… ${count(dropped, "earlier line", "earlier lines")} dropped while streaming`

/** The view as display lines: the hint if lines are hidden, the shown lines, the dropped note if any. */
export const renderStreamingView = (
  view: StreamingView,
  options: StreamingViewRenderOptions = {}
): ReadonlyArray<string> => {
  const style = makeStyle(options.color ?? false)
  const maxColumns = options.maxColumns ?? EXECUTION_MAX_DISPLAY_COLUMNS
  const previewLines = Math.max(0, Math.floor(options.previewLines ?? EXECUTION_PREVIEW_LINES))
  const held = heldLines(view)
  const hidden = options.expanded === true ? 0 : Math.max(0, held.length - previewLines)
  const shown = held.slice(hidden).map((line) => clampLine(displayLine(line), maxColumns))
  const hint = hidden > 0 ? [style.dim(moreLinesHint(hidden))] : []
  const footer = view.streaming && view.dropped > 0 ? [style.dim(droppedLinesNote(view.dropped))] : []
  return [...hint, ...shown, ...footer]
}
