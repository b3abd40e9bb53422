/**
 * Wire frames exchanged with the runner, one JSON object per NDJSON line: the one source
 * of the protocol. PROTOCOL.md describes it for runner authors; a test holds its frame
 * tables equal to these schemas.
 * Host -> runner: execute requests, the exit request, bridge results, complete and inspect
 * requests, snapshot and restore requests.
 * Runner -> host: started, stdout, stderr, display, result, error, done, bridge, complete and
 * inspect replies, snapshot chunks and the ends of snapshots and restores.
 */
import { Effect, Result, Schema } from "effect"

/** A MIME bundle: MIME type -> value (strings, base64 for binary types, JSON for `application/json`). */
export const MimeBundle = Schema.Record(Schema.String, Schema.Unknown)
/** A MIME bundle as decoded. */
export type MimeBundle = typeof MimeBundle.Type

/** The MIME type under which the runner ships structured status events. */
export const STATUS_MIME = "application/x-veyyon-status"

/** The status op of an egress decision: only the host's egress proxy reports one, never a runner. */
export const EGRESS_STATUS_OP = "egress"

/** Host -> runner: run `code`; `cwd` and `env` (a null value unsets the variable) are applied first. */
export class ExecuteRequestFrame extends Schema.Class<ExecuteRequestFrame>("ExecuteRequestFrame")({
  id: Schema.String,
  code: Schema.String,
  silent: Schema.Boolean,
  storeHistory: Schema.Boolean,
  cwd: Schema.optional(Schema.String),
  env: Schema.optional(Schema.Record(Schema.String, Schema.NullOr(Schema.String)))
}) {}

/** Host -> runner: end the input; the requests read before it are answered, then the process exits with status 0. */
export class ExitRequestFrame extends Schema.Class<ExitRequestFrame>("ExitRequestFrame")({
  type: Schema.Literal("exit")
}) {}

/** The error half of a failed bridge call, raised in Python as an exception. */
export const BridgeErrorValue = Schema.Struct({ name: Schema.String, message: Schema.String })

/** Host -> runner: the answer to one `bridge` call. */
export class BridgeResultFrame extends Schema.Class<BridgeResultFrame>("BridgeResultFrame")({
  type: Schema.Literal("bridge_result"),
  callId: Schema.String,
  ok: Schema.Boolean,
  value: Schema.optional(Schema.Unknown),
  error: Schema.optional(BridgeErrorValue)
}) {}

/**
 * Host -> runner: the completions for the token before `cursorPos` (in code points) of
 * `code`. Answered beside a running cell, never counted as one.
 */
export class CompleteRequestFrame extends Schema.Class<CompleteRequestFrame>("CompleteRequestFrame")({
  type: Schema.Literal("complete"),
  id: Schema.String,
  code: Schema.String,
  cursorPos: Schema.Number
}) {}

/** Host -> runner: what the name at `cursorPos` of `code` is (`obj?`; detail level 1 is `obj??`, with source). */
export class InspectRequestFrame extends Schema.Class<InspectRequestFrame>("InspectRequestFrame")({
  type: Schema.Literal("inspect"),
  id: Schema.String,
  code: Schema.String,
  cursorPos: Schema.Number,
  detailLevel: Schema.Literals([0, 1])
}) {}

/**
 * Host -> runner: save the session's user state. Run between cells in request order; it
 * yields (answering `snapshot_done` with `status: "yielded"`) to an execute request that
 * arrives before it is done. `budget` bounds the whole payload and `valueBudget` one value,
 * in bytes; `known` is the digest of the payload the host holds (`unchanged` when equal).
 */
export class SnapshotRequestFrame extends Schema.Class<SnapshotRequestFrame>("SnapshotRequestFrame")({
  type: Schema.Literal("snapshot"),
  id: Schema.String,
  budget: Schema.Number,
  valueBudget: Schema.Number,
  known: Schema.optional(Schema.String)
}) {}

/**
 * Host -> runner: one piece of a payload to restore (base64), in order; the piece with
 * `more: false` ends it, and the runner then restores it before any later request and
 * answers `restore_done`. `executionCount` is the count the restored state was saved at.
 */
export class RestoreRequestFrame extends Schema.Class<RestoreRequestFrame>("RestoreRequestFrame")({
  type: Schema.Literal("restore"),
  id: Schema.String,
  data: Schema.String,
  more: Schema.Boolean,
  executionCount: Schema.optional(Schema.Number)
}) {}

/** Every frame the host sends. */
export const HostFrame = Schema.Union([
  ExecuteRequestFrame,
  ExitRequestFrame,
  BridgeResultFrame,
  CompleteRequestFrame,
  InspectRequestFrame,
  SnapshotRequestFrame,
  RestoreRequestFrame
])
/** Every frame the host sends, as a value. */
export type HostFrame = typeof HostFrame.Type

/** Runner -> host: a request began executing. */
export const StartedFrame = Schema.Struct({
  type: Schema.Literal("started"),
  id: Schema.String
})
/** A decoded `started` frame (a plain object). */
export type StartedFrame = typeof StartedFrame.Type

/** Runner -> host: text the cell wrote to stdout (including fd 1 of its children). */
export const StdoutFrame = Schema.Struct({
  type: Schema.Literal("stdout"),
  id: Schema.String,
  data: Schema.String
})
/** A decoded `stdout` frame (a plain object). */
export type StdoutFrame = typeof StdoutFrame.Type

/** Runner -> host: text the cell wrote to `sys.stderr`. */
export const StderrFrame = Schema.Struct({
  type: Schema.Literal("stderr"),
  id: Schema.String,
  data: Schema.String
})
/** A decoded `stderr` frame (a plain object). */
export type StderrFrame = typeof StderrFrame.Type

/** Runner -> host: a `display()` call, a figure, or a status event. */
export const DisplayFrame = Schema.Struct({
  type: Schema.Literal("display"),
  id: Schema.String,
  bundle: MimeBundle
})
/** A decoded `display` frame (a plain object). */
export type DisplayFrame = typeof DisplayFrame.Type

/** Runner -> host: the value of the cell's last expression. */
export const ResultFrame = Schema.Struct({
  type: Schema.Literal("result"),
  id: Schema.String,
  bundle: MimeBundle
})
/** A decoded `result` frame (a plain object). */
export type ResultFrame = typeof ResultFrame.Type

/** Runner -> host: an exception the cell raised. */
export class ErrorFrame extends Schema.Class<ErrorFrame>("ErrorFrame")({
  type: Schema.Literal("error"),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  ename: Schema.String,
  evalue: Schema.String,
  traceback: Schema.Array(Schema.String)
}) {}

/** Runner -> host: the request finished; always the last frame of a request. */
export const DoneFrame = Schema.Struct({
  type: Schema.Literal("done"),
  id: Schema.String,
  status: Schema.Literals(["ok", "error"]),
  executionCount: Schema.Number,
  cancelled: Schema.Boolean.pipe(Schema.withDecodingDefault(Effect.succeed(false)))
})
/** A decoded `done` frame (a plain object). */
export type DoneFrame = typeof DoneFrame.Type

/** Runner -> host: the cell asks the host to run `agent`, `completion` or `parallel`. */
export class BridgeFrame extends Schema.Class<BridgeFrame>("BridgeFrame")({
  type: Schema.Literal("bridge"),
  id: Schema.String,
  callId: Schema.String,
  method: Schema.String,
  params: Schema.Unknown.pipe(Schema.withDecodingDefault(Effect.succeed({})))
}) {}

/** Runner -> host: the answer to a `complete` request; `code[cursorStart:cursorEnd]` is what a match replaces. */
export class CompleteReplyFrame extends Schema.Class<CompleteReplyFrame>("CompleteReplyFrame")({
  type: Schema.Literal("complete_reply"),
  id: Schema.String,
  matches: Schema.Array(Schema.String),
  cursorStart: Schema.Number,
  cursorEnd: Schema.Number,
  /** Why there are no matches, when looking them up failed. */
  error: Schema.optional(Schema.String)
}) {}

/** Runner -> host: the answer to an `inspect` request; `bundle` holds `text/plain` when `found`. */
export class InspectReplyFrame extends Schema.Class<InspectReplyFrame>("InspectReplyFrame")({
  type: Schema.Literal("inspect_reply"),
  id: Schema.String,
  found: Schema.Boolean,
  bundle: MimeBundle,
  error: Schema.optional(Schema.String)
}) {}

/** A name left out of a snapshot or a restore, and why (`socket objects cannot be saved`). */
export const SkippedName = Schema.Struct({ name: Schema.String, reason: Schema.String })
/** A decoded skipped name. */
export type SkippedName = typeof SkippedName.Type

/** Runner -> host: one piece (base64, at most 4 MiB decoded) of a snapshot's payload, in order. */
export const SnapshotChunkFrame = Schema.Struct({
  type: Schema.Literal("snapshot_chunk"),
  id: Schema.String,
  data: Schema.String
})

/**
 * Runner -> host: the end of a snapshot. `saved`: its chunks are the payload, whose SHA-256
 * is `digest` (hex) and length `bytes`; `unchanged`: the payload's digest equals the
 * request's `known`, no chunks; `yielded`: a cell came first, nothing saved; `failed`: nothing
 * saved, `error` says why. `names` are the names saved, `skipped` those left out.
 */
export const SnapshotDoneFrame = Schema.Struct({
  type: Schema.Literal("snapshot_done"),
  id: Schema.String,
  status: Schema.Literals(["saved", "unchanged", "yielded", "failed"]),
  digest: Schema.optional(Schema.String),
  bytes: Schema.optional(Schema.Number),
  names: Schema.Array(Schema.String),
  skipped: Schema.Array(SkippedName),
  error: Schema.optional(Schema.String)
})
/** A decoded `snapshot_done` frame. */
export type SnapshotDoneFrame = typeof SnapshotDoneFrame.Type

/**
 * Runner -> host: the end of a restore: the names that came back and those that did not.
 * `error` means the restore failed as a whole (the payload could not be read at all).
 */
export const RestoreDoneFrame = Schema.Struct({
  type: Schema.Literal("restore_done"),
  id: Schema.String,
  restored: Schema.Array(Schema.String),
  skipped: Schema.Array(SkippedName),
  error: Schema.optional(Schema.String)
})
/** A decoded `restore_done` frame. */
export type RestoreDoneFrame = typeof RestoreDoneFrame.Type

/** Every frame the runner sends. */
export const RunnerFrame = Schema.Union([
  StartedFrame,
  StdoutFrame,
  StderrFrame,
  DisplayFrame,
  ResultFrame,
  ErrorFrame,
  DoneFrame,
  BridgeFrame,
  CompleteReplyFrame,
  InspectReplyFrame,
  SnapshotChunkFrame,
  SnapshotDoneFrame,
  RestoreDoneFrame
])
/** Every frame the runner sends, as a value. */
export type RunnerFrame = typeof RunnerFrame.Type

/** Decodes a line through the schema alone (the path for a line that is not JSON, whose error it reports). */
export const decodeRunnerLineWithSchema = Schema.decodeUnknownResult(Schema.fromJsonString(RunnerFrame))
const decodeRunnerValueWithSchema = Schema.decodeUnknownResult(RunnerFrame)

const isString = (value: unknown): value is string => typeof value === "string"

const isBundle = (value: unknown): value is MimeBundle =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const isSkipped = (value: unknown): value is SkippedName =>
  typeof value === "object" && value !== null && isString((value as SkippedName).name) && isString((value as SkippedName).reason)

const isStringArray = (value: unknown): value is ReadonlyArray<string> => Array.isArray(value) && value.every(isString)

const SNAPSHOT_STATUSES: ReadonlyArray<unknown> = ["saved", "unchanged", "yielded", "failed"]

/** The end of a snapshot (one per cell) or of a restore, built by hand when it has exactly the expected shape. */
const decodeStateEnd = (frame: Record<string, unknown>, id: string): RunnerFrame | undefined => {
  const { skipped, error } = frame
  if (!Array.isArray(skipped) || !skipped.every(isSkipped) || (error !== undefined && !isString(error))) return undefined
  const rest = error === undefined ? {} : { error }
  if (frame.type === "restore_done") {
    return isStringArray(frame.restored) ? { type: "restore_done", id, restored: frame.restored, skipped, ...rest } : undefined
  }
  const { status, digest, bytes, names } = frame
  if (!SNAPSHOT_STATUSES.includes(status) || !isStringArray(names)) return undefined
  if ((digest !== undefined && !isString(digest)) || (bytes !== undefined && typeof bytes !== "number")) return undefined
  return {
    type: "snapshot_done",
    id,
    status: status as SnapshotDoneFrame["status"],
    names,
    skipped,
    ...(digest === undefined ? {} : { digest }),
    ...(bytes === undefined ? {} : { bytes }),
    ...rest
  }
}

/**
 * The frames that arrive by the thousand (stream text, displays, start and end of a cell,
 * the end of the snapshot after each cell, a snapshot's chunks), built as plain objects without the schema interpreter when they have exactly the expected
 * shape; anything else returns undefined and goes through the schema.
 */
const decodeHotFrame = (value: unknown): RunnerFrame | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const frame = value as Record<string, unknown>
  const id = frame.id
  if (!isString(id)) return undefined
  switch (frame.type) {
    case "stdout":
    case "stderr":
      return isString(frame.data) ? { type: frame.type, id, data: frame.data } : undefined
    case "display":
    case "result":
      return isBundle(frame.bundle) ? { type: frame.type, id, bundle: frame.bundle } : undefined
    case "started":
      return { type: "started", id }
    case "snapshot_chunk":
      return isString(frame.data) ? { type: "snapshot_chunk", id, data: frame.data } : undefined
    case "snapshot_done":
    case "restore_done":
      return decodeStateEnd(frame, id)
    case "done": {
      const { status, executionCount, cancelled } = frame
      if ((status !== "ok" && status !== "error") || typeof executionCount !== "number") return undefined
      if (cancelled !== undefined && typeof cancelled !== "boolean") return undefined
      return { type: "done", id, status, executionCount, cancelled: cancelled === true }
    }
    default:
      return undefined
  }
}

const CHUNK_LINE = /^\{\s*"type"\s*:\s*"snapshot_chunk"\s*,\s*"id"\s*:\s*"([A-Za-z0-9_-]{1,64})"\s*,\s*"data"\s*:\s*"/
const CHUNK_END = /"\s*\}\s*$/
const BASE64 = /^[A-Za-z0-9+/=]*$/

/**
 * A snapshot chunk's line read without the JSON parser: its base64 data is most of a
 * payload's bytes, and a sliced string of it is all a chunk needs. Undefined for any
 * other line, or a chunk line in another shape (which the parser then reads).
 */
export const decodeChunkLine = (line: string): RunnerFrame | undefined => {
  const head = CHUNK_LINE.exec(line.length > 256 ? line.slice(0, 256) : line)
  if (head === null) return undefined
  const end = CHUNK_END.exec(line.slice(-16))
  if (end === null) return undefined
  const data = line.slice(head[0].length, line.length - 16 + end.index)
  if (data.length > 4096 ? !BASE64.test(data.slice(0, 64)) || data.includes("\\") || data.includes('"') : !BASE64.test(data)) return undefined
  return { type: "snapshot_chunk", id: head[1]!, data }
}

/** Decodes a parsed NDJSON value into a runner frame: the hot frames by hand, the rest by the schema. */
export const decodeRunnerValue = (value: unknown): Result.Result<RunnerFrame, Schema.SchemaError> => {
  const hot = decodeHotFrame(value)
  return hot === undefined ? decodeRunnerValueWithSchema(value) : Result.succeed(hot)
}

/**
 * Encodes a host frame as one NDJSON line, newline included. Host frames are class
 * instances validated when built and their encoded form is their own fields, so the
 * line is their JSON (the tests hold it equal to the schema's encoding).
 */
export const encodeHostLine = (frame: HostFrame): string => JSON.stringify(frame) + "\n"
