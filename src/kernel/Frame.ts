/**
 * Wire frames exchanged with the runner, one JSON object per NDJSON line.
 * Host -> runner: execute requests, the exit request, bridge results.
 * Runner -> host: started, stdout, stderr, display, result, error, done, bridge.
 */
import { Schema } from "effect"

/** A MIME bundle: MIME type -> value (strings, base64 for binary types, JSON for `application/json`). */
export const MimeBundle = Schema.Record({ key: Schema.String, value: Schema.Unknown })
/** A MIME bundle as decoded. */
export type MimeBundle = typeof MimeBundle.Type

/** The MIME type under which the runner ships structured status events. */
export const STATUS_MIME = "application/x-veyyon-status"

/** Host -> runner: run `code`; `cwd` and `env` are applied first. */
export class ExecuteRequestFrame extends Schema.Class<ExecuteRequestFrame>("ExecuteRequestFrame")({
  id: Schema.String,
  code: Schema.String,
  silent: Schema.Boolean,
  storeHistory: Schema.Boolean,
  cwd: Schema.optional(Schema.String),
  env: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String }))
}) {}

/** Host -> runner: end the process with status 0. */
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

/** Every frame the host sends. */
export const HostFrame = Schema.Union(ExecuteRequestFrame, ExitRequestFrame, BridgeResultFrame)
/** Every frame the host sends, as a value. */
export type HostFrame = typeof HostFrame.Type

/** Runner -> host: a request began executing. */
export class StartedFrame extends Schema.Class<StartedFrame>("StartedFrame")({
  type: Schema.Literal("started"),
  id: Schema.String
}) {}

/** Runner -> host: text the cell wrote to stdout (including fd 1 of its children). */
export class StdoutFrame extends Schema.Class<StdoutFrame>("StdoutFrame")({
  type: Schema.Literal("stdout"),
  id: Schema.String,
  data: Schema.String
}) {}

/** Runner -> host: text the cell wrote to `sys.stderr`. */
export class StderrFrame extends Schema.Class<StderrFrame>("StderrFrame")({
  type: Schema.Literal("stderr"),
  id: Schema.String,
  data: Schema.String
}) {}

/** Runner -> host: a `display()` call, a figure, or a status event. */
export class DisplayFrame extends Schema.Class<DisplayFrame>("DisplayFrame")({
  type: Schema.Literal("display"),
  id: Schema.String,
  bundle: MimeBundle
}) {}

/** Runner -> host: the value of the cell's last expression. */
export class ResultFrame extends Schema.Class<ResultFrame>("ResultFrame")({
  type: Schema.Literal("result"),
  id: Schema.String,
  bundle: MimeBundle
}) {}

/** Runner -> host: an exception the cell raised. */
export class ErrorFrame extends Schema.Class<ErrorFrame>("ErrorFrame")({
  type: Schema.Literal("error"),
  id: Schema.optional(Schema.NullOr(Schema.String)),
  ename: Schema.String,
  evalue: Schema.String,
  traceback: Schema.Array(Schema.String)
}) {}

/** Runner -> host: the request finished; always the last frame of a request. */
export class DoneFrame extends Schema.Class<DoneFrame>("DoneFrame")({
  type: Schema.Literal("done"),
  id: Schema.String,
  status: Schema.Literal("ok", "error"),
  executionCount: Schema.Number,
  cancelled: Schema.optionalWith(Schema.Boolean, { default: () => false })
}) {}

/** Runner -> host: the cell asks the host to run `agent`, `completion` or `parallel`. */
export class BridgeFrame extends Schema.Class<BridgeFrame>("BridgeFrame")({
  type: Schema.Literal("bridge"),
  id: Schema.String,
  callId: Schema.String,
  method: Schema.String,
  params: Schema.optionalWith(Schema.Unknown, { default: () => ({}) })
}) {}

/** Every frame the runner sends. */
export const RunnerFrame = Schema.Union(
  StartedFrame,
  StdoutFrame,
  StderrFrame,
  DisplayFrame,
  ResultFrame,
  ErrorFrame,
  DoneFrame,
  BridgeFrame
)
/** Every frame the runner sends, as a value. */
export type RunnerFrame = typeof RunnerFrame.Type

/** Decodes one NDJSON line into a runner frame, never throwing. */
export const decodeRunnerLine = Schema.decodeUnknownEither(Schema.parseJson(RunnerFrame))

const encodeHostFrameSync = Schema.encodeSync(HostFrame)

/** Encodes a host frame as one NDJSON line, newline included. */
export const encodeHostLine = (frame: HostFrame): string => JSON.stringify(encodeHostFrameSync(frame)) + "\n"
