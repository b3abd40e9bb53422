/**
 * When the REPL has a whole cell: a cheap, Python-REPL-like reading of the lines typed
 * so far. Input continues while a bracket or a triple-quoted string is open, after a
 * trailing backslash, after a decorator, and, once a line has opened a block (ends with
 * `:`) or the input is a `%%` cell magic, until an empty line. Everything else is
 * complete at the end of its line.
 */

/** What the lexer saw: open brackets, an open triple-quoted string, whether a block was opened. */
interface LexState {
  readonly depth: number
  readonly triple: '"""' | "'''" | undefined
  /** The last physical line ended with a backslash continuation (outside a string). */
  readonly backslash: boolean
  /** Some logical line ended with `:` outside brackets: a compound statement's header. */
  readonly blockOpened: boolean
}

const OPENERS = "([{"
const CLOSERS = ")]}"

/** Scans the lines as Python would tokenize them, as far as continuation is concerned. */
const lex = (lines: ReadonlyArray<string>): LexState => {
  let depth = 0
  let triple: '"""' | "'''" | undefined
  let backslash = false
  let blockOpened = false
  for (const line of lines) {
    let quote: '"' | "'" | undefined
    let lastCode = ""
    backslash = false
    for (let index = 0; index < line.length; index++) {
      const char = line[index]!
      if (triple !== undefined) {
        if (char === "\\") index++
        else if (line.startsWith(triple, index)) {
          index += 2
          triple = undefined
          lastCode = char
        }
        continue
      }
      if (quote !== undefined) {
        if (char === "\\") index++
        else if (char === quote) {
          quote = undefined
          lastCode = char
        }
        continue
      }
      if (char === "#") break
      if (char === '"' || char === "'") {
        const three = char === '"' ? '"""' : "'''"
        if (line.startsWith(three, index)) {
          triple = three
          index += 2
        } else quote = char
        continue
      }
      if (char === "\\" && index === line.length - 1) {
        backslash = true
        continue
      }
      if (OPENERS.includes(char)) depth++
      else if (CLOSERS.includes(char)) depth = Math.max(0, depth - 1)
      if (char.trim().length > 0) lastCode = char
    }
    if (triple === undefined && depth === 0 && !backslash && lastCode === ":") blockOpened = true
  }
  return { depth, triple, backslash, blockOpened }
}

const isBlank = (line: string): boolean => line.trim().length === 0

/**
 * Whether the lines typed so far (the last one just entered) are a whole cell. A lone
 * empty line is "complete" too; the caller skips it. `opensBlock` is the backend's rule for
 * a line that starts a block (Ruby's `def`, `class`, `do`, ...): a cell holding one ends
 * at an empty line.
 */
export const isCompleteCell = (lines: ReadonlyArray<string>, opensBlock?: (line: string) => boolean): boolean => {
  if (lines.length === 0) return true
  if (opensBlock !== undefined && lines.some(opensBlock)) return isBlank(lines[lines.length - 1]!)
  const last = lines[lines.length - 1]!
  const first = (lines.find((line) => !isBlank(line)) ?? "").trimStart()
  if (first.startsWith("%%")) return isBlank(last)
  if (lines.length === 1 && (first.startsWith("%") || first.startsWith("!"))) return true
  const state = lex(lines)
  if (state.triple !== undefined || state.depth > 0 || state.backslash) return false
  if (state.blockOpened || first.startsWith("@")) return isBlank(last)
  return true
}

/** The cell's source: the lines joined, trailing empty lines dropped. */
export const cellSource = (lines: ReadonlyArray<string>): string => {
  const kept = [...lines]
  while (kept.length > 0 && isBlank(kept[kept.length - 1]!)) kept.pop()
  return kept.join("\n")
}

/** An `obj?` / `obj??` (or `?obj` / `??obj`) line: the name to inspect and IPython's detail level. */
export interface InspectionLine {
  readonly name: string
  readonly detailLevel: 0 | 1
}

const INSPECT_SUFFIX = /^\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*(\?\??)\s*$/
const INSPECT_PREFIX = /^\s*(\?\??)\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*$/

/**
 * The inspection a line asks for, when it is `obj?`, `obj??`, `?obj` or `??obj`. Where
 * `predicateNames` (Ruby: `empty?` is a method, `?x` a character), `obj?` and `?x` are code
 * and stay cells; `obj??`, `??obj` and `?obj` with a longer name are not code, so they inspect.
 */
export const inspectionLine = (line: string, predicateNames = false): InspectionLine | undefined => {
  const suffix = INSPECT_SUFFIX.exec(line)
  if (suffix !== null) {
    if (predicateNames && suffix[2] === "?") return undefined
    return { name: suffix[1]!, detailLevel: suffix[2] === "??" ? 1 : 0 }
  }
  const prefix = INSPECT_PREFIX.exec(line)
  if (prefix === null) return undefined
  if (predicateNames && prefix[1] === "?" && prefix[2]!.length === 1) return undefined
  return { name: prefix[2]!, detailLevel: prefix[1] === "??" ? 1 : 0 }
}

/**
 * What Tab asks the kernel: the cell typed so far (earlier lines, then the current line
 * up to the cursor) and where the current line starts in it.
 */
export const completionCode = (
  earlier: ReadonlyArray<string>,
  lineBeforeCursor: string
): { readonly code: string; readonly lineStart: number } => {
  const head = earlier.length === 0 ? "" : earlier.join("\n") + "\n"
  return { code: head + lineBeforeCursor, lineStart: head.length }
}

/**
 * The answer readline's completer wants: the matches and the part of the current line
 * they replace (what the kernel's `cursorStart` marks, clamped to the line).
 */
export const readlineCompletion = (
  lineBeforeCursor: string,
  lineStart: number,
  completion: { readonly matches: ReadonlyArray<string>; readonly cursorStart: number }
): [Array<string>, string] => {
  const from = Math.max(0, Math.min(lineBeforeCursor.length, completion.cursorStart - lineStart))
  return [[...completion.matches], lineBeforeCursor.slice(from)]
}
