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
 * `EVAL_OUTPUT_SCHEMA` is that schema, derived from `EvalOutputSchema`. `cellToolJson` and
 * `failureToolJson` build the same results already in their wire form (what encoding
 * `McpSchema.CallToolResult` gives), for the door's `tools/call`: no schema runs per call.
 */
import { McpSchema } from "effect/ai"
import { Buffer } from "node:buffer"
import type { EvalResult } from "../services/tool/EvalTool.ts"
import { EvalOutputSchema, jsonSchemaOf, structuredResult } from "../services/tool/EvalSchema.ts"
import { cellSucceeded } from "../services/tool/EvalResult.ts"

/** The text of a cell that printed nothing and ended normally. */
export const NO_OUTPUT_TEXT = "(no output)"

/** The JSON Schema of the `eval` tool's `structuredContent`. */
export const EVAL_OUTPUT_SCHEMA: Readonly<Record<string, unknown>> = jsonSchemaOf(EvalOutputSchema)

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
export const failureToolResult = (error: { readonly message: string }): McpSchema.CallToolResult =>
  new McpSchema.CallToolResult({
    content: [McpSchema.TextContent.make({ type: "text", text: error.message })],
    isError: true
  })

/** A tool result in its wire form, as `Schema.encode(McpSchema.CallToolResult)` gives it. */
export type ToolResultJson = typeof McpSchema.CallToolResult.Encoded

/** A finished cell as a tool result's wire form: `cellToolResult` encoded, built directly. */
export const cellToolJson = (result: EvalResult): ToolResultJson => ({
  content: [
    { type: "text", text: result.text.length > 0 ? result.text : NO_OUTPUT_TEXT },
    // Through bytes, as the schema does: a runner's base64 may carry line breaks or padding the wire form has not.
    ...result.images.map((image) => ({ type: "image" as const, data: Buffer.from(image.data, "base64").toString("base64"), mimeType: image.mimeType }))
  ],
  structuredContent: structuredResult(result),
  isError: !cellSucceeded(result)
})

/** A call that could not run, as a tool result's wire form: `failureToolResult` encoded, built directly. */
export const failureToolJson = (error: { readonly message: string }): ToolResultJson => ({
  content: [{ type: "text", text: error.message }],
  isError: true
})
