/**
 * The execution renderers' shared limits and the per-line column clamp, used by the
 * Python execution views and meant for any other execution block (a bash block, say).
 *
 * Widths are terminal columns: escape sequences count 0, East Asian wide/fullwidth
 * characters and emoji count 2, and a grapheme cluster is never split.
 */
import stringWidth from "string-width"
import { applyEscape, closeStyle, PLAIN_STYLE, tokenizeAnsi, type AnsiToken, type OpenStyle } from "./Ansi.ts"

/** Lines an interactive execution view shows while collapsed. */
export const EXECUTION_PREVIEW_LINES = 20
/** The widest an execution output line may be shown, in terminal columns. */
export const EXECUTION_MAX_DISPLAY_COLUMNS = 4000
/** Lines an execution view keeps while a cell is still streaming. */
export const EXECUTION_STREAMING_LINE_CAP = 100
/** Lines a tool-call block shows while collapsed. */
export const TOOL_PREVIEW_LINES = 10

const PRINTABLE_ASCII = /^[\u0020-\u007e]*$/
const graphemes = new Intl.Segmenter(undefined, { granularity: "grapheme" })

/** Terminal columns of a run of text that holds no escape sequence. */
const textColumns = (text: string): number => stringWidth(text, { countAnsiEscapeCodes: true })

const tokenColumns = (token: AnsiToken): number => (token.kind === "text" ? textColumns(token.text) : 0)

/** The terminal columns `text` occupies; escape sequences count 0. */
export const displayColumns = (text: string): number => {
  if (PRINTABLE_ASCII.test(text)) return text.length
  let columns = 0
  for (const token of tokenizeAnsi(text)) columns += tokenColumns(token)
  return columns
}

/** The suffix that ends a clamped line. */
export const omittedSuffix = (omittedColumns: number): string => `… [${omittedColumns} visible columns omitted]`

interface Prefix {
  readonly text: string
  readonly columns: number
  readonly style: OpenStyle
}

/** The longest prefix within `budget` columns; stray introducers are left out. */
const prefixWithin = (tokens: ReadonlyArray<AnsiToken>, budget: number): Prefix => {
  let text = ""
  let columns = 0
  let style = PLAIN_STYLE
  for (const token of tokens) {
    if (token.kind === "stray") continue
    if (token.kind === "escape") {
      text += token.text
      style = applyEscape(style, token.text)
      continue
    }
    if (PRINTABLE_ASCII.test(token.text)) {
      const room = budget - columns
      if (token.text.length >= room) return { text: text + token.text.slice(0, room), columns: budget, style }
      text += token.text
      columns += token.text.length
      continue
    }
    for (const { segment } of graphemes.segment(token.text)) {
      const width = textColumns(segment)
      if (columns + width > budget) return { text, columns, style }
      text += segment
      columns += width
    }
  }
  return { text, columns, style }
}

const digitCount = (n: number): number => String(n).length

/**
 * Clamps one line to `maxColumns` terminal columns. A line within the limit comes back
 * unchanged. A longer line is cut at a grapheme boundary (never inside an escape
 * sequence), open styling is closed, and `… [N visible columns omitted]` is appended so
 * that the whole result fits; N is exactly the columns left out. When the limit is too
 * small for that suffix, the line is cut to `maxColumns - 1` columns and ends with `…`.
 */
export const clampLine = (line: string, maxColumns: number = EXECUTION_MAX_DISPLAY_COLUMNS): string => {
  const limit = Math.max(0, Math.floor(maxColumns))
  if (PRINTABLE_ASCII.test(line) && line.length <= limit) return line
  const tokens = tokenizeAnsi(line)
  let total = 0
  for (const token of tokens) total += tokenColumns(token)
  if (total <= limit) return line

  const cutWithSuffixDigits = (digits: number) => {
    const budget = limit - displayColumns(omittedSuffix(10 ** (digits - 1)))
    if (budget < 0) return undefined
    const prefix = prefixWithin(tokens, budget)
    return { prefix, omitted: total - prefix.columns }
  }

  const first = cutWithSuffixDigits(digitCount(total))
  if (first === undefined) {
    if (limit === 0) return ""
    const prefix = prefixWithin(tokens, limit - 1)
    return prefix.text + closeStyle(prefix.style) + "…"
  }
  const tighter =
    digitCount(first.omitted) < digitCount(total) ? cutWithSuffixDigits(digitCount(first.omitted)) : undefined
  const { prefix, omitted } = tighter ?? first
  return prefix.text + closeStyle(prefix.style) + omittedSuffix(omitted)
}
