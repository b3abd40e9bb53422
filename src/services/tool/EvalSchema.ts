/**
 * The `eval` tool's params and structured result as Schemas: the one source of the MCP
 * `inputSchema` and `outputSchema` and of the `effect/ai` tool's parameters and success.
 * `language` is any string here; the tool narrows it to the enabled backends.
 */
import { Schema } from "effect"
import type { MimeBundle } from "../../kernel/Frame.ts"
import { imagePlaceholder, type ImagePayload } from "../../render/Mime.ts"
import { DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS } from "./CellTimeout.ts"
import type { EvalResult } from "./EvalResult.ts"
import { type SinkOutput, Truncation } from "../output/OutputSink.ts"

/** The params of one call, as agents send them. */
export const EvalParamsSchema = Schema.Struct({
  language: Schema.String.annotate({ description: "The cell's language." }),
  code: Schema.String.annotate({ description: "The cell's source code." }),
  title: Schema.optionalKey(Schema.String.annotate({ description: "A short label for the cell, shown to the user." })),
  timeout: Schema.optionalKey(
    Schema.Finite.annotate({ description: `Seconds the cell may run (clamped to ${MIN_TIMEOUT_SECONDS}..${MAX_TIMEOUT_SECONDS}).` })
  ),
  reset: Schema.optionalKey(Schema.Boolean.annotate({ description: "Start a fresh kernel for this language before running." }))
})

/** How to send each param right: the end of the sentence a wrong value gets. */
export const EVAL_PARAM_HINTS = {
  language: "pass the cell's language as a string, e.g. \"py\"",
  code: "pass the cell's source code as a string",
  title: "pass a short label as a string, or leave it out",
  timeout: "pass a number of seconds, or leave it out",
  reset: "pass true or false, or leave it out"
} satisfies Record<keyof typeof EvalParamsSchema.fields, string>

/** The params as the tool first reads them: the schema's, with any `timeout` let through to be clamped, or refused in its own sentence. */
export const EvalParamsInput = Schema.Struct({ ...EvalParamsSchema.fields, timeout: Schema.optionalKey(Schema.Unknown) })

const TaggedOutput = Schema.StructWithRest(Schema.Struct({ _tag: Schema.String }), [Schema.Record(Schema.String, Schema.Unknown)])

/** One entry per `EvalResult` field: a new field is a compile error until it is described here. */
const outputFields = {
  language: Schema.String.annotate({ description: "The cell's language." }),
  title: Schema.optionalKey(Schema.String.annotate({ description: "The label the call gave the cell." })),
  status: Schema.Literals(["ok", "error"]).annotate({ description: "error when the cell raised, was cancelled, timed out or was killed." }),
  cancelled: Schema.Boolean.annotate({ description: "The cell was interrupted (a timeout or the client's cancel)." }),
  timedOut: Schema.Boolean.annotate({ description: "The cell ran out of its timeout." }),
  killed: Schema.Boolean.annotate({ description: "The kernel ignored the interrupt and was killed; the next cell starts fresh." }),
  executionCount: Schema.Finite.annotate({ description: "The kernel's execution counter after the cell." }),
  outputs: Schema.Array(TaggedOutput).annotate({
    description: "The retained outputs in order; each has a _tag (Stdout, Stderr, Display, Result, Status, Error, TextOmitted, OutputsOmitted)."
  }),
  text: Schema.String.annotate({ description: "The rendered text an agent reads, notices included." }),
  images: Schema.Array(Schema.Struct({
    mimeType: Schema.String,
    description: Schema.String,
    data: Schema.optionalKey(Schema.String.annotate({ description: "Base64; left out where the answer carries the image elsewhere (MCP's image blocks)." }))
  })).annotate({ description: "The images the cell displayed, in order, each described (type, size)." }),
  error: Schema.optionalKey(
    Schema.Struct({ ename: Schema.String, evalue: Schema.String, traceback: Schema.Array(Schema.String) }).annotate({
      description: "The exception the cell raised."
    })
  ),
  truncation: Schema.optionalKey(
    Truncation.annotate({ description: "How the text was cut; artifactUri (readable with resources/read) holds all of it." })
  ),
  artifactIds: Schema.Array(Schema.String).annotate({ description: "The artifacts the cell produced; read each as artifact://<id>." }),
  notice: Schema.optionalKey(Schema.String.annotate({ description: "Why the cell did not end normally, when it did not." })),
  retried: Schema.optionalKey(
    Schema.Literal(true).annotate({ description: "The kernel died during the cell and the cell ran again: its side effects may have happened twice." })
  ),
  kernelExit: Schema.optionalKey(
    Schema.Struct({ code: Schema.NullOr(Schema.Finite), signal: Schema.NullOr(Schema.String) }).annotate({
      description: "How the kernel process ended when it died during the cell (twice, for a retried cell that failed)."
    })
  ),
  durationMs: Schema.Finite.annotate({ description: "Wall time of the call in milliseconds." }),
  runner: Schema.optionalKey(Schema.String.annotate({ description: "The cluster runner that answered, as host:port, when a cluster did." }))
} satisfies Record<keyof EvalResult, Schema.Top>

/** A cell's result as structured data: the `EvalResult` with its images described, their data optional. */
export const EvalOutputSchema = Schema.Struct(outputFields)

/** The structured result's type. */
export type EvalOutput = typeof EvalOutputSchema.Type

const IMAGE_TYPES: ReadonlyArray<ImagePayload["mimeType"]> = ["image/png", "image/jpeg"]

const withoutImageData = (bundle: MimeBundle): MimeBundle => {
  const images = IMAGE_TYPES.filter((type) => typeof bundle[type] === "string")
  if (images.length === 0) return bundle
  const copy: Record<string, unknown> = { ...bundle }
  for (const mimeType of images) copy[mimeType] = imagePlaceholder({ mimeType, data: bundle[mimeType] as string })
  return copy
}

const compactOutput = (output: SinkOutput): EvalOutput["outputs"][number] =>
  output._tag === "Display" || output._tag === "Result" ? { ...output, bundle: withoutImageData(output.bundle) } : output

/**
 * An `EvalResult` as structured data: inside `outputs` an image payload is replaced by a
 * short description (`[image/png 64x64, 1.2 KB]`), and `images` lists each image's type and
 * description, with its base64 data only when `withImageData`.
 */
export const structuredResult = (result: EvalResult, options?: { readonly withImageData?: boolean }): EvalOutput => ({
  ...result,
  outputs: result.outputs.map(compactOutput),
  images: result.images.map((image) => ({
    mimeType: image.mimeType,
    description: imagePlaceholder(image),
    ...(options?.withImageData === true ? { data: image.data } : {})
  }))
})

/** The JSON Schema (draft 2020-12) of a Schema's encoded form, as MCP and model providers take it. */
export const jsonSchemaOf = (schema: Schema.Constraint): Record<string, unknown> => ({ ...Schema.toJsonSchemaDocument(schema).schema })

/** The params' JSON Schema with `language` narrowed to `languages` and the timeout's bounds and default. */
export const evalParamsJsonSchema = (languages: ReadonlyArray<string>): Record<string, unknown> => {
  const schema = jsonSchemaOf(EvalParamsSchema) as { properties: Record<string, Record<string, unknown>> }
  return {
    ...schema,
    properties: {
      ...schema.properties,
      language: { ...schema.properties.language, enum: [...languages] },
      timeout: { ...schema.properties.timeout, minimum: MIN_TIMEOUT_SECONDS, maximum: MAX_TIMEOUT_SECONDS, default: DEFAULT_TIMEOUT_SECONDS }
    },
    additionalProperties: false
  }
}
