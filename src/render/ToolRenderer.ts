/**
 * The eval tool call as a code-cell block, and the plain text an agent reads back.
 *
 * Block layout (collapsed):
 * ```
 * ▸ <title, or the first code line>
 *   … N more lines (ctrl+o to expand)
 *   <last TOOL_PREVIEW_LINES output lines>
 *   <notices: timeout/cancel/kill, truncation>
 * ✓ ok [3]
 * ```
 * Expanded, the code follows the header (each line after `  │ `) and every retained
 * output line is shown.
 */
import { clampLine, displayColumns, EXECUTION_MAX_DISPLAY_COLUMNS, TOOL_PREVIEW_LINES } from "./Columns.ts"
import {
  cellOutcome,
  cellStatusLabel,
  measureShown,
  outcomeNotice,
  truncationNotice,
  type TruncationInfo
} from "./Notices.ts"
import { outputsText, type RenderableOutput } from "./OutputText.ts"
import { finishStreaming, makeStreamingView, renderStreamingView } from "./StreamingView.ts"
import { makeStyle } from "./Style.ts"
import { collapseCarriageReturns, displayLine, splitLines } from "./TextLines.ts"

/** One eval call as the tool renderer sees it. */
export interface ToolCell {
  readonly code: string
  readonly title?: string
  /** The events retained in the tool result; without a `Done` the cell shows as running. */
  readonly outputs: ReadonlyArray<RenderableOutput>
  readonly truncation?: TruncationInfo
  /** The cell's timeout budget, for the `⏱ timed out after Ns` status. */
  readonly timeoutSeconds?: number
}

/** How the block is drawn. */
export interface ToolRenderOptions {
  readonly expanded?: boolean
  readonly color?: boolean
  readonly previewLines?: number
  readonly maxColumns?: number
}

const OUTPUT_INDENT = "  "
const CODE_GUTTER = "  │ "

/** The block's header text: the title's first line, else the first non-blank code line. */
export const cellHeading = (code: string, title?: string): string => {
  const titled = title?.split("\n").map((line) => line.trim()).find((line) => line.length > 0)
  if (titled !== undefined) return titled
  return code.split("\n").map((line) => line.trim()).find((line) => line.length > 0) ?? "(empty cell)"
}

/** The code-cell block as terminal lines. */
export const renderToolCell = (cell: ToolCell, options: ToolRenderOptions = {}): ReadonlyArray<string> => {
  const color = options.color ?? true
  const style = makeStyle(color)
  const expanded = options.expanded ?? false
  const maxColumns = options.maxColumns ?? EXECUTION_MAX_DISPLAY_COLUMNS
  const codeColumns = Math.max(0, maxColumns - displayColumns(CODE_GUTTER))
  const outputColumns = Math.max(0, maxColumns - displayColumns(OUTPUT_INDENT))
  const outcome = cellOutcome(cell.outputs)
  const header = clampLine(`▸ ${style.bold(cellHeading(cell.code, cell.title))}`, maxColumns)
  const code = expanded
    ? splitLines(cell.code).map((line) => style.dim(CODE_GUTTER) + clampLine(displayLine(line), codeColumns))
    : []
  const text = outputsText(cell.outputs, { color })
  const body = renderStreamingView(finishStreaming(makeStreamingView(), text), {
    expanded,
    previewLines: options.previewLines ?? TOOL_PREVIEW_LINES,
    maxColumns: outputColumns,
    color
  })
  const notice = outcomeNotice(outcome)
  const notes = [
    ...(notice === undefined ? [] : [style.yellow(notice)]),
    ...(cell.truncation === undefined
      ? []
      : [style.dim(truncationNotice(cell.truncation, measureShown(text)))])
  ]
  const status = cellStatusLabel(outcome, {
    style,
    ...(cell.timeoutSeconds === undefined ? {} : { timeoutSeconds: cell.timeoutSeconds })
  })
  return [
    header,
    ...code,
    ...[...body, ...notes.map((note) => clampLine(note, outputColumns))].map((line) => OUTPUT_INDENT + line),
    status
  ]
}

/** Options for the agent-facing text. */
export interface OutputsAsTextOptions {
  readonly truncation?: TruncationInfo
}

/**
 * The plain text the eval tool returns to the agent: stream text, rendered displays and
 * results, status lines and tracebacks, in order, with escape sequences stripped,
 * carriage-return overwrites applied and trailing whitespace trimmed; then the notice
 * of a cancelled, timed-out or killed cell and the truncation notice. Empty when the
 * cell printed nothing and ended normally.
 */
export const renderOutputsAsText = (outputs: ReadonlyArray<RenderableOutput>, options: OutputsAsTextOptions = {}): string => {
  const text = outputsText(outputs, { color: false })
  const lines = splitLines(text).map((line) => collapseCarriageReturns(line).trimEnd())
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop()
  const body = lines.join("\n")
  const notice = outcomeNotice(cellOutcome(outputs))
  const truncation = options.truncation === undefined
    ? undefined
    : truncationNotice(options.truncation, measureShown(text))
  return [body, notice, truncation].filter((part): part is string => part !== undefined && part.length > 0).join("\n")
}
