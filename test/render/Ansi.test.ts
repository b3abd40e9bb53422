import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { applyEscape, closeStyle, isCompleteEscape, PLAIN_STYLE, tokenizeAnsi } from "../../src/render/Ansi.ts"

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

  it.prop("loses nothing: the tokens concatenate back to the input", [fc.string({ unit: "binary" })], ([text]) => {
    expect(tokenizeAnsi(text).map((token) => token.text).join("")).toBe(text)
  })

  it.prop(
    "every escape token is complete on its own",
    [fc.array(fc.oneof(fc.constantFrom("\u001b", "[", "]", "m", ";", "\u0007", "\\", "8", "1", "\u009b"), fc.string()), { maxLength: 30 })],
    ([parts]) => {
      for (const token of tokenizeAnsi(parts.join(""))) {
        if (token.kind === "escape") expect(isCompleteEscape(token.text)).toBe(true)
        if (token.kind === "text") expect(token.text).not.toMatch(/[\u001b\u009b\u009d]/)
      }
    }
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
