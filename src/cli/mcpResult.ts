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
 * with `isError` and the sentence that says what to fix, so the agent can act on it.
 */
import { CallToolResult, ImageContent, TextContent } from "@effect/ai/McpSchema"
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

/** The `EvalResult` for `structuredContent`: everything but the image data. */
export const structuredResult = (result: EvalResult): Record<string, unknown> => ({
  ...result,
  outputs: result.outputs.map(compactOutput),
  images: result.images.map((image) => ({ mimeType: image.mimeType, description: imagePlaceholder(image) }))
})

/** A finished cell as a tool result. */
export const cellToolResult = (result: EvalResult): CallToolResult =>
  new CallToolResult({
    content: [
      TextContent.make({ text: result.text.length > 0 ? result.text : NO_OUTPUT_TEXT }),
      ...result.images.map((image) =>
        ImageContent.make({ data: new Uint8Array(Buffer.from(image.data, "base64")), mimeType: image.mimeType })
      )
    ],
    structuredContent: structuredResult(result),
    isError: !cellSucceeded(result)
  })

/** A call that could not run, as a tool result the agent reads. */
export const failureToolResult = (error: TaggedFailure): CallToolResult =>
  new CallToolResult({
    content: [TextContent.make({ text: error.message })],
    structuredContent: { error: { _tag: error._tag, message: error.message } },
    isError: true
  })
