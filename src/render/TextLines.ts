/**
 * Turning captured output into display lines the way a terminal would show them:
 * `\n` and `\r\n` end lines, a lone `\r` returns to the start of the line so what
 * follows overwrites it (progress bars), and tabs advance to the next tab stop.
 */
import stringWidth from "string-width"
import { tokenizeAnsi } from "./Ansi.ts"

/** Splits text into lines; a trailing newline does not start an extra empty line. */
export const splitLines = (text: string): Array<string> => {
  if (text.length === 0) return []
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  return lines
}

/**
 * What is left of a line after carriage returns: the last non-empty stretch between
 * `\r`s (a progress bar's final state; a trailing `\r` before `\n` changes nothing).
 */
export const collapseCarriageReturns = (line: string): string => {
  if (!line.includes("\r")) return line
  const stretches = line.split("\r")
  for (let index = stretches.length - 1; index >= 0; index--) {
    if (stretches[index]!.length > 0) return stretches[index]!
  }
  return ""
}

/** Replaces tabs with spaces up to the next multiple of `tabSize` columns. */
export const expandTabs = (line: string, tabSize: number = 8): string => {
  if (!line.includes("\t")) return line
  let column = 0
  let result = ""
  for (const token of tokenizeAnsi(line)) {
    if (token.kind !== "text") {
      result += token.text
      continue
    }
    const pieces = token.text.split("\t")
    for (let index = 0; index < pieces.length; index++) {
      if (index > 0) {
        const spaces = tabSize - (column % tabSize)
        result += " ".repeat(spaces)
        column += spaces
      }
      result += pieces[index]!
      column += stringWidth(pieces[index]!, { countAnsiEscapeCodes: true })
    }
  }
  return result
}

/** One captured line as a terminal shows it: carriage returns applied, tabs expanded. */
export const displayLine = (line: string): string => expandTabs(collapseCarriageReturns(line))

/** Captured text as the terminal lines it shows. */
export const displayLines = (text: string): Array<string> => splitLines(text).map(displayLine)
