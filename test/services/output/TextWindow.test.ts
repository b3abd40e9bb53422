/**
 * The truncation model against a reference written here from the rules alone: the whole
 * text is kept exactly while it is within both budgets; past one, the head is a prefix and
 * the rest a suffix of the text, each within its half of the budgets, as long as the rules
 * allow (less only by the line snap, a quarter of its byte budget, and one code point), no
 * cut splits a code point, the counts are the text's own, and every other output stays, in
 * order. Exact cuts pin the snapping rules.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Schema } from "effect"
import { Buffer } from "node:buffer"
import { isHighSurrogate, makeTextWindow, type TextWindow, type WindowEntry, type WindowResult } from "../../../src/services/output/TextWindow.ts"

const utf8 = (text: string) => Buffer.byteLength(text, "utf8")
const newlines = (text: string) => text.split("\n").length - 1
const linesOf = (text: string) => newlines(text) + (text.length > 0 && !text.endsWith("\n") ? 1 : 0)

/** The longest prefix through at most `n` newlines (all of it when it has fewer). */
const throughNewlines = (text: string, n: number): string => {
  let at = 0
  for (let seen = 0; seen < n; seen++) {
    const next = text.indexOf("\n", at)
    if (next === -1) return text
    at = next + 1
  }
  return n === 0 ? "" : text.slice(0, at)
}

const isHigh = (unit: number) => unit >= 0xd800 && unit <= 0xdbff
const isLow = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff
const splitsPair = (text: string, at: number) => at > 0 && at < text.length && isHigh(text.charCodeAt(at - 1)) && isLow(text.charCodeAt(at))

/** The longest suffix, starting on a code point, within `bytes` and `lines`. */
const longestSuffix = (text: string, bytes: number, lines: number): string => {
  for (let at = 0; at <= text.length; at++) {
    if (splitsPair(text, at)) continue
    const suffix = text.slice(at)
    if (utf8(suffix) <= bytes && linesOf(suffix) <= lines) return suffix
  }
  return ""
}

/** The longest prefix, ending on a code point, within `bytes`. */
const longestPrefix = (text: string, bytes: number): number => {
  let best = 0
  for (let at = 0; at <= text.length; at++) {
    if (splitsPair(text, at)) continue
    if (utf8(text.slice(0, at)) <= bytes) best = at
    else break
  }
  return best
}

/** Where each text chunk starts and ends in the whole text, and the offset of each other output. */
const layout = (items: ReadonlyArray<Item>) => {
  const chunks: Array<readonly [number, number]> = []
  const rich: Array<readonly [number, number]> = []
  let at = 0
  for (const one of items) {
    if ("rich" in one) rich.push([one.rich, at])
    else if (one.text.length > 0) {
      chunks.push([at, at + one.text.length])
      at += one.text.length
    }
  }
  return { chunks, rich }
}

/** The head by the rules: within half of each budget, then back to a line start inside its chunk when that costs at most a quarter of its bytes. */
const expectedHead = (full: string, chunks: ReadonlyArray<readonly [number, number]>, bytes: number, lines: number): number => {
  const byLines = throughNewlines(full, lines).length
  const cut = Math.min(longestPrefix(full, bytes), byLines)
  const inside = chunks.find(([start, end]) => start < cut && cut < end)
  if (inside === undefined) return cut
  const lineStart = full.lastIndexOf("\n", cut - 1) + 1
  return lineStart >= inside[0] && utf8(full.slice(lineStart, cut)) <= bytes / 4 ? lineStart : cut
}

type Item = { readonly stream: "Stdout" | "Stderr"; readonly text: string } | { readonly rich: number }

/** Feeds the window as the output sink does: a spill when text would pass a budget. */
const feed = (window: TextWindow<number>, items: ReadonlyArray<Item>): WindowResult<number> => {
  for (const item of items) {
    if ("rich" in item) {
      window.addEntry({ kind: "rich", item: item.rich })
      continue
    }
    if (window.addText(item.stream, item.text)) window.spill()
  }
  return window.finish()
}

const textOf = (entries: ReadonlyArray<WindowEntry<number>>) => entries.map((entry) => (entry.kind === "text" ? entry.text : "")).join("")
const richOf = (entries: ReadonlyArray<WindowEntry<number>>) => entries.flatMap((entry) => (entry.kind === "rich" ? [entry.item] : []))

/** ASCII, newlines, the edges of the 2- and 3-byte ranges, pairs at both ends of the surrogate ranges, lone surrogates. */
const UNITS = [
  "a", "b", "\n", "\n", "é", "字", "😀", "\u0080", "\u07ff", "\u0800", "\ud7ff", "\ue000",
  "\ud800\udc00", "\udbff\udfff", "\udc00", "\udfff", "\ud83dz"
] as const
const intBetween = (minimum: number, maximum: number) => Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum, maximum })))
const chunk = Arbitrary.map(Arbitrary.array(Arbitrary.map(intBetween(0, UNITS.length - 1), (at) => UNITS[at]!), { maxLength: 40 }), (units) => units.join(""))
const item: Arbitrary.Arbitrary<Item> = Arbitrary.flatMap(intBetween(0, 5), (kind): Arbitrary.Arbitrary<Item> =>
  kind === 0
    ? Arbitrary.map(intBetween(0, 1000), (rich) => ({ rich }))
    : Arbitrary.map(chunk, (text) => ({ stream: kind % 2 === 0 ? "Stdout" as const : "Stderr" as const, text })))

describe("TextWindow against the rules", () => {
  it.prop(
    "whole exactly within both budgets; past one, a prefix and a suffix within their halves, as long as the rules allow",
    { items: Arbitrary.array(item, { maxLength: 30 }), maxBytes: intBetween(1, 200), maxLines: intBetween(1, 20) },
    ({ items, maxBytes, maxLines }) => {
      const full = items.map((one) => ("text" in one ? one.text : "")).join("")
      const result = feed(makeTextWindow<number>({ maxBytes, maxLines }), items)
      const rich = items.flatMap((one) => ("rich" in one ? [one.rich] : []))
      const within = utf8(full) <= maxBytes && linesOf(full) <= maxLines
      expect(result._tag).toBe(within ? "Whole" : "Cut")
      if (result._tag === "Whole") {
        expect(textOf(result.entries)).toBe(full)
        expect(richOf(result.entries)).toEqual(rich)
        return
      }
      const head = textOf(result.head)
      const rest = textOf(result.rest)
      expect(richOf(result.head).concat(richOf(result.rest))).toEqual(rich)
      expect(full.startsWith(head)).toBe(true)
      expect(full.endsWith(rest)).toBe(true)
      expect(head.length + rest.length).toBeLessThanOrEqual(full.length)
      expect(splitsPair(full, head.length)).toBe(false)
      expect(splitsPair(full, full.length - rest.length)).toBe(false)

      const headBytes = Math.floor(maxBytes / 2)
      const headLines = Math.floor(maxLines / 2)
      const tailBytes = maxBytes - headBytes
      const tailLines = maxLines - headLines
      expect(utf8(head)).toBeLessThanOrEqual(headBytes)
      expect(newlines(head)).toBeLessThanOrEqual(headLines)
      expect(utf8(rest)).toBeLessThanOrEqual(tailBytes)
      expect(linesOf(rest)).toBeLessThanOrEqual(tailLines)
      const { chunks, rich: richAt } = layout(items)
      expect(head).toBe(full.slice(0, expectedHead(full, chunks, headBytes, headLines)))
      expect(richOf(result.head)).toEqual(richAt.filter(([, offset]) => offset <= head.length).map(([id]) => id))
      const suffix = longestSuffix(full, tailBytes, tailLines)
      const tailStart = full.length - suffix.length
      const newline = suffix.indexOf("\n")
      const before = full.slice(0, tailStart)
      const onEdge = richAt.some(([, offset]) => offset === tailStart && offset > head.length)
      const richFirst = richAt.some(([, offset]) => offset > tailStart && offset <= tailStart + newline)
      const snaps = !before.endsWith("\n") && newline >= 0 && !richFirst &&
        utf8(suffix.slice(0, newline + 1)) <= tailBytes / 4 && newline + 1 < suffix.length
      if (!onEdge) expect(rest).toBe(snaps ? suffix.slice(newline + 1) : suffix)
      else expect(utf8(rest)).toBeGreaterThanOrEqual(utf8(suffix) - tailBytes / 4 - 3)

      const omitted = full.slice(head.length, full.length - rest.length)
      const shared = head.length > 0 && !head.endsWith("\n") && !omitted.includes("\n") && rest.length > 0
      const shownLines = linesOf(head) + linesOf(rest) - (shared ? 1 : 0)
      expect(result.cut).toEqual({
        totalBytes: utf8(full),
        totalLines: linesOf(full),
        shownBytes: utf8(head) + utf8(rest),
        shownLines,
        omittedBytes: utf8(omitted),
        omittedLines: linesOf(full) - shownLines
      })
    },
    { arbitrary: { runs: 400 } }
  )

  it.prop(
    "takes text within the budgets, and refuses, changing nothing, text that would pass one",
    { before: chunk, text: chunk, maxBytes: intBetween(1, 60), maxLines: intBetween(1, 8) },
    ({ before, maxBytes, maxLines, text }) => {
      const window = makeTextWindow<number>({ maxBytes, maxLines })
      if (utf8(before) > maxBytes || linesOf(before) > maxLines) return
      expect(window.addWithin("Stdout", before)).toBe(true)
      const both = before + text
      const fits = utf8(both) <= maxBytes && linesOf(both) <= maxLines
      expect(window.addWithin("Stderr", text)).toBe(fits)
      expect(window.spilled()).toBe(false)
      const result = window.finish()
      expect(result._tag === "Whole" && textOf(result.entries)).toBe(fits ? both : before)
    },
    { arbitrary: { runs: 400 } }
  )
})

const cutOf = (items: ReadonlyArray<Item>, maxBytes: number, maxLines: number) => {
  const result = feed(makeTextWindow<number>({ maxBytes, maxLines }), items)
  if (result._tag !== "Cut") throw new Error("expected a cut")
  return { head: textOf(result.head), rest: textOf(result.rest), cut: result.cut, result }
}

describe("TextWindow's exact cuts", () => {
  it("keeps text of exactly the budgets whole, and cuts at one byte or one line more", () => {
    const fresh = () => makeTextWindow<number>({ maxBytes: 10, maxLines: 2 })
    expect(fresh().addWithin("Stdout", "0123\n5678\n")).toBe(true)
    expect(fresh().addWithin("Stdout", "0123\n56789\n")).toBe(false)
    expect(fresh().addWithin("Stdout", "01\n34\n6")).toBe(false)
    expect(fresh().addText("Stdout", "0123\n5678\n")).toBe(false)
    expect(fresh().addText("Stdout", "0123\n56789\n")).toBe(true)
    expect(feed(fresh(), [{ stream: "Stdout", text: "0123\n5678\n" }])._tag).toBe("Whole")
  })

  it("counts UTF-8 bytes: ASCII one, é two, 字 three, 😀 four, a lone surrogate three", () => {
    for (const [text, bytes] of [["a", 1], ["é", 2], ["字", 3], ["😀", 4], ["\udc00", 3]] as const) {
      const window = makeTextWindow<number>({ maxBytes: bytes, maxLines: 5 })
      expect(window.addWithin("Stdout", text)).toBe(true)
      expect(window.addWithin("Stdout", "a")).toBe(false)
    }
  })

  it("without newlines: exactly half the bytes at each end", () => {
    const text = "x".repeat(100)
    const { cut, head, rest } = cutOf([{ stream: "Stdout", text }], 40, 100)
    expect(head).toBe("x".repeat(20))
    expect(rest).toBe("x".repeat(20))
    expect(cut).toMatchObject({ totalBytes: 100, omittedBytes: 60, totalLines: 1, shownLines: 1, omittedLines: 0 })
  })

  it("snaps the head's cut back to a line start within a quarter of its budget, and no further", () => {
    const near = cutOf([{ stream: "Stdout", text: "aaaaaaaaaaaaaaaaa\nbbb" + "c".repeat(100) }], 44, 100)
    expect(near.head).toBe("aaaaaaaaaaaaaaaaa\n")
    const far = cutOf([{ stream: "Stdout", text: "aaaaaaaaaaaa\nbbbbbbbbb" + "c".repeat(100) }], 40, 100)
    expect(far.head).toBe("aaaaaaaaaaaa\nbbbbbbb")
  })

  it("snaps the tail's start forward past a line end within a quarter of its budget, and no further", () => {
    const near = cutOf([{ stream: "Stdout", text: "c".repeat(100) + "dd\neeeeeeeeeeeeeeeeeee" }], 44, 100)
    expect(near.rest).toBe("eeeeeeeeeeeeeeeeeee")
    const far = cutOf([{ stream: "Stdout", text: "c".repeat(100) + "ddddddd\neeeeeeeeeeeeeeee" }], 44, 100)
    expect(far.rest).toBe("ddddd\neeeeeeeeeeeeeeee")
  })

  it("counts the line the head and tail share once", () => {
    const { cut } = cutOf([{ stream: "Stdout", text: "y".repeat(50) }], 20, 10)
    expect(cut).toMatchObject({ totalLines: 1, shownLines: 1, omittedLines: 0 })
    const lines = cutOf([{ stream: "Stdout", text: "1\n2\n3\n4\n5\n6\n" }], 100, 4)
    expect(lines.head).toBe("1\n2\n")
    expect(lines.rest).toBe("5\n6\n")
    expect(lines.cut).toMatchObject({ totalLines: 6, shownLines: 4, omittedLines: 2, omittedBytes: 4 })
  })

  it("puts an output that falls out of the tail right after the cut, before the tail, and counts it held", () => {
    const window = makeTextWindow<number>({ maxBytes: 20, maxLines: 10 })
    const result = feed(window, [{ stream: "Stdout", text: "h".repeat(30) }, { rich: 7 }, { stream: "Stderr", text: "t".repeat(60) }])
    if (result._tag !== "Cut") throw new Error("expected a cut")
    expect(result.head.map((entry) => entry.kind)).toEqual(["text"])
    expect(result.rest.map((entry) => (entry.kind === "rich" ? entry.item : entry.kind === "text" ? entry.stream : "-"))).toEqual([7, "Stderr"])
    expect(window.retained()).toEqual({ textChars: 20, entries: 5 })
  })

  it("snaps the head back only to a line start inside its chunk: to the chunk's start after a newline or at the very start, not into an earlier chunk", () => {
    const afterNewline = cutOf([{ stream: "Stdout", text: "abc\n" }, { stream: "Stdout", text: "defgh" + "z".repeat(100) }], 10, 100)
    expect(afterNewline.head).toBe("abc\n")
    const midLine = cutOf([{ stream: "Stdout", text: "abcdefghij" }, { stream: "Stdout", text: "klm" + "z".repeat(100) }], 24, 100)
    expect(midLine.head).toBe("abcdefghijkl")
    const atStart = cutOf([{ stream: "Stdout", text: "a😀😀😀" }], 8, 100)
    expect(atStart.head).toBe("")
  })

  it("snaps at exactly a quarter of the budget, on either end", () => {
    expect(cutOf([{ stream: "Stdout", text: "abcde\ngh" + "z".repeat(100) }], 16, 100).head).toBe("abcde\n")
    expect(cutOf([{ stream: "Stdout", text: "z".repeat(100) + "a\n" + "e".repeat(14) }], 32, 100).rest).toBe("e".repeat(14))
  })

  it("drops whole chunks before the tail's first newline when it snaps, and keeps the tail from snapping to nothing", () => {
    const { cut, result, rest } = cutOf([
      { stream: "Stdout", text: "x".repeat(100) },
      { stream: "Stderr", text: "ab" },
      { stream: "Stdout", text: "c\n" },
      { stream: "Stdout", text: "e".repeat(30) }
    ], 80, 100)
    expect(rest).toBe("e".repeat(30))
    expect(result.rest).toEqual([expect.objectContaining({ kind: "text", stream: "Stdout", text: "e".repeat(30) })])
    expect(cut).toEqual({ totalBytes: 134, totalLines: 2, shownBytes: 70, shownLines: 2, omittedBytes: 64, omittedLines: 0 })
    expect(cutOf([{ stream: "Stdout", text: "aaaaaaaaaa😀\n" }], 8, 100).rest).toBe("\n")
  })

  it("adds no entry for empty text", () => {
    const window = makeTextWindow<number>({ maxBytes: 10, maxLines: 10 })
    window.addText("Stdout", "")
    expect(window.retained()).toEqual({ textChars: 0, entries: 0 })
    expect(window.finish()).toEqual({ _tag: "Whole", entries: [] })
  })

  it("tells the surrogate ranges apart at their edges", () => {
    expect([0xd7ff, 0xd800, 0xdbff, 0xdc00, 0xdfff].map(isHighSurrogate)).toEqual([false, true, true, false, false])
    // A head of 22 bytes after a run of y: each case's text passes it in one code point.
    for (
      const [run, text, kept] of [
        [17, "a\ud800\udc00", "a\ud800\udc00"],
        [17, "a\udbff\udfff", "a\udbff\udfff"],
        [19, "\ud83dz", "\ud83d"],
        [19, "\ud83d\ue000", "\ud83d"],
        [18, "a\udc00\udfff", "a\udc00"],
        [19, "é\u0080", "é"]
      ] as const
    ) {
      expect(cutOf([{ stream: "Stdout", text: "y".repeat(run) + text + "q".repeat(100) }], 44, 100).head).toBe("y".repeat(run) + kept)
    }
  })

  it("holds only what it shows once it has spilled, its dropped slots compacted", () => {
    const window = makeTextWindow<number>({ maxBytes: 100, maxLines: 1000 })
    for (let at = 0; at < 10_000; at++) {
      if (window.addText("Stdout", "0123456789")) window.spill()
    }
    expect(window.retained().textChars).toBeLessThanOrEqual(100)
    expect(window.retained().entries).toBeLessThanOrEqual(200)
  })

  it("says when it has spilled, gives the texts held until then once, and counts what it holds", () => {
    const window = makeTextWindow<number>({ maxBytes: 10, maxLines: 10 })
    window.addText("Stdout", "abc")
    window.addEntry({ kind: "rich", item: 1 })
    window.addText("Stderr", "de\n")
    expect(window.retained()).toEqual({ textChars: 6, entries: 3 })
    expect(window.spilled()).toBe(false)
    window.addText("Stdout", "fghijk")
    expect(window.spill()).toEqual(["abc", "de\n", "fghijk"])
    expect(window.spilled()).toBe(true)
    expect(window.spill()).toEqual([])
    expect(window.retained()).toEqual({ textChars: 10, entries: 5 })
  })
})
