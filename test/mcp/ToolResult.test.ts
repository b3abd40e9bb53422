/**
 * EvalResult -> MCP tool result, without a server: text, image blocks, isError, and a
 * structured copy that does not repeat the image data.
 */
import { Schema } from "effect"
import { McpSchema } from "effect/ai"
import { describe, expect, it } from "vitest"
import { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import type { EvalResult } from "../../src/services/tool/EvalTool.ts"
import { InvalidEvalParams } from "../../src/services/tool/EvalTool.ts"
import { cellToolJson, cellToolResult, failureToolJson, failureToolResult, NO_OUTPUT_TEXT } from "../../src/mcp/ToolResult.ts"
import { EvalOutputSchema, structuredResult } from "../../src/services/tool/EvalSchema.ts"
import { evalResult } from "../support/evalResult.ts"

const PNG_1X1 =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"

const result = (over: Partial<EvalResult>): EvalResult => evalResult({ executionCount: 3, durationMs: 5, ...over })

const encode = Schema.encodeSync(McpSchema.CallToolResult)

describe("MCP tool results", () => {
  it("an ok cell is its rendered text, not an error", () => {
    const encoded = encode(cellToolResult(result({ text: "42" })))
    expect(encoded.content).toEqual([{ type: "text", text: "42" }])
    expect(encoded.isError).toBe(false)
    expect(encoded.structuredContent).toMatchObject({ status: "ok", executionCount: 3, text: "42" })
  })

  it("a cell with no output still answers with a text block", () => {
    expect(encode(cellToolResult(result({}))).content).toEqual([{ type: "text", text: NO_OUTPUT_TEXT }])
  })

  it("error, cancelled, timed-out and killed cells are isError", () => {
    for (const over of [{ status: "error" as const }, { cancelled: true }, { timedOut: true, cancelled: true }, { killed: true }]) {
      expect(encode(cellToolResult(result({ text: "x", ...over }))).isError).toBe(true)
    }
  })

  it("each image is an image block; the structured copy describes it instead of repeating its data", () => {
    const bundle = { "image/png": PNG_1X1, "text/plain": "<Figure>" }
    const encoded = encode(cellToolResult(result({
      text: "<Figure>",
      outputs: [KernelOutput.Display({ bundle })],
      images: [{ mimeType: "image/png", data: PNG_1X1 }]
    })))
    expect(encoded.content[1]).toEqual({ type: "image", mimeType: "image/png", data: PNG_1X1 })
    const structured = JSON.stringify(encoded.structuredContent)
    expect(structured).not.toContain(PNG_1X1)
    expect(structuredResult(result({ images: [{ mimeType: "image/png", data: PNG_1X1 }] })).images).toEqual([
      { mimeType: "image/png", description: "[image/png 1x1, 69 B]" }
    ])
    expect(encoded.structuredContent).toMatchObject({
      outputs: [{ _tag: "Display", bundle: { "image/png": "[image/png 1x1, 69 B]", "text/plain": "<Figure>" } }]
    })
  })

  it("a call that cannot run is isError with the sentence to act on", () => {
    const error = new InvalidEvalParams({ problem: "code is missing" })
    const encoded = encode(failureToolResult(error))
    expect(encoded).toMatchObject({
      isError: true,
      content: [{ type: "text", text: "invalid eval params: code is missing" }]
    })
    expect(encoded.structuredContent).toBeUndefined()
  })
})

describe("tool results built in their wire form", () => {
  const wire = (value: unknown) => JSON.parse(JSON.stringify(value))
  const cells: ReadonlyArray<EvalResult> = [
    result({ text: "42" }),
    result({}),
    result({ text: "x", status: "error", error: { ename: "ValueError", evalue: "x", traceback: ["tb"] } }),
    result({ text: "x", cancelled: true, notice: "interrupted" }),
    result({
      text: "<Figure>",
      outputs: [KernelOutput.Display({ bundle: { "image/png": PNG_1X1, "text/plain": "<Figure>" } })],
      images: [{ mimeType: "image/png", data: PNG_1X1 }, { mimeType: "image/jpeg", data: `${PNG_1X1.slice(0, 40)}\n${PNG_1X1.slice(40)}` }]
    })
  ]

  it("a cell's is what encoding its CallToolResult gives, on the wire", () => {
    for (const cell of cells) expect(wire(cellToolJson(cell))).toEqual(wire(encode(cellToolResult(cell))))
  })

  it("an image's base64 goes out as the schema writes it (line breaks dropped)", () => {
    expect(cellToolJson(cells[4]!).content[2]).toEqual({ type: "image", mimeType: "image/jpeg", data: PNG_1X1 })
  })

  it("a call that could not run is what encoding its CallToolResult gives", () => {
    const error = new InvalidEvalParams({ problem: "code is missing" })
    expect(wire(failureToolJson(error))).toEqual(wire(encode(failureToolResult(error))))
  })
})

describe("the structured result and its schema", () => {
  const decode = Schema.decodeUnknownSync(EvalOutputSchema)
  const results: ReadonlyArray<EvalResult> = [
    result({ text: "42" }),
    result({
      status: "error",
      title: "boom",
      outputs: [KernelOutput.Stdout({ text: "a\n" }), KernelOutput.Error({ ename: "ValueError", evalue: "x", traceback: ["tb"] })],
      error: { ename: "ValueError", evalue: "x", traceback: ["tb"] },
      notice: "the kernel died",
      retried: true,
      kernelExit: { code: null, signal: "SIGKILL" },
      truncation: {
        totalBytes: 10,
        totalLines: 2,
        shownBytes: 5,
        shownLines: 1,
        omittedBytes: 5,
        omittedLines: 1,
        artifactId: "a1",
        artifactUri: "artifact://a1",
        artifactError: "disk full"
      },
      artifactIds: ["a1"]
    }),
    result({ outputs: [KernelOutput.Display({ bundle: { "image/png": PNG_1X1 } })], images: [{ mimeType: "image/png", data: PNG_1X1 }] })
  ]

  it("every structured result decodes with EvalOutputSchema, unchanged", () => {
    for (const each of results) {
      const structured = structuredResult(each)
      expect(decode(structured)).toEqual(structured)
      expect(decode(structuredResult(each, { withImageData: true }))).toEqual(structuredResult(each, { withImageData: true }))
    }
  })

  it("a result missing a required field or with a wrong status does not", () => {
    const { durationMs: _, ...withoutDuration } = structuredResult(results[0]!)
    expect(() => decode(withoutDuration)).toThrow(/durationMs/)
    expect(() => decode({ ...structuredResult(results[0]!), status: "maybe" })).toThrow(/status/)
  })

  it("carries the image data only when asked", () => {
    expect(structuredResult(results[2]!).images).toEqual([{ mimeType: "image/png", description: "[image/png 1x1, 69 B]" }])
    expect(structuredResult(results[2]!, { withImageData: true }).images).toEqual([
      { mimeType: "image/png", description: "[image/png 1x1, 69 B]", data: PNG_1X1 }
    ])
  })
})
