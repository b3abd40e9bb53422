import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { collapseCarriageReturns, displayLines, expandTabs, splitLines } from "../../src/render/TextLines.ts"

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

  it.prop("leaves no tab and changes nothing else", [fc.string({ unit: "grapheme-ascii" })], ([text]) => {
    const expanded = expandTabs(text)
    expect(expanded).not.toContain("\t")
    expect(expanded.replace(/ /g, "")).toBe(text.replace(/[\t ]/g, ""))
  })
})
