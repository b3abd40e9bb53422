/**
 * A finished cell as the tool answers it, and whether it counts as a success.
 */
import { Schema } from "effect"
import { registeredBackends } from "../../backends/index.ts"
import { ImagePayload } from "../../render/Mime.ts"
import { SinkOutputSchema, Truncation } from "../output/OutputSink.ts"
import type { EvalLanguage } from "../config/Settings.ts"

/** What one call returns, as a schema (so a result crosses a wire, or a ledger, as it is). */
export const EvalResultSchema = Schema.Struct({
  language: Schema.Literals(registeredBackends().map((backend) => backend.id) as unknown as ReadonlyArray<EvalLanguage>),
  title: Schema.optionalKey(Schema.String),
  status: Schema.Literals(["ok", "error"]),
  cancelled: Schema.Boolean,
  timedOut: Schema.Boolean,
  killed: Schema.Boolean,
  executionCount: Schema.Finite,
  /** The retained outputs in order (text bounded, with omission markers). */
  outputs: Schema.Array(SinkOutputSchema),
  /** The rendered text an agent reads, notices included. */
  text: Schema.String,
  /** PNG and JPEG images the cell displayed. */
  images: Schema.Array(ImagePayload),
  /** The cell's exception, when it raised one. */
  error: Schema.optionalKey(Schema.Struct({ ename: Schema.String, evalue: Schema.String, traceback: Schema.Array(Schema.String) })),
  /** Present when the text was cut; the full text is in the artifact. */
  truncation: Schema.optionalKey(Truncation),
  artifactIds: Schema.Array(Schema.String),
  /** Why the cell did not end normally (timeout, kill, a kernel death and retry), when it did not. */
  notice: Schema.optionalKey(Schema.String),
  /** Present when the kernel died during the cell and the cell ran again: side effects may have happened twice. */
  retried: Schema.optionalKey(Schema.Literal(true)),
  /** How the kernel ended when it died during the cell's last attempt too (the `error` is then `KernelDied`). */
  kernelExit: Schema.optionalKey(Schema.Struct({ code: Schema.NullOr(Schema.Finite), signal: Schema.NullOr(Schema.String) })),
  durationMs: Schema.Finite,
  /** The cluster runner that answered (host:port), when a cluster did. */
  runner: Schema.optionalKey(Schema.String)
})

/** What one call returns. */
export type EvalResult = typeof EvalResultSchema.Type

/** Whether a finished cell counts as a success: it ended normally, without an error, a cancel, a timeout or a kill. */
export const cellSucceeded = (result: EvalResult): boolean =>
  result.status === "ok" && !result.cancelled && !result.timedOut && !result.killed
