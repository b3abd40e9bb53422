/**
 * Splits terminal text into visible text and escape sequences (ECMA-48 grammar):
 * CSI (`ESC [` or 0x9B), OSC (`ESC ]` or 0x9D, ended by BEL or ST), the other control
 * strings (DCS, SOS, PM, APC; ended by ST) and the short `ESC` + intermediates + final
 * escapes. An introducer that does not begin a complete sequence is a `stray` token.
 */

/** One piece of terminal text. */
export interface AnsiToken {
  readonly kind: "text" | "escape" | "stray"
  readonly text: string
}

const ESC = 0x1b
const BEL = 0x07
const CAN = 0x18
const SUB = 0x1a
const C1_CSI = 0x9b
const C1_OSC = 0x9d
const C1_ST = 0x9c
const C1_STRING_INTRODUCERS: ReadonlySet<number> = new Set([0x90, 0x98, 0x9e, 0x9f])

const INTRODUCERS = /[\u001b\u0090\u0098\u009b\u009d\u009e\u009f]/g

const isC1 = (code: number): boolean => code >= 0x80 && code <= 0x9f

/** Index just past a CSI whose parameters start at `from`, or -1 when it is incomplete. */
const endOfCsi = (text: string, from: number): number => {
  let index = from
  while (index < text.length && text.charCodeAt(index) >= 0x30 && text.charCodeAt(index) <= 0x3f) index++
  while (index < text.length && text.charCodeAt(index) >= 0x20 && text.charCodeAt(index) <= 0x2f) index++
  if (index >= text.length) return -1
  const final = text.charCodeAt(index)
  return final >= 0x40 && final <= 0x7e ? index + 1 : -1
}

/**
 * Index just past a control string whose payload starts at `from`, or -1 when it is not
 * terminated. CAN, SUB, an ESC that is not part of ST, and other C1 controls abort it.
 */
const endOfControlString = (text: string, from: number, bellEnds: boolean): number => {
  for (let index = from; index < text.length; index++) {
    const code = text.charCodeAt(index)
    if (bellEnds && code === BEL) return index + 1
    if (code === C1_ST) return index + 1
    if (code === ESC) return text.charCodeAt(index + 1) === 0x5c ? index + 2 : -1
    if (code === CAN || code === SUB || isC1(code)) return -1
  }
  return -1
}

/** Index just past the escape sequence starting at `start`, or -1 when it is incomplete. */
const endOfSequence = (text: string, start: number): number => {
  const first = text.charCodeAt(start)
  if (first === C1_CSI) return endOfCsi(text, start + 1)
  if (first === C1_OSC) return endOfControlString(text, start + 1, true)
  if (C1_STRING_INTRODUCERS.has(first)) return endOfControlString(text, start + 1, false)
  const second = text.charCodeAt(start + 1)
  if (Number.isNaN(second)) return -1
  if (second === 0x5b) return endOfCsi(text, start + 2)
  if (second === 0x5d) return endOfControlString(text, start + 2, true)
  if (second === 0x50 || second === 0x58 || second === 0x5e || second === 0x5f) {
    return endOfControlString(text, start + 2, false)
  }
  let index = start + 1
  while (index < text.length && text.charCodeAt(index) >= 0x20 && text.charCodeAt(index) <= 0x2f) index++
  if (index >= text.length) return -1
  const final = text.charCodeAt(index)
  return final >= 0x30 && final <= 0x7e ? index + 1 : -1
}

/** Splits text into text runs, complete escape sequences and stray introducers, in order. */
export const tokenizeAnsi = (text: string): Array<AnsiToken> => {
  const tokens: Array<AnsiToken> = []
  let position = 0
  while (position < text.length) {
    INTRODUCERS.lastIndex = position
    const found = INTRODUCERS.exec(text)
    const start = found === null ? text.length : found.index
    if (start > position) tokens.push({ kind: "text", text: text.slice(position, start) })
    if (start >= text.length) break
    const end = endOfSequence(text, start)
    if (end === -1) {
      tokens.push({ kind: "stray", text: text[start]! })
      position = start + 1
    } else {
      tokens.push({ kind: "escape", text: text.slice(start, end) })
      position = end
    }
  }
  return tokens
}

/** Whether `text` is exactly one complete escape sequence. */
export const isCompleteEscape = (text: string): boolean =>
  text.length > 0 && endOfSequence(text, 0) === text.length

/** The SGR sequence that turns all styling off. */
export const SGR_RESET = "\u001b[0m"

/** The OSC 8 sequence that ends an open hyperlink. */
export const HYPERLINK_CLOSE = "\u001b]8;;\u001b\\"

/** Styling left open after a run of escape sequences: SGR attributes and OSC 8 hyperlinks. */
export interface OpenStyle {
  readonly sgr: boolean
  readonly hyperlink: boolean
}

/** No styling open. */
export const PLAIN_STYLE: OpenStyle = { sgr: false, hyperlink: false }

const sgrParameters = (sequence: string): string | undefined => {
  const body =
    sequence.charCodeAt(0) === C1_CSI ? sequence.slice(1) : sequence.startsWith("\u001b[") ? sequence.slice(2) : undefined
  return body !== undefined && body.endsWith("m") && /^[0-9;:]*m$/.test(body) ? body.slice(0, -1) : undefined
}

const sgrLeavesStyled = (parameters: string, styledBefore: boolean): boolean => {
  const parts = parameters.split(";")
  let styled = styledBefore
  for (let index = 0; index < parts.length; index++) {
    const part = parts[index]!
    const code = Number(part.split(":")[0] || "0")
    if (code === 0) {
      styled = false
      continue
    }
    styled = true
    if ((code === 38 || code === 48 || code === 58) && !part.includes(":")) {
      const mode = parts[index + 1]
      index += mode === "5" ? 2 : mode === "2" ? 4 : 0
    }
  }
  return styled
}

const hyperlinkTarget = (sequence: string): string | undefined => {
  const body =
    sequence.charCodeAt(0) === C1_OSC ? sequence.slice(1) : sequence.startsWith("\u001b]") ? sequence.slice(2) : undefined
  if (body === undefined || !body.startsWith("8;")) return undefined
  const payload = body.replace(/(\u0007|\u001b\\|\u009c)$/, "")
  const separator = payload.indexOf(";", 2)
  return separator === -1 ? undefined : payload.slice(separator + 1)
}

/** The open styling after applying one escape sequence. */
export const applyEscape = (style: OpenStyle, sequence: string): OpenStyle => {
  const parameters = sgrParameters(sequence)
  if (parameters !== undefined) return { ...style, sgr: sgrLeavesStyled(parameters, style.sgr) }
  const target = hyperlinkTarget(sequence)
  if (target !== undefined) return { ...style, hyperlink: target.length > 0 }
  return style
}

/** The sequences that close whatever styling is open. */
export const closeStyle = (style: OpenStyle): string =>
  (style.hyperlink ? HYPERLINK_CLOSE : "") + (style.sgr ? SGR_RESET : "")
