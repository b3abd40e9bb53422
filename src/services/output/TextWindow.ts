/**
 * The truncation of a cell's output as a plain model, with no effects: text (stdout and
 * stderr, one stream in arrival order) and other entries are kept whole while the text is
 * within both budgets (bytes and lines, exactly at a budget included); once it is past one,
 * the window spills: it keeps a head of half of each budget and a sliding tail of the other
 * half, and counts what falls between them. A cut never splits a code point; the head's cut
 * snaps back to a line start and the tail's start forward past a line end, each when that
 * costs at most a quarter of its byte budget. Bytes are UTF-8, a lone surrogate counted as
 * the 3 bytes of the U+FFFD it is written as. `OutputSink` is the effectful shell around it:
 * artifacts, images, the lock and the synchronous path.
 */
import { Buffer } from "node:buffer"

/** A text stream of a cell. */
export type TextStream = "Stdout" | "Stderr"

/** Text of one stream as the window holds it. */
export interface TextEntry {
  readonly kind: "text"
  readonly stream: TextStream
  text: string
  bytes: number
  newlines: number
}

/** One kept item in order: text, another output (`R`), or the place of outputs left out. */
export type WindowEntry<R> = TextEntry | { readonly kind: "rich"; readonly item: R } | { readonly kind: "dropped" }

/** The text budgets of one cell. */
export interface TextBudgets {
  readonly maxBytes: number
  readonly maxLines: number
}

/** What was cut, in bytes and lines of the text. */
export interface TextCut {
  readonly totalBytes: number
  readonly totalLines: number
  readonly shownBytes: number
  readonly shownLines: number
  readonly omittedBytes: number
  readonly omittedLines: number
}

/** The window at the end of a cell: its entries, and when it spilled, the cut and where it goes (between `head` and `rest`). */
export type WindowResult<R> =
  | { readonly _tag: "Whole"; readonly entries: ReadonlyArray<WindowEntry<R>> }
  | {
    readonly _tag: "Cut"
    readonly head: ReadonlyArray<WindowEntry<R>>
    readonly rest: ReadonlyArray<WindowEntry<R>>
    readonly cut: TextCut
  }

/** The truncation state of one cell's output. */
export interface TextWindow<R> {
  /** Whether the text has passed a budget (from then on only a head and a tail are kept). */
  readonly spilled: () => boolean
  /** Adds text of a stream unless, before a spill, it would take the window past a budget; answers whether it added it. */
  readonly addWithin: (stream: TextStream, text: string) => boolean
  /** Adds text of a stream; answers whether it took a window that had not spilled past a budget (the caller then spills it). */
  readonly addText: (stream: TextStream, text: string) => boolean
  /** Adds another output, or the place of outputs left out, in order with the text. */
  readonly addEntry: (entry: Exclude<WindowEntry<R>, TextEntry>) => void
  /** Splits what is held into head and tail, the first time the text is past a budget; gives the texts held until then, in order. */
  readonly spill: () => ReadonlyArray<string>
  /** The kept entries and, when it spilled, the cut; the tail's start snapped to a line. Call once, at the end. */
  readonly finish: () => WindowResult<R>
  /** The text characters and entries held at this moment. */
  readonly retained: () => { readonly textChars: number; readonly entries: number }
}

interface Span {
  bytes: number
  newlines: number
  endsWithNewline: boolean
}

const emptySpan = (): Span => ({ bytes: 0, newlines: 0, endsWithNewline: false })

/** Whether a UTF-16 code unit is the first half of a surrogate pair. */
export const isHighSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff

const isLowSurrogate = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff

/** UTF-8 length, with a lone surrogate counted as the 3 bytes of the U+FFFD it is written as. */
const utf8Length = (text: string): number => Buffer.byteLength(text, "utf8")

const countNewlines = (text: string): number => {
  let count = 0
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) count++
  return count
}

/** The index just after the `n`-th newline (n >= 1), or undefined when there are fewer. */
const afterNewline = (text: string, n: number): number | undefined => {
  let at = -1
  for (let seen = 0; seen < n; seen++) {
    at = text.indexOf("\n", at + 1)
    if (at === -1) return undefined
  }
  return at + 1
}

/** The code units and UTF-8 bytes of the code point starting at `at`. */
const codePointAt = (text: string, at: number): readonly [units: number, bytes: number] => {
  const unit = text.charCodeAt(at)
  if (unit < 0x80) return [1, 1]
  if (unit < 0x800) return [1, 2]
  if (isHighSurrogate(unit) && at + 1 < text.length && isLowSurrogate(text.charCodeAt(at + 1))) return [2, 4]
  return [1, 3]
}

/** The longest prefix, in code units, of at most `limit` bytes that ends on a code point. */
const prefixWithin = (text: string, limit: number): number => {
  if (limit <= 0) return 0
  const total = utf8Length(text)
  if (total <= limit) return text.length
  if (total === text.length) return limit
  let at = 0
  let bytes = 0
  while (at < text.length) {
    const [units, size] = codePointAt(text, at)
    if (bytes + size > limit) break
    bytes += size
    at += units
  }
  return at
}

/** The shortest prefix, in code units, of at least `need` of the text's `total` bytes that ends on a code point. */
const prefixReaching = (text: string, need: number, total: number): number => {
  if (need >= total) return text.length
  if (total === text.length) return need
  let at = 0
  let bytes = 0
  while (at < text.length && bytes < need) {
    const [units, size] = codePointAt(text, at)
    bytes += size
    at += units
  }
  return at
}

/** A copy that does not keep a much larger parent string alive. */
const detach = (slice: string, parentLength: number): string =>
  slice.length * 2 < parentLength ? Buffer.from(slice, "utf16le").toString("utf16le") : slice

/** What a tail slot holds once its text has been cut away (the slot is only compacted later). */
const DROPPED_TEXT = { kind: "dropped" } as const

const textEntry = (stream: TextStream, text: string): TextEntry => ({
  kind: "text",
  stream,
  text,
  bytes: utf8Length(text),
  newlines: countNewlines(text)
})

/** A window over one cell's output with these budgets. */
export const makeTextWindow = <R>(budgets: TextBudgets): TextWindow<R> => {
  const headBudget = { bytes: Math.floor(budgets.maxBytes / 2), lines: Math.floor(budgets.maxLines / 2) }
  const tailBudget = { bytes: budgets.maxBytes - headBudget.bytes, lines: budgets.maxLines - headBudget.lines }

  const total = emptySpan()
  const head = emptySpan()
  const tail = emptySpan()
  const omitted = emptySpan()

  let spilled = false
  let entries: Array<WindowEntry<R>> = []
  const headEntries: Array<WindowEntry<R>> = []
  const middleEntries: Array<WindowEntry<R>> = []
  let tailEntries: Array<WindowEntry<R>> = []
  let tailStart = 0

  const lines = (span: Span) => span.newlines + (span.bytes > 0 && !span.endsWithNewline ? 1 : 0)
  const tailLines = () => tail.newlines + (tail.bytes > 0 && !total.endsWithNewline ? 1 : 0)
  const add = (span: Span, text: string, bytes: number, newlines: number) => {
    span.bytes += bytes
    span.newlines += newlines
    span.endsWithNewline = text.endsWith("\n")
  }
  const omit = (text: string, bytes: number, newlines: number) => add(omitted, text, bytes, newlines)

  const toTail = (entry: WindowEntry<R>) => {
    tailEntries.push(entry)
    if (entry.kind === "text") {
      tail.bytes += entry.bytes
      tail.newlines += entry.newlines
    }
  }

  const trimTail = () => {
    while (tailStart < tailEntries.length) {
      const overBytes = tail.bytes - tailBudget.bytes
      const overLines = tailLines() - tailBudget.lines
      if (overBytes <= 0 && overLines <= 0) break
      const front = tailEntries[tailStart]!
      if (front.kind !== "text") {
        middleEntries.push(front)
        tailEntries[tailStart++] = DROPPED_TEXT
        continue
      }
      let cut = overLines > 0 ? afterNewline(front.text, overLines) ?? front.text.length : 0
      if (overBytes > 0) cut = Math.max(cut, prefixReaching(front.text, overBytes, front.bytes))
      if (cut >= front.text.length) {
        omit(front.text, front.bytes, front.newlines)
        tail.bytes -= front.bytes
        tail.newlines -= front.newlines
        // The slot stays in the array until it is compacted; its text must not stay with it.
        tailEntries[tailStart++] = DROPPED_TEXT
        continue
      }
      const removed = front.text.slice(0, cut)
      const removedBytes = utf8Length(removed)
      const removedNewlines = countNewlines(removed)
      omit(removed, removedBytes, removedNewlines)
      front.text = detach(front.text.slice(cut), front.text.length)
      front.bytes -= removedBytes
      front.newlines -= removedNewlines
      tail.bytes -= removedBytes
      tail.newlines -= removedNewlines
    }
    if (tailStart > 64 && tailStart * 2 > tailEntries.length) {
      tailEntries = tailEntries.slice(tailStart)
      tailStart = 0
    }
  }

  const headCut = (text: string): number => {
    const newlinesLeft = headBudget.lines - head.newlines
    const byLines = newlinesLeft <= 0 ? 0 : afterNewline(text, newlinesLeft) ?? text.length
    let cut = Math.min(byLines, prefixWithin(text, headBudget.bytes - head.bytes))
    if (cut > 0 && cut < text.length) {
      const newline = text.lastIndexOf("\n", cut - 1)
      const lineStart = newline >= 0 ? newline + 1 : head.bytes === 0 || head.endsWithNewline ? 0 : -1
      if (lineStart >= 0 && utf8Length(text.slice(lineStart, cut)) <= headBudget.bytes / 4) cut = lineStart
    }
    return cut
  }

  const snapTailStart = () => {
    if (omitted.endsWithNewline) return
    let reach = 0
    let end = tailStart
    let within = -1
    for (; end < tailEntries.length; end++) {
      const entry = tailEntries[end]!
      if (entry.kind !== "text") return
      within = entry.text.indexOf("\n")
      if (within >= 0) break
      reach += entry.bytes
    }
    if (within < 0) return
    const last = tailEntries[end] as TextEntry
    const removed = last.text.slice(0, within + 1)
    const removedBytes = utf8Length(removed)
    if (reach + removedBytes > tailBudget.bytes / 4 || reach + removedBytes >= tail.bytes) return
    for (; tailStart < end; tailStart++) {
      const entry = tailEntries[tailStart] as TextEntry
      omit(entry.text, entry.bytes, 0)
      tail.bytes -= entry.bytes
    }
    omit(removed, removedBytes, 1)
    last.text = last.text.slice(within + 1)
    last.bytes -= removedBytes
    last.newlines -= 1
    tail.bytes -= removedBytes
    tail.newlines -= 1
    if (last.text.length === 0) tailStart++
  }

  /** Whether the window, not spilled, would be past a budget with `entry` added. */
  const passes = (entry: TextEntry): boolean => {
    const bytes = total.bytes + entry.bytes
    return bytes > budgets.maxBytes || total.newlines + entry.newlines + (entry.text.endsWith("\n") ? 0 : 1) > budgets.maxLines
  }

  const put = (entry: TextEntry) => {
    add(total, entry.text, entry.bytes, entry.newlines)
    if (spilled) {
      toTail(entry)
      trimTail()
    } else {
      entries.push(entry)
    }
  }

  const addWithin = (stream: TextStream, text: string): boolean => {
    if (text.length === 0) return true
    const entry = textEntry(stream, text)
    if (!spilled && passes(entry)) return false
    put(entry)
    return true
  }

  const addText = (stream: TextStream, text: string): boolean => {
    if (text.length === 0) return false
    const entry = textEntry(stream, text)
    const over = !spilled && passes(entry)
    put(entry)
    return over
  }

  const addEntry = (entry: Exclude<WindowEntry<R>, TextEntry>) => {
    if (spilled) toTail(entry)
    else entries.push(entry)
  }

  const spill = (): ReadonlyArray<string> => {
    if (spilled) return []
    spilled = true
    const texts: Array<string> = []
    let headDone = false
    for (const entry of entries) {
      if (entry.kind === "text") texts.push(entry.text)
      if (headDone) toTail(entry)
      else if (entry.kind !== "text") headEntries.push(entry)
      else {
        const cut = headCut(entry.text)
        if (cut === entry.text.length) {
          headEntries.push(entry)
          add(head, entry.text, entry.bytes, entry.newlines)
          continue
        }
        if (cut > 0) {
          const part = textEntry(entry.stream, detach(entry.text.slice(0, cut), entry.text.length))
          headEntries.push(part)
          add(head, part.text, part.bytes, part.newlines)
        }
        toTail(textEntry(entry.stream, entry.text.slice(cut)))
        headDone = true
      }
    }
    entries = []
    trimTail()
    return texts
  }

  const cutOf = (): TextCut => {
    const shared = head.bytes > 0 && !head.endsWithNewline && omitted.newlines === 0 && tail.bytes > 0
    const shownLines = lines(head) + tailLines() - (shared ? 1 : 0)
    const totalLines = lines(total)
    return {
      totalBytes: total.bytes,
      totalLines,
      shownBytes: head.bytes + tail.bytes,
      shownLines,
      omittedBytes: omitted.bytes,
      omittedLines: totalLines - shownLines
    }
  }

  const finish = (): WindowResult<R> => {
    if (!spilled) return { _tag: "Whole", entries }
    snapTailStart()
    return { _tag: "Cut", head: headEntries, rest: [...middleEntries, ...tailEntries.slice(tailStart)], cut: cutOf() }
  }

  const retained = () => {
    let textChars = 0
    let count = 0
    const measure = (list: ReadonlyArray<WindowEntry<R>>, from = 0) => {
      for (let at = from; at < list.length; at++) {
        const entry = list[at]!
        count++
        if (entry.kind === "text") textChars += entry.text.length
      }
    }
    measure(entries)
    measure(headEntries)
    measure(middleEntries)
    measure(tailEntries)
    return { textChars, entries: count }
  }

  return { spilled: () => spilled, addWithin, addText, addEntry, spill, finish, retained }
}
