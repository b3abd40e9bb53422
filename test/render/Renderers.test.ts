import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import { STATUS_MIME } from "../../src/kernel/Frame.ts"
import { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import { displayColumns } from "../../src/render/Columns.ts"
import {
  finishExecution,
  pushExecutionOutput,
  renderExecution,
  renderExecutionView,
  startExecution
} from "../../src/render/InteractiveRenderer.ts"
import { cellStatusLabel, truncationNotice } from "../../src/render/Notices.ts"
import { outputImages, outputsText, type RenderableOutput } from "../../src/render/OutputText.ts"
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
import { cellHeading, renderOutputsAsText, renderToolCell } from "../../src/render/ToolRenderer.ts"
import { done, stdoutLines, TIMEOUT_NOTICE, zeroDivision } from "./fixtures.ts"
import { pngBase64 } from "./images.ts"
import { asciiText, constantFrom, integer, nat, oneOf, sized } from "../kernel/arbitraries.ts"

const plain = { color: false } as const

describe("outputsText", () => {
  it("keeps stream text as written and puts displays on lines of their own", () => {
    const outputs = [
      KernelOutput.Stdout({ text: "partial" }),
      KernelOutput.Display({ bundle: { "text/plain": "shown" } }),
      KernelOutput.Stdout({ text: "after\n" }),
      KernelOutput.Result({ bundle: { "text/plain": "42" } }),
      done()
    ]
    expect(outputsText(outputs, plain)).toBe("partial\nshown\nafter\n42\n")
  })

  it("renders status events as lines and skips watchdog control", () => {
    const outputs = [
      KernelOutput.Status({ op: "timeout", fields: { action: "pause" } }),
      KernelOutput.Status({ op: "find", fields: { count: 2 } }),
      KernelOutput.Status({ op: "timeout", fields: { action: "resume" } })
    ]
    expect(outputsText(outputs, plain)).toBe("find 2 matches\n")
  })

  it("writes the traceback, adding the summary line when it is missing", () => {
    expect(outputsText([zeroDivision], plain)).toBe(
      "Traceback (most recent call last):\n  File \"<cell 4>\", line 1, in <module>\nZeroDivisionError: division by zero\n"
    )
    const bare = KernelOutput.Error({ ename: "KeyboardInterrupt", evalue: "", traceback: [] })
    expect(outputsText([bare], plain)).toBe("KeyboardInterrupt\n")
  })

  it("strips the kernel's escape sequences without colour and keeps them with it", () => {
    const coloured = KernelOutput.Stdout({ text: "\u001b[32mgreen\u001b[0m\n" })
    const error = KernelOutput.Error({ ename: "E", evalue: "v", traceback: ["\u001b[31mE: v\u001b[0m"] })
    expect(outputsText([coloured, error], plain)).toBe("green\nE: v\n")
    expect(outputsText([coloured, error], { color: true })).toBe("\u001b[32mgreen\u001b[0m\n\u001b[31mE: v\u001b[0m\n")
  })

  it("colours stderr per line so a preview keeps the colour", () => {
    expect(outputsText([KernelOutput.Stderr({ text: "a\n 5%\r10%\n" })], { color: true })).toBe(
      "\u001b[31ma\u001b[39m\n\u001b[31m 5%\u001b[39m\r\u001b[31m10%\u001b[39m\n"
    )
  })

  it("shows the output sink's omission markers as their note", () => {
    const outputs = [
      KernelOutput.Stdout({ text: "head" }),
      { _tag: "TextOmitted", text: "… 900 lines omitted …" } as const,
      KernelOutput.Stdout({ text: "tail\n" })
    ]
    expect(outputsText(outputs, plain)).toBe("head\n… 900 lines omitted …\ntail\n")
  })
})

describe("outputImages", () => {
  it("collects PNG and JPEG payloads from displays and results in order", () => {
    const first = pngBase64(1, 1)
    const second = pngBase64(2, 2)
    const outputs = [
      KernelOutput.Display({ bundle: { "image/png": first, "text/plain": "<Figure>" } }),
      KernelOutput.Display({ bundle: { [STATUS_MIME]: { op: "cd", path: "/" } } }),
      KernelOutput.Result({ bundle: { "image/png": second } })
    ]
    expect(outputImages(outputs).map((image) => image.data)).toEqual([first, second])
  })
})

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

const streamText = Arbitrary.map(
  Arbitrary.array(oneOf(constantFrom("\n", "\r", "\r\n", "ab", "日本", "\t", " 10%", "\u001b[31m"), asciiText(5)), { maxLength: 60 }),
  (parts) => parts.join("")
)

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
    [streamText, Arbitrary.array(nat, { maxLength: 12 }), integer(1, 12)],
    ([text, cuts, cap]) => {
      const whole = pushChunk(makeStreamingView(cap), text)
      const pieces = pushAll(makeStreamingView(cap), chunked(text, cuts))
      expect(heldLines(pieces)).toEqual(heldLines(whole))
      expect(pieces.dropped).toBe(whole.dropped)
    },
    sized(60)
  )

  it.prop(
    "holds the last lines of the output, at most the cap, and counts the rest as dropped",
    [streamText, Arbitrary.array(nat, { maxLength: 12 }), integer(1, 12)],
    ([text, cuts, cap]) => {
      const view = pushAll(makeStreamingView(cap), chunked(text, cuts))
      const all = splitLines(text).map(collapseCarriageReturns)
      const held = heldLines(view)
      expect(held.length).toBeLessThanOrEqual(cap)
      expect(held).toEqual(all.slice(all.length - held.length))
      expect(view.dropped + held.length).toBe(all.length)
    },
    sized(60)
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


describe("cellStatusLabel", () => {
  it("names every way a cell can end", () => {
    const ok = { status: "ok", executionCount: 3, cancelled: false, timedOut: false, killed: false } as const
    expect(cellStatusLabel(ok)).toBe("✓ ok [3]")
    expect(cellStatusLabel({ ...ok, status: "error", executionCount: 4 })).toBe("✗ error [4]")
    expect(cellStatusLabel({ ...ok, cancelled: true })).toBe("⏹ cancelled")
    expect(cellStatusLabel({ ...ok, cancelled: true, timedOut: true, notice: TIMEOUT_NOTICE })).toBe("⏱ timed out after 30s")
    expect(cellStatusLabel({ ...ok, cancelled: true, timedOut: true }, { timeoutSeconds: 5 })).toBe("⏱ timed out after 5s")
    expect(cellStatusLabel({ ...ok, cancelled: true, timedOut: true, killed: true })).toBe("☠ kernel killed")
    expect(cellStatusLabel({ ...ok, executionCount: 0 })).toBe("✓ ok")
    expect(cellStatusLabel(undefined)).toBe("⋯ running")
  })
})

describe("cellHeading", () => {
  it("uses the title, else the first non-blank code line", () => {
    expect(cellHeading("x = 1", "Load data\nmore")).toBe("Load data")
    expect(cellHeading("\n  import pandas as pd\nx = 1")).toBe("import pandas as pd")
    expect(cellHeading("  \n", "  ")).toBe("(empty cell)")
  })
})

describe("renderToolCell", () => {
  const code = "for i in range(25):\n    print(f'line {i + 1}')"

  it("collapsed: heading, the last 10 output lines under an expand hint, then the status", () => {
    const lines = renderToolCell({ code, outputs: [stdoutLines(25), done({ executionCount: 3 })] }, plain)
    expect(lines).toEqual([
      "▸ for i in range(25):",
      "  … 15 more lines (ctrl+o to expand)",
      ...Array.from({ length: 10 }, (_, index) => `  line ${index + 16}`),
      "✓ ok [3]"
    ])
  })

  it("expanded: the code and every retained output line", () => {
    const lines = renderToolCell({ code, title: "Count", outputs: [stdoutLines(25), done()] }, { ...plain, expanded: true })
    expect(lines.slice(0, 3)).toEqual(["▸ Count", "  │ for i in range(25):", "  │     print(f'line {i + 1}')"])
    expect(lines.slice(3, 28)).toEqual(Array.from({ length: 25 }, (_, index) => `  line ${index + 1}`))
    expect(lines.at(-1)).toBe("✓ ok [1]")
    expect(lines.length).toBe(29)
  })

  it("shows the traceback and the error status", () => {
    const lines = renderToolCell({ code: "1/0", outputs: [zeroDivision, done({ status: "error", executionCount: 4 })] }, plain)
    expect(lines.at(-2)).toBe("  ZeroDivisionError: division by zero")
    expect(lines.at(-1)).toBe("✗ error [4]")
  })

  it("adds the timeout notice and the truncation notice", () => {
    const lines = renderToolCell(
      {
        code: "while True: pass",
        outputs: [stdoutLines(2), done({ cancelled: true, timedOut: true, notice: TIMEOUT_NOTICE })],
        truncation: { totalBytes: 5000, totalLines: 300, shownBytes: 1000, shownLines: 20, artifactUri: "artifact://out-1" }
      },
      plain
    )
    expect(lines.slice(-3)).toEqual([
      `  ${TIMEOUT_NOTICE}`,
      "  … output truncated: 280 lines / 4000 bytes omitted; full output: artifact://out-1",
      "⏱ timed out after 30s"
    ])
  })

  it("shows a cell without Done as running", () => {
    expect(renderToolCell({ code: "sleep()", outputs: [] }, plain)).toEqual(["▸ sleep()", "⋯ running"])
  })

  it("clamps long output lines to the column limit, gutter included", () => {
    const lines = renderToolCell({ code: "x", outputs: [KernelOutput.Stdout({ text: "y".repeat(9000) }), done()] }, plain)
    expect(lines[1]!.length).toBe(4000)
    expect(lines[1]!.endsWith("visible columns omitted]")).toBe(true)
  })

  it("uses colour only when asked", () => {
    const outputs = [KernelOutput.Stderr({ text: "warn\n" }), done()]
    expect(renderToolCell({ code: "x", outputs }, plain).join("\n")).not.toContain("\u001b")
    expect(renderToolCell({ code: "x", outputs }).join("\n")).toContain("\u001b[31mwarn\u001b[39m")
  })
})

describe("truncationNotice", () => {
  it("names the artifact, or says why the full output could not be saved", () => {
    const cut = { totalBytes: 10, totalLines: 3, shownBytes: 4, shownLines: 1 }
    expect(truncationNotice({ ...cut, artifactUri: "artifact://a" }, { bytes: 0, lines: 0 })).toBe(
      "… output truncated: 2 lines / 6 bytes omitted; full output: artifact://a"
    )
    expect(truncationNotice({ ...cut, artifactUri: "" }, { bytes: 0, lines: 0 })).toBe("… output truncated: 2 lines / 6 bytes omitted")
    expect(truncationNotice({ ...cut, artifactUri: "", artifactError: "disk full" }, { bytes: 0, lines: 0 })).toBe(
      "… output truncated: 2 lines / 6 bytes omitted; the full output could not be saved: disk full"
    )
    expect(truncationNotice({ totalBytes: 5, totalLines: 2, shownBytes: 4, shownLines: 1 }, { bytes: 0, lines: 0 })).toBe(
      "… output truncated: 1 line / 1 byte omitted"
    )
  })
})

describe("renderOutputsAsText", () => {
  it("is the compact plain text of everything the cell produced, in order", () => {
    const outputs = [
      KernelOutput.Stdout({ text: "\u001b[1mloading\u001b[0m  \n" }),
      KernelOutput.Stderr({ text: "  0%\r 50%\r100%\n" }),
      KernelOutput.Status({ op: "timeout", fields: { action: "pause" } }),
      KernelOutput.Stdout({ text: "Wall time: 12.3 ms\n" }),
      KernelOutput.Status({ op: "time", fields: { ms: 12.3 } }),
      KernelOutput.Display({ bundle: { "text/html": "<table><tr><th>a</th></tr><tr><td>1</td></tr></table>" } }),
      KernelOutput.Display({ bundle: { "image/png": pngBase64(640, 480, 12_595) } }),
      KernelOutput.Result({ bundle: { "text/plain": "'done'" } }),
      done()
    ]
    expect(renderOutputsAsText(outputs)).toBe(
      ["loading", "100%", "Wall time: 12.3 ms", "| a   |", "| --- |", "| 1   |", "[image/png 640x480, 12.3 KB]", "'done'"].join("\n")
    )
  })

  it("keeps tabs and blank lines inside the output, dropping only trailing blank lines", () => {
    expect(renderOutputsAsText([KernelOutput.Stdout({ text: "a\tb\n\nc\n\n\n" }), done()])).toBe("a\tb\n\nc")
  })

  it("ends with the traceback for a failed cell", () => {
    expect(renderOutputsAsText([KernelOutput.Stdout({ text: "before\n" }), zeroDivision, done({ status: "error" })])).toBe(
      "before\nTraceback (most recent call last):\n  File \"<cell 4>\", line 1, in <module>\nZeroDivisionError: division by zero"
    )
  })

  it("adds the notice of a timed-out, cancelled or killed cell", () => {
    expect(renderOutputsAsText([stdoutLines(1), done({ cancelled: true, timedOut: true, notice: TIMEOUT_NOTICE })])).toBe(
      `line 1\n${TIMEOUT_NOTICE}`
    )
    expect(renderOutputsAsText([done({ cancelled: true })])).toBe("eval cell was cancelled; kernel interrupted but remains running.")
  })

  it("adds the truncation notice, counting what is shown when the sink does not say", () => {
    expect(
      renderOutputsAsText([stdoutLines(2), done()], { truncation: { totalBytes: 1000, totalLines: 100 } })
    ).toBe("line 1\nline 2\n… output truncated: 98 lines / 986 bytes omitted")
  })

  it("is empty for a cell that printed nothing", () => {
    expect(renderOutputsAsText([done()])).toBe("")
  })
})


const linesOf = (count: number, from = 1): Array<RenderableOutput> =>
  Array.from({ length: count }, (_, index) => KernelOutput.Stdout({ text: `line ${from + index}\n` }))

describe("interactive execution while streaming", () => {
  it("keeps 100 lines, previews the last 20, and notes both hidden and dropped lines", () => {
    const outputs = linesOf(150)
    const execution = outputs.reduce(pushExecutionOutput, startExecution(plain))
    const lines = renderExecutionView(execution)
    expect(lines[0]).toBe("… 80 more lines (ctrl+o to expand)")
    expect(lines[1]).toBe("line 131")
    expect(lines[20]).toBe("line 150")
    expect(lines[21]).toBe("… 50 earlier lines dropped while streaming")
    expect(lines.length).toBe(22)
    const expanded = renderExecutionView(execution, { expanded: true })
    expect(expanded[0]).toBe("line 51")
    expect(expanded.at(-1)).toBe("… 50 earlier lines dropped while streaming")
  })

  it("starts a display on its own line after unfinished stdout", () => {
    const execution = [KernelOutput.Stdout({ text: "50%" }), KernelOutput.Display({ bundle: { "text/plain": "chart" } })]
      .reduce(pushExecutionOutput, startExecution(plain))
    expect(renderExecutionView(execution)).toEqual(["50%", "chart"])
  })

  it("after finishing, shows the full output and drops the dropped note", () => {
    const outputs = [...linesOf(150), done()]
    const streamed = outputs.reduce(pushExecutionOutput, startExecution(plain))
    const finished = finishExecution(streamed, outputs)
    const lines = renderExecutionView(finished)
    expect(lines[0]).toBe("… 130 more lines (ctrl+o to expand)")
    expect(lines.some((line) => line.includes("dropped while streaming"))).toBe(false)
    expect(renderExecutionView(finished, { expanded: true }).length).toBe(150)
  })
})

describe("renderExecution", () => {
  it("clamps each line at 4000 columns, counting wide characters as two", () => {
    const [line] = renderExecution([KernelOutput.Stdout({ text: "漢".repeat(3000) + "\n" }), done()], plain)
    expect(displayColumns(line!)).toBeLessThanOrEqual(4000)
    expect(line).toMatch(/^漢+… \[2032 visible columns omitted\]$/)
  })

  it("adds an error notice after the traceback", () => {
    expect(renderExecution([zeroDivision, done({ status: "error" })], plain).at(-1)).toBe("✗ ZeroDivisionError: division by zero")
  })

  it("adds the cancellation, timeout and kill notices instead of the interrupt error", () => {
    const interrupt = KernelOutput.Error({ ename: "KeyboardInterrupt", evalue: "", traceback: [] })
    expect(renderExecution([interrupt, done({ status: "error", cancelled: true })], plain)).toEqual([
      "KeyboardInterrupt",
      "⏹ eval cell was cancelled; kernel interrupted but remains running."
    ])
    expect(renderExecution([done({ cancelled: true, timedOut: true, notice: TIMEOUT_NOTICE })], plain)).toEqual([`⏱ ${TIMEOUT_NOTICE}`])
    expect(renderExecution([done({ cancelled: true, killed: true, notice: "killed." })], plain)).toEqual(["☠ killed."])
  })

  it("adds the truncation notice with the artifact to recover the full output", () => {
    const lines = renderExecution([stdoutLines(3), done()], {
      ...plain,
      truncation: { totalBytes: 2_000_000, totalLines: 40_000, shownBytes: 20_000, shownLines: 400, artifactUri: "artifact://out-7" }
    })
    expect(lines.at(-1)).toBe("… output truncated: 39600 lines / 1980000 bytes omitted; full output: artifact://out-7")
  })

  it("has no escape sequence at all without colour, even from the kernel", () => {
    const outputs = [
      KernelOutput.Stdout({ text: "\u001b[31mred\u001b[0m\n" }),
      KernelOutput.Stderr({ text: "warn\n" }),
      KernelOutput.Status({ op: "find", fields: { count: 1 } }),
      zeroDivision,
      done({ status: "error" })
    ]
    expect(renderExecution(outputs, plain).join("\n")).not.toContain("\u001b")
    const coloured = renderExecution(outputs).join("\n")
    expect(coloured).toContain("\u001b[31mred\u001b[0m")
    expect(coloured).toContain("\u001b[36mfind 1 match\u001b[39m")
  })
})
