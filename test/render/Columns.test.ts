import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import stringWidth from "string-width"
import {
  applyEscape,
  closeStyle,
  HYPERLINK_CLOSE,
  isCompleteEscape,
  PLAIN_STYLE,
  SGR_RESET,
  tokenizeAnsi
} from "../../src/render/Ansi.ts"
import {
  clampLine,
  displayColumns,
  EXECUTION_MAX_DISPLAY_COLUMNS,
  EXECUTION_PREVIEW_LINES,
  EXECUTION_STREAMING_LINE_CAP,
  omittedSuffix,
  TOOL_PREVIEW_LINES
} from "../../src/render/Columns.ts"
import { collapseCarriageReturns, displayLines, expandTabs, splitLines } from "../../src/render/TextLines.ts"
import { asciiText, binaryText, constantFrom, graphemeText, integer, oneOf, sized, weighted } from "../kernel/arbitraries.ts"

const kinds = (text: string) => tokenizeAnsi(text).map((token) => [token.kind, token.text])

describe("tokenizeAnsi", () => {
  it("separates SGR, OSC 8 hyperlinks and short escapes from text", () => {
    expect(kinds("a\u001b[31mb\u001b]8;;https://x.y\u001b\\c\u001b]8;;\u0007\u001b(Bd\u001b7")).toEqual([
      ["text", "a"],
      ["escape", "\u001b[31m"],
      ["text", "b"],
      ["escape", "\u001b]8;;https://x.y\u001b\\"],
      ["text", "c"],
      ["escape", "\u001b]8;;\u0007"],
      ["escape", "\u001b(B"],
      ["text", "d"],
      ["escape", "\u001b7"]
    ])
  })

  it("reads 8-bit CSI and OSC introducers", () => {
    expect(kinds("\u009b1mx\u009d0;t\u009c")).toEqual([
      ["escape", "\u009b1m"],
      ["text", "x"],
      ["escape", "\u009d0;t\u009c"]
    ])
  })

  it("marks introducers that begin no complete sequence as stray", () => {
    expect(kinds("a\u001b")).toEqual([["text", "a"], ["stray", "\u001b"]])
    expect(kinds("\u001b[12")).toEqual([["stray", "\u001b"], ["text", "[12"]])
    expect(kinds("\u001b]0;unterminated")).toEqual([["stray", "\u001b"], ["text", "]0;unterminated"]])
    expect(kinds("\u001b]0;a\u001b[31m")).toEqual([["stray", "\u001b"], ["text", "]0;a"], ["escape", "\u001b[31m"]])
    expect(kinds("\u001bé")).toEqual([["stray", "\u001b"], ["text", "é"]])
  })

  it("keeps DCS payloads whole up to ST", () => {
    expect(kinds("\u001bPq#0;2;0;0;0\u001b\\x")).toEqual([["escape", "\u001bPq#0;2;0;0;0\u001b\\"], ["text", "x"]])
  })

  it.prop("loses nothing: the tokens concatenate back to the input", [binaryText()], ([text]) => {
    expect(tokenizeAnsi(text).map((token) => token.text).join("")).toBe(text)
  })

  it.prop(
    "every escape token is complete on its own",
    [Arbitrary.array(oneOf(constantFrom("\u001b", "[", "]", "m", ";", "\u0007", "\\", "8", "1", "\u009b"), asciiText()), { maxLength: 30 })],
    ([parts]) => {
      for (const token of tokenizeAnsi(parts.join(""))) {
        if (token.kind === "escape") expect(isCompleteEscape(token.text)).toBe(true)
        if (token.kind === "text") expect(token.text).not.toMatch(/[\u001b\u009b\u009d]/)
      }
    },
    sized(30)
  )
})

describe("open style", () => {
  const after = (...sequences: ReadonlyArray<string>) => sequences.reduce(applyEscape, PLAIN_STYLE)

  it("tracks SGR attributes and resets", () => {
    expect(after("\u001b[31m").sgr).toBe(true)
    expect(after("\u001b[31m", "\u001b[0m").sgr).toBe(false)
    expect(after("\u001b[31m", "\u001b[m").sgr).toBe(false)
    expect(after("\u001b[0;1m").sgr).toBe(true)
    expect(after("\u001b[1;0m").sgr).toBe(false)
  })

  it("does not read a colour index of 0 as a reset", () => {
    expect(after("\u001b[38;5;0m").sgr).toBe(true)
    expect(after("\u001b[48;2;0;0;0m").sgr).toBe(true)
  })

  it("tracks OSC 8 hyperlinks and closes both", () => {
    const open = after("\u001b[1m", "\u001b]8;id=1;https://x.y\u0007")
    expect(open).toEqual({ sgr: true, hyperlink: true })
    expect(after("\u001b]8;;https://x.y\u0007", "\u001b]8;;\u0007").hyperlink).toBe(false)
    expect(closeStyle(open)).toBe("\u001b]8;;\u001b\\\u001b[0m")
    expect(closeStyle(PLAIN_STYLE)).toBe("")
  })
})

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

const escape = constantFrom(...ESCAPES)
const grapheme = constantFrom(...GRAPHEMES)
const anyText = oneOf(graphemeText({ maxLength: 6 }), asciiText(12))

/** Lines whose text pieces are whole clusters, so that library and clamp agree on widths. */
const wellFormedLine = Arbitrary.map(
  Arbitrary.array(weighted({ weight: 1, arbitrary: escape }, { weight: 4, arbitrary: grapheme }), { maxLength: 160 }),
  (parts) => parts.join("")
)
/** Lines with arbitrary text between escape sequences. */
const roughLine = Arbitrary.map(Arbitrary.array(oneOf(escape, anyText), { maxLength: 60 }), (parts) => parts.join(""))
const line = oneOf(wellFormedLine, roughLine)
/** Lines as long as the generators above allow (their arrays grow up to this size). */
const long = { arbitrary: { size: 160 } }
/** `long`, with enough runs that about a hundred cases pass the property's precondition (the others pass trivially). */
const longFiltered = { arbitrary: { size: 160, runs: 300 } }

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
  }, long)
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

  it("leaves out an escape right at the cut, when the text before it fills the room exactly", () => {
    expect(clampLine("a".repeat(10) + "\u001b[31m" + "b".repeat(50), 40)).toBe("a".repeat(10) + omittedSuffix(50))
  })

  it("leaves a line of wide characters that fills the limit exactly as it is", () => {
    expect(clampLine("日".repeat(20), 40)).toBe("日".repeat(20))
    expect(clampLine("\u001b[31m" + "x".repeat(40) + "\u001b[0m", 40)).toBe("\u001b[31m" + "x".repeat(40) + "\u001b[0m")
  })

  it("leaves out stray introducers before the cut", () => {
    expect(clampLine("ab\u001b\u00e9" + "c".repeat(60), 40)).toBe("ab\u00e9" + "c".repeat(7) + omittedSuffix(53))
  })

  it("uses the whole limit for the suffix when it fits exactly, and the ellipsis one column below", () => {
    const suffix = omittedSuffix(60)
    expect(clampLine("x".repeat(60), suffix.length)).toBe(suffix)
    expect(clampLine("x".repeat(60), suffix.length - 1)).toBe("x".repeat(suffix.length - 2) + "…")
  })

  it("falls back to a bare ellipsis when the limit is narrower than the suffix", () => {
    expect(clampLine("abcdefghij", 5)).toBe("abcd…")
    expect(clampLine("abcdefghij", 0)).toBe("")
  })

  it.prop("never exceeds the limit", [line, integer(0, 200)], ([text, limit]) => {
    expect(displayColumns(clampLine(text, limit))).toBeLessThanOrEqual(limit)
  }, long)

  it.prop("is the identity on lines within the limit", [line, integer(0, 400)], ([text, limit]) => {
    if (displayColumns(text) > limit) return
    expect(clampLine(text, limit)).toBe(text)
  }, longFiltered)

  it.prop("never splits an escape sequence", [line, integer(0, 120)], ([text, limit]) => {
    const clamped = clampLine(text, limit)
    if (clamped === text) return
    expect(tokenizeAnsi(clamped).some((token) => token.kind === "stray")).toBe(false)
    expect(removeKnownEscapes(clamped)).not.toMatch(/[\u001b\u009b]/)
  }, longFiltered)

  it.prop(
    "omits exactly N columns and keeps a prefix of the visible text",
    [line, integer(32, 120)],
    ([text, limit]) => {
      const clamped = clampLine(text, limit)
      if (clamped === text) return
      const omitted = omittedCount(clamped)
      expect(omitted).toBeDefined()
      const kept = clamped.slice(0, clamped.length - omittedSuffix(omitted!).length)
      expect(displayColumns(kept) + omitted!).toBe(displayColumns(text))
      expect(visible(text).startsWith(visible(kept))).toBe(true)
      expect(displayColumns(clamped)).toBeGreaterThanOrEqual(limit - 2)
    },
    longFiltered
  )

  it.prop(
    "cuts plain text only between grapheme clusters",
    [graphemeText({ minLength: 40, maxLength: 120 }), integer(32, 60)],
    ([text, limit]) => {
      const clamped = clampLine(text, limit)
      if (clamped === text) return
      const kept = clamped.slice(0, clamped.length - omittedSuffix(omittedCount(clamped)!).length)
      const clusters = [...new Intl.Segmenter().segment(text)].map((part) => part.segment)
      const boundaries = clusters.reduce<Array<string>>((prefixes, cluster) => [...prefixes, prefixes.at(-1)! + cluster], [""])
      expect(boundaries).toContain(kept)
    },
    sized(120)
  )
})

describe("splitLines", () => {
  it("does not start an empty line after a trailing newline", () => {
    expect(splitLines("")).toEqual([])
    expect(splitLines("a")).toEqual(["a"])
    expect(splitLines("a\n")).toEqual(["a"])
    expect(splitLines("a\n\nb")).toEqual(["a", "", "b"])
    expect(splitLines("\n")).toEqual([""])
  })
})

describe("collapseCarriageReturns", () => {
  it("keeps what the last carriage return left on screen", () => {
    expect(collapseCarriageReturns(" 10%\r 55%\r100%")).toBe("100%")
    expect(collapseCarriageReturns("done\r")).toBe("done")
    expect(collapseCarriageReturns("a\r\r")).toBe("a")
    expect(collapseCarriageReturns("\r")).toBe("")
    expect(collapseCarriageReturns("plain")).toBe("plain")
  })

  it("treats CRLF endings as plain line ends", () => {
    expect(displayLines("one\r\ntwo\r\n")).toEqual(["one", "two"])
  })
})

describe("expandTabs", () => {
  it("advances to the next multiple of eight columns, counting wide characters and skipping escapes", () => {
    expect(expandTabs("a\tb")).toBe("a       b")
    expect(expandTabs("\t")).toBe("        ")
    expect(expandTabs("日本\tx")).toBe("日本    x")
    expect(expandTabs("\u001b[31mab\u001b[0m\tc")).toBe("\u001b[31mab\u001b[0m      c")
    expect(expandTabs("a\tb", 4)).toBe("a   b")
  })

  it.prop("leaves no tab and changes nothing else", [asciiText()], ([text]) => {
    const expanded = expandTabs(text)
    expect(expanded).not.toContain("\t")
    expect(expanded.replace(/ /g, "")).toBe(text.replace(/[\t ]/g, ""))
  })
})
