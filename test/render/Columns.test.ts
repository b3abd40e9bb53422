import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import stringWidth from "string-width"
import { HYPERLINK_CLOSE, SGR_RESET, tokenizeAnsi } from "../../src/render/Ansi.ts"
import {
  clampLine,
  displayColumns,
  EXECUTION_MAX_DISPLAY_COLUMNS,
  EXECUTION_PREVIEW_LINES,
  EXECUTION_STREAMING_LINE_CAP,
  omittedSuffix,
  TOOL_PREVIEW_LINES
} from "../../src/render/Columns.ts"

const ESCAPES = [
  "\u001b[31m",
  "\u001b[0m",
  "\u001b[m",
  "\u001b[1;38;5;208m",
  "\u001b[48;2;10;20;30m",
  "\u001b[2K",
  "\u001b[?25l",
  "\u001b]8;;https://example.com/a?b=c\u001b\\",
  "\u001b]8;;\u001b\\",
  "\u001b]0;window title\u0007",
  "\u001b(B",
  "\u001b7",
  "\u009b4m"
] as const

/** Whole grapheme clusters that never merge with a neighbour. */
const GRAPHEMES = [
  "a", "Z", " ", "-", "日", "本", "Ａ", "한", "é", "e\u0301", "✓", "…", "👍", "👍🏽", "👨‍👩‍👧", "🇯🇵", "\t"
] as const

const escape = fc.constantFrom(...ESCAPES)
const grapheme = fc.constantFrom(...GRAPHEMES)
const anyText = fc.oneof(fc.string({ unit: "grapheme", maxLength: 6 }), fc.string({ unit: "grapheme-ascii", maxLength: 12 }))

/** Lines whose text pieces are whole clusters, so that library and clamp agree on widths. */
const wellFormedLine = fc.array(fc.oneof({ weight: 1, arbitrary: escape }, { weight: 4, arbitrary: grapheme }), { maxLength: 160, size: "large" })
  .map((parts) => parts.join(""))
/** Lines with arbitrary text between escape sequences. */
const roughLine = fc.array(fc.oneof(escape, anyText), { maxLength: 60, size: "large" }).map((parts) => parts.join(""))
const line = fc.oneof(wellFormedLine, roughLine)

const removeKnownEscapes = (text: string): string =>
  [...ESCAPES, SGR_RESET, HYPERLINK_CLOSE].reduce((rest, sequence) => rest.split(sequence).join(""), text)

const visible = (text: string): string =>
  tokenizeAnsi(text).filter((token) => token.kind === "text").map((token) => token.text).join("")

const omittedCount = (clamped: string): number | undefined => {
  const match = /… \[(\d+) visible columns omitted\]$/.exec(clamped)
  return match === null ? undefined : Number(match[1])
}

describe("limits", () => {
  it("are the seed's numbers", () => {
    expect(EXECUTION_PREVIEW_LINES).toBe(20)
    expect(EXECUTION_MAX_DISPLAY_COLUMNS).toBe(4000)
    expect(EXECUTION_STREAMING_LINE_CAP).toBe(100)
    expect(TOOL_PREVIEW_LINES).toBe(10)
  })
})

describe("displayColumns", () => {
  it("counts escapes as 0 and wide characters and emoji as 2", () => {
    expect(displayColumns("\u001b[1;31mab\u001b[0m")).toBe(2)
    expect(displayColumns("日本")).toBe(4)
    expect(displayColumns("👍🏽x")).toBe(3)
    expect(displayColumns("\u001b]8;;https://x.y\u001b\\link\u001b]8;;\u001b\\")).toBe(4)
  })

  it.prop("agrees with string-width on lines of whole clusters", [wellFormedLine], ([text]) => {
    expect(displayColumns(text)).toBe(stringWidth(text))
  })
})

describe("clampLine", () => {
  it("cuts a long line and says exactly how many columns it left out", () => {
    const clamped = clampLine("x".repeat(5000))
    expect(clamped).toBe("x".repeat(3968) + "… [1032 visible columns omitted]")
    expect(displayColumns(clamped)).toBe(4000)
  })

  it("never splits a wide character and closes open styling before the suffix", () => {
    const clamped = clampLine("\u001b[31m" + "日".repeat(40), 40)
    expect(clampLine("\u001b[31m" + "日".repeat(40) + "x", 41)).toBe("\u001b[31m" + "日".repeat(5) + SGR_RESET + omittedSuffix(71))
    expect(clamped).toBe("\u001b[31m" + "日".repeat(5) + SGR_RESET + omittedSuffix(70))
    expect(displayColumns(clamped)).toBe(40)
  })

  it("closes an open hyperlink", () => {
    const clamped = clampLine("\u001b]8;;https://x.y\u001b\\" + "a".repeat(100), 40)
    expect(clamped.endsWith(HYPERLINK_CLOSE + omittedSuffix(90))).toBe(true)
  })

  it("leaves out escapes that come after the cut", () => {
    expect(clampLine("a".repeat(60) + "\u001b[31mb\u001b[0m", 40)).toBe("a".repeat(10) + omittedSuffix(51))
  })

  it("falls back to a bare ellipsis when the limit is narrower than the suffix", () => {
    expect(clampLine("abcdefghij", 5)).toBe("abcd…")
    expect(clampLine("abcdefghij", 0)).toBe("")
  })

  it.prop("never exceeds the limit", [line, fc.integer({ min: 0, max: 200 })], ([text, limit]) => {
    expect(displayColumns(clampLine(text, limit))).toBeLessThanOrEqual(limit)
  })

  it.prop("is the identity on lines within the limit", [line, fc.integer({ min: 0, max: 400 })], ([text, limit]) => {
    fc.pre(displayColumns(text) <= limit)
    expect(clampLine(text, limit)).toBe(text)
  })

  it.prop("never splits an escape sequence", [line, fc.integer({ min: 0, max: 120 })], ([text, limit]) => {
    const clamped = clampLine(text, limit)
    fc.pre(clamped !== text)
    expect(tokenizeAnsi(clamped).some((token) => token.kind === "stray")).toBe(false)
    expect(removeKnownEscapes(clamped)).not.toMatch(/[\u001b\u009b]/)
  })

  it.prop(
    "omits exactly N columns and keeps a prefix of the visible text",
    [line, fc.integer({ min: 32, max: 120 })],
    ([text, limit]) => {
      const clamped = clampLine(text, limit)
      fc.pre(clamped !== text)
      const omitted = omittedCount(clamped)
      expect(omitted).toBeDefined()
      const kept = clamped.slice(0, clamped.length - omittedSuffix(omitted!).length)
      expect(displayColumns(kept) + omitted!).toBe(displayColumns(text))
      expect(visible(text).startsWith(visible(kept))).toBe(true)
      expect(displayColumns(clamped)).toBeGreaterThanOrEqual(limit - 2)
    }
  )

  it.prop(
    "cuts plain text only between grapheme clusters",
    [fc.string({ unit: "grapheme", minLength: 40, maxLength: 120 }), fc.integer({ min: 32, max: 60 })],
    ([text, limit]) => {
      const clamped = clampLine(text, limit)
      fc.pre(clamped !== text)
      const kept = clamped.slice(0, clamped.length - omittedSuffix(omittedCount(clamped)!).length)
      const clusters = [...new Intl.Segmenter().segment(text)].map((part) => part.segment)
      const boundaries = clusters.reduce<Array<string>>((prefixes, cluster) => [...prefixes, prefixes.at(-1)! + cluster], [""])
      expect(boundaries).toContain(kept)
    }
  )
})
