/**
 * What one executed cell produces, in order, ending with exactly one `Done`: a schema (so
 * outputs can cross a wire as they are) and the constructors and matchers of its type.
 */
import { Data, Schema } from "effect"
import { MimeBundle } from "./Frame.ts"

/** How a cell ended. */
export const CellOutcome = Schema.Struct({
  status: Schema.Literals(["ok", "error"]),
  executionCount: Schema.Finite,
  /** The cell was stopped by SIGINT (timeout, cancel) rather than finishing by itself. */
  cancelled: Schema.Boolean,
  /** The watchdog's budget ran out. */
  timedOut: Schema.Boolean,
  /** The kernel did not stop after SIGINT and was killed; the next call gets a fresh kernel. */
  killed: Schema.Boolean,
  /** A sentence for the caller when the cell did not end normally. */
  notice: Schema.optionalKey(Schema.String),
  /** The kernel died during the cell and the cell ran again in a fresh one (its side effects may have happened twice). */
  retried: Schema.optionalKey(Schema.Boolean),
  /** How the kernel ended when it died during the cell's last attempt (the cell then has no result of its own). */
  kernelExit: Schema.optionalKey(Schema.Struct({ code: Schema.NullOr(Schema.Finite), signal: Schema.NullOr(Schema.String) }))
})

/** How a cell ended. */
export type CellOutcome = typeof CellOutcome.Type

/** What a running cell emits before it ends (every event but `Done`), as a schema. */
export const CellEventSchema = Schema.Union([
  Schema.TaggedStruct("Stdout", { text: Schema.String }),
  Schema.TaggedStruct("Stderr", { text: Schema.String }),
  Schema.TaggedStruct("Display", { bundle: MimeBundle }),
  Schema.TaggedStruct("Result", { bundle: MimeBundle }),
  Schema.TaggedStruct("Status", { op: Schema.String, fields: Schema.Record(Schema.String, Schema.Unknown) }),
  Schema.TaggedStruct("Error", { ename: Schema.String, evalue: Schema.String, traceback: Schema.Array(Schema.String) })
])

/** One event of a running cell, as a schema. */
export const KernelOutputSchema = Schema.Union([...CellEventSchema.members, Schema.TaggedStruct("Done", CellOutcome.fields)])

/** One event of a running cell. */
export type KernelOutput = typeof KernelOutputSchema.Type
/** Constructors and matchers of `KernelOutput`. */
export const KernelOutput = Data.taggedEnum<KernelOutput>()
