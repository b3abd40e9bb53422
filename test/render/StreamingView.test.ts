import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { displayColumns } from "../../src/render/Columns.ts"
import {
  droppedLinesNote,
  finishStreaming,
  heldLines,
  makeStreamingView,
  moreLinesHint,
  pushChunk,
  renderStreamingView,
  type StreamingView
} from "../../src/render/StreamingView.ts"
import { collapseCarriageReturns, splitLines } from "../../src/render/TextLines.ts"

const numbered = (from: number, to: number): string =>
  Array.from({ length: to - from + 1 }, (_, index) => `line ${from + index}\n`).join("")

const pushAll = (view: StreamingView, chunks: ReadonlyArray<string>): StreamingView => chunks.reduce(pushChunk, view)

/** Cuts `text` at the given positions (taken modulo its length). */
const chunked = (text: string, cuts: ReadonlyArray<number>): Array<string> => {
  const points = [...new Set(cuts.map((cut) => cut % (text.length + 1)))].sort((a, b) => a - b)
  const chunks: Array<string> = []
  let start = 0
  for (const point of points) {
    chunks.push(text.slice(start, point))
    start = point
  }
  chunks.push(text.slice(start))
  return chunks
}

const streamText = fc
  .array(fc.oneof(fc.constantFrom("\n", "\r", "\r\n", "ab", "日本", "\t", " 10%", "\u001b[31m"), fc.string({ maxLength: 5 })), {
    maxLength: 60
  })
  .map((parts) => parts.join(""))

describe("StreamingView while streaming", () => {
  it("joins lines split across chunks", () => {
    const view = pushAll(makeStreamingView(), ["hel", "lo\nwor", "ld\n", "tail"])
    expect(heldLines(view)).toEqual(["hello", "world", "tail"])
    expect(view.partial).toBe("tail")
  })

  it("applies carriage returns, also across chunks", () => {
    const view = pushAll(makeStreamingView(), [" 10%\r", " 50%\r", "100%\r", "\ndone\r", "\n"])
    expect(heldLines(view)).toEqual(["100%", "done"])
  })

  it("keeps at most the cap and counts what it dropped", () => {
    const view = pushChunk(makeStreamingView(), numbered(1, 250))
    expect(view.lines.length).toBe(100)
    expect(view.lines[0]).toBe("line 151")
    expect(view.dropped).toBe(150)
  })

  it("counts the unfinished line against the cap", () => {
    const view = pushAll(makeStreamingView(3), ["a\nb\nc\n", "d"])
    expect(heldLines(view)).toEqual(["b", "c", "d"])
    expect(view.dropped).toBe(1)
  })

  it("shows the collapsed tail with the expand hint above and the dropped note below", () => {
    const view = pushChunk(makeStreamingView(), numbered(1, 130))
    const lines = renderStreamingView(view)
    expect(lines[0]).toBe("… 80 more lines (ctrl+o to expand)")
    expect(lines.slice(1, 21)).toEqual(splitLines(numbered(111, 130)))
    expect(lines[21]).toBe("… 30 earlier lines dropped while streaming")
    expect(lines.length).toBe(22)
  })

  it("expanded, shows every kept line but still cannot bring back dropped ones", () => {
    const lines = renderStreamingView(pushChunk(makeStreamingView(), numbered(1, 130)), { expanded: true })
    expect(lines.length).toBe(101)
    expect(lines[0]).toBe("line 31")
    expect(lines[100]).toBe(droppedLinesNote(30))
  })

  it("words the notes for a single line", () => {
    expect(moreLinesHint(1)).toBe("… 1 more line (ctrl+o to expand)")
    expect(droppedLinesNote(1)).toBe("… 1 earlier line dropped while streaming")
  })

  it("clamps every shown line", () => {
    const lines = renderStreamingView(pushChunk(makeStreamingView(), "x".repeat(10_000) + "\n"))
    expect(displayColumns(lines[0]!)).toBe(4000)
    expect(lines[0]!.endsWith("visible columns omitted]")).toBe(true)
  })

  it("dims the notes only when colour is on", () => {
    const view = pushChunk(makeStreamingView(2), "a\nb\nc\n")
    expect(renderStreamingView(view, { color: true }).at(-1)).toBe(`\u001b[2m${droppedLinesNote(1)}\u001b[22m`)
    expect(renderStreamingView(view).at(-1)).toBe(droppedLinesNote(1))
  })

  it.prop(
    "holds the same lines however the text is chunked",
    [streamText, fc.array(fc.nat(), { maxLength: 12 }), fc.integer({ min: 1, max: 12 })],
    ([text, cuts, cap]) => {
      const whole = pushChunk(makeStreamingView(cap), text)
      const pieces = pushAll(makeStreamingView(cap), chunked(text, cuts))
      expect(heldLines(pieces)).toEqual(heldLines(whole))
      expect(pieces.dropped).toBe(whole.dropped)
    }
  )

  it.prop(
    "holds the last lines of the output, at most the cap, and counts the rest as dropped",
    [streamText, fc.array(fc.nat(), { maxLength: 12 }), fc.integer({ min: 1, max: 12 })],
    ([text, cuts, cap]) => {
      const view = pushAll(makeStreamingView(cap), chunked(text, cuts))
      const all = splitLines(text).map(collapseCarriageReturns)
      const held = heldLines(view)
      expect(held.length).toBeLessThanOrEqual(cap)
      expect(held).toEqual(all.slice(all.length - held.length))
      expect(view.dropped + held.length).toBe(all.length)
    }
  )
})

describe("StreamingView after finishing", () => {
  it("replaces the streamed lines with the full output and forgets the dropped count", () => {
    const streamed = pushChunk(makeStreamingView(), numbered(1, 130))
    const finished = finishStreaming(streamed, numbered(1, 130))
    expect(finished.dropped).toBe(0)
    expect(heldLines(finished).length).toBe(130)
    const lines = renderStreamingView(finished)
    expect(lines[0]).toBe("… 110 more lines (ctrl+o to expand)")
    expect(lines.some((line) => line.includes("dropped while streaming"))).toBe(false)
    expect(renderStreamingView(finished, { expanded: true }).length).toBe(130)
  })

  it("ignores chunks that arrive after the finish", () => {
    const finished = finishStreaming(makeStreamingView(), "done\n")
    expect(pushChunk(finished, "late\n")).toBe(finished)
  })

  it("shows no hint when everything fits the preview", () => {
    expect(renderStreamingView(finishStreaming(makeStreamingView(), "a\nb\n"))).toEqual(["a", "b"])
  })
})
