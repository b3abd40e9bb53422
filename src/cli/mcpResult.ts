/**
 * An eval call's answer as an MCP tool result: a text block with the rendered output
 * (status lines and notices included), an image block per PNG/JPEG, `isError` for a
 * cell that failed, was cancelled, timed out or was killed, and `structuredContent`
 * with the `EvalResult`. The structured copy leaves the base64 image data out, since
 * the image blocks already carry it: `images` lists each image's type and size in the
 * order of the image blocks, and inside `outputs` an image payload is replaced by the
 * same short description (`[image/png 64x64, 1.2 KB]`).
 *
 * A call that cannot run at all (bad params, no Python, a bad cwd) is a result too,
 * with `isError` and the sentence that says what to fix, so the agent can act on it; it
 * has no `structuredContent`, since that must fit the tool's `outputSchema`.
 *
 * `EVAL_OUTPUT_SCHEMA` is that schema: one entry per `EvalResult` field (the type makes
 * a new field a compile error until it is described here), required as in the type.
 */
import { McpSchema } from "effect/ai"
import { Buffer } from "node:buffer"
import type { MimeBundle } from "../kernel/Frame.ts"
import { imagePlaceholder, type ImagePayload } from "../render/Mime.ts"
import type { EvalResult } from "../services/EvalTool.ts"
import type { SinkOutput } from "../services/OutputSink.ts"
import { cellSucceeded, type TaggedFailure } from "./exitCodes.ts"

/** The text of a cell that printed nothing and ended normally. */
export const NO_OUTPUT_TEXT = "(no output)"

const IMAGE_TYPES: ReadonlyArray<ImagePayload["mimeType"]> = ["image/png", "image/jpeg"]

const withoutImageData = (bundle: MimeBundle): MimeBundle => {
  const images = IMAGE_TYPES.filter((type) => typeof bundle[type] === "string")
  if (images.length === 0) return bundle
  const copy: Record<string, unknown> = { ...bundle }
  for (const mimeType of images) copy[mimeType] = imagePlaceholder({ mimeType, data: bundle[mimeType] as string })
  return copy
}

const compactOutput = (output: SinkOutput): unknown =>
  output._tag === "Display" || output._tag === "Result" ? { ...output, bundle: withoutImageData(output.bundle) } : output

const STRING = { type: "string" } as const
const BOOLEAN = { type: "boolean" } as const
const NUMBER = { type: "number" } as const

const RESULT_PROPERTIES: { readonly [K in keyof EvalResult]-?: Readonly<Record<string, unknown>> } = {
  language: { ...STRING, description: "The cell's language." },
  title: { ...STRING, description: "The label the call gave the cell." },
  status: { type: "string", enum: ["ok", "error"], description: "error when the cell raised, was cancelled, timed out or was killed." },
  cancelled: { ...BOOLEAN, description: "The cell was interrupted (a timeout or the client's cancel)." },
  timedOut: { ...BOOLEAN, description: "The cell ran out of its timeout." },
  killed: { ...BOOLEAN, description: "The kernel ignored the interrupt and was killed; the next cell starts fresh." },
  executionCount: { ...NUMBER, description: "The kernel's execution counter after the cell." },
  outputs: {
    type: "array",
    description: "The retained outputs in order; each has a _tag (Stdout, Stderr, Display, Result, Status, Error, TextOmitted, OutputsOmitted).",
    items: { type: "object", properties: { _tag: STRING }, required: ["_tag"] }
  },
  text: { ...STRING, description: "The rendered text an agent reads, notices included." },
  images: {
    type: "array",
    description: "The images of the result's image blocks, in order, without their data.",
    items: { type: "object", properties: { mimeType: STRING, description: STRING }, required: ["mimeType", "description"] }
  },
  error: {
    type: "object",
    description: "The exception the cell raised.",
    properties: { ename: STRING, evalue: STRING, traceback: { type: "array", items: STRING } },
    required: ["ename", "evalue", "traceback"]
  },
  truncation: {
    type: "object",
    description: "How the text was cut; artifactUri (readable with resources/read) holds all of it.",
    properties: {
      totalBytes: NUMBER,
      totalLines: NUMBER,
      shownBytes: NUMBER,
      shownLines: NUMBER,
      omittedBytes: NUMBER,
      omittedLines: NUMBER,
      artifactId: STRING,
      artifactUri: STRING,
      artifactError: STRING
    },
    required: ["totalBytes", "totalLines", "shownBytes", "shownLines", "omittedBytes", "omittedLines", "artifactId", "artifactUri"]
  },
  artifactIds: { type: "array", items: STRING, description: "The artifacts the cell produced; read each as artifact://<id>." },
  notice: { ...STRING, description: "Why the cell did not end normally, when it did not." },
  retried: { type: "boolean", enum: [true], description: "The kernel died during the cell and the cell ran again: its side effects may have happened twice." },
  kernelExit: {
    type: "object",
    description: "How the kernel process ended when it died during the cell (twice, for a retried cell that failed).",
    properties: { code: { type: ["number", "null"] }, signal: { type: ["string", "null"] } },
    required: ["code", "signal"]
  },
  durationMs: { ...NUMBER, description: "Wall time of the call in milliseconds." }
}

const OPTIONAL_FIELDS: ReadonlySet<keyof EvalResult> = new Set(["title", "error", "truncation", "notice", "retried", "kernelExit"])

/** The JSON Schema of the `eval` tool's `structuredContent`. */
export const EVAL_OUTPUT_SCHEMA: Readonly<Record<string, unknown>> = {
  type: "object",
  properties: RESULT_PROPERTIES,
  required: Object.keys(RESULT_PROPERTIES).filter((key) => !OPTIONAL_FIELDS.has(key as keyof EvalResult))
}

/** The `EvalResult` for `structuredContent`: everything but the image data. */
export const structuredResult = (result: EvalResult): Record<string, unknown> => ({
  ...result,
  outputs: result.outputs.map(compactOutput),
  images: result.images.map((image) => ({ mimeType: image.mimeType, description: imagePlaceholder(image) }))
})

/** A finished cell as a tool result. */
export const cellToolResult = (result: EvalResult): McpSchema.CallToolResult =>
  new McpSchema.CallToolResult({
    content: [
      McpSchema.TextContent.make({ type: "text", text: result.text.length > 0 ? result.text : NO_OUTPUT_TEXT }),
      ...result.images.map((image) =>
        McpSchema.ImageContent.make({ type: "image", data: new Uint8Array(Buffer.from(image.data, "base64")), mimeType: image.mimeType })
      )
    ],
    structuredContent: structuredResult(result),
    isError: !cellSucceeded(result)
  })

/** A call that could not run, as a tool result the agent reads. */
export const failureToolResult = (error: TaggedFailure): McpSchema.CallToolResult =>
  new McpSchema.CallToolResult({
    content: [McpSchema.TextContent.make({ type: "text", text: error.message })],
    isError: true
  })
