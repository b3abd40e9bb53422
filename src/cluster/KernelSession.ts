/**
 * The `KernelSession` entity's protocol: one entity per kernel session (its id is the
 * session id), living on whichever runner owns its shard. `Execute` streams a cell's
 * outputs as they come and ends with its result; `Cancel` stops the running cell with
 * SIGINT (the result still comes, cancelled); `Reset` and `Shutdown` end the session's
 * kernels; `Status`, `Complete` and `Inspect` answer beside a running cell.
 */
import { Schema } from "effect"
import * as Entity from "effect/cluster/Entity"
import * as Rpc from "effect/rpc/Rpc"
import type { Completion, Inspection } from "../kernel/Introspection.ts"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import type { EvalResult } from "../services/tool/EvalTool.ts"

/** The entity type's name in the cluster. */
export const KERNEL_SESSION_ENTITY = "KernelSession"

/** A value that crosses the wire as it is (kernel outputs and results are plain data). */
const plain = <A>() => Schema.Any as unknown as Schema.Codec<A>

/** One item of an `Execute` stream: an output as it happened, or the cell's result (always last). */
export type ExecuteEvent =
  | { readonly _tag: "Output"; readonly output: KernelOutput }
  | { readonly _tag: "Result"; readonly result: EvalResult }

/** A failure of a session call as it travels back: the original error's tag and message, with its fields. */
export class SessionCallFailed extends Schema.TaggedError<SessionCallFailed>()("SessionCallFailed", {
  tag: Schema.String,
  reason: Schema.String,
  fields: Schema.Record(Schema.String, Schema.Unknown)
}) {
  override get message(): string {
    return this.reason
  }
}

/**
 * `Execute`'s params: the tool's raw params, the cwd the caller asks for (absent: the
 * session's own directory on its runner; the runner decides which it allows) and the
 * caller's id for this call (the same on every retry).
 */
export const ExecutePayload = Schema.Struct({
  params: Schema.Unknown,
  cwd: Schema.optional(Schema.String),
  callId: Schema.String
})

/** Introspection params as they travel. */
const IntrospectPayload = Schema.Struct({
  params: Schema.Struct({
    language: Schema.String,
    code: Schema.String,
    cursorPos: Schema.optional(Schema.Number),
    detailLevel: Schema.optional(Schema.Literals([0, 1]))
  }),
  cwd: Schema.optional(Schema.String)
})

/** What `Status` answers. */
export const SessionStatus = Schema.Struct({
  /** The runner holding the session now, as host:port. */
  runner: Schema.String,
  /** The runner process's random incarnation id. */
  incarnation: Schema.String,
  /** The call id of the running cell, when one runs. */
  running: Schema.NullOr(Schema.String)
})

/** The `KernelSession` entity. */
export const KernelSession = Entity.make(KERNEL_SESSION_ENTITY, [
  Rpc.make("Execute", {
    payload: ExecutePayload,
    success: plain<ExecuteEvent>(),
    error: SessionCallFailed,
    stream: true
  }),
  Rpc.make("Cancel", { payload: { callId: Schema.String }, success: Schema.Boolean }),
  Rpc.make("Reset", { success: Schema.Void }),
  Rpc.make("Shutdown", { success: Schema.Void }),
  Rpc.make("Status", { success: SessionStatus }),
  Rpc.make("Complete", { payload: IntrospectPayload, success: plain<Completion>(), error: SessionCallFailed }),
  Rpc.make("Inspect", { payload: IntrospectPayload, success: plain<Inspection>(), error: SessionCallFailed })
])

/** A local error as it travels back to the caller. */
export const sessionCallFailed = (error: { readonly _tag: string; readonly message: string }): SessionCallFailed => {
  const fields: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(error)) {
    if (key !== "_tag" && (typeof value === "string" || typeof value === "number" || typeof value === "boolean")) fields[key] = value
  }
  return new SessionCallFailed({ tag: error._tag, reason: error.message, fields })
}
