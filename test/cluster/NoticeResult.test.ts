/**
 * A lost cell's answer keeps what its caller saw stream before the loss: whole within the
 * output budgets, a head and a tail around a marker past them; other outputs in order.
 */
import { describe, expect, it } from "@effect/vitest"
import { LOST_CELL_NOTICE } from "../../src/cluster/LedgerDecision.ts"
import { noticeResult, withStreamedOutputs } from "../../src/cluster/NoticeResult.ts"
import { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import type { SinkOutput } from "../../src/services/output/OutputSink.ts"
import { makeTextWindow } from "../../src/services/output/TextWindow.ts"

const lost = () => noticeResult({ language: "py", code: "x" }, LOST_CELL_NOTICE)

describe("withStreamedOutputs", () => {
  it("puts the streamed outputs, a stream's chunks joined, before the notice, in text and outputs", () => {
    const window = makeTextWindow<SinkOutput>({ maxBytes: 1000, maxLines: 100 })
    window.addText("Stdout", "a\n")
    window.addText("Stdout", "b\n")
    window.addEntry({ kind: "rich", item: KernelOutput.Display({ bundle: { "text/plain": "shown" } }) })
    window.addText("Stderr", "warned\n")
    const result = withStreamedOutputs(lost(), window.finish())
    expect(result.outputs.map((output) => output._tag)).toEqual(["Stdout", "Display", "Stderr"])
    expect(result.outputs[0]).toMatchObject({ text: "a\nb\n" })
    expect(result.text).toMatch(/^a\nb\nshown\nwarned\n/)
    expect(result.text).toContain(LOST_CELL_NOTICE)
    expect(result.notice).toBe(LOST_CELL_NOTICE)
  })

  it("keeps a head and a tail with a marker past the budgets", () => {
    const window = makeTextWindow<SinkOutput>({ maxBytes: 20, maxLines: 100 })
    if (window.addText("Stdout", "h".repeat(50) + "t".repeat(50))) window.spill()
    const result = withStreamedOutputs(lost(), window.finish())
    expect(result.outputs).toEqual([
      expect.objectContaining({ _tag: "Stdout", text: "h".repeat(10) }),
      expect.objectContaining({ _tag: "TextOmitted", omittedBytes: 80, artifactUri: "" }),
      expect.objectContaining({ _tag: "Stdout", text: "t".repeat(10) })
    ])
    expect(result.text).toContain("80 bytes omitted; the full output was lost with its runner")
  })

  it("leaves an answer alone when nothing streamed", () => {
    const answer = lost()
    expect(withStreamedOutputs(answer, makeTextWindow<SinkOutput>({ maxBytes: 10, maxLines: 10 }).finish())).toBe(answer)
  })
})
