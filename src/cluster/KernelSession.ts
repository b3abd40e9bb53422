/**
 * The `KernelSession` entity's protocol: one entity per kernel session (its id is the
 * session id), living on whichever runner owns its shard. `Execute` starts a cell and
 * answers with its outputs so far, waiting for at least one, or with its result once it
 * ended; the caller asks again from the next output number until the result comes (a cell
 * that prints nothing is one request and one answer; a cell of each language may run at
 * once, as in-process, and a caller that sends no request for the runner's call lease has
 * its cell interrupted). `Cancel` stops the running cell with
 * SIGINT (the result still comes, cancelled); `Interrupt` ends it without a result, as an
 * interrupted in-process call does; `Reset` and `Shutdown` end the session's kernels;
 * `Status`, `Complete` and `Inspect` answer beside a running cell.
 */
import { Schema } from "effect"
import * as Entity from "effect/cluster/Entity"
import * as Rpc from "effect/rpc/Rpc"
import { RuntimeUnavailable } from "../backends/Backend.ts"
import { Completion, Inspection, IntrospectionFailed } from "../kernel/Introspection.ts"
import { KernelClosed, KernelDied, KernelStartError } from "../kernel/KernelError.ts"
import { KernelOutputSchema } from "../kernel/KernelOutput.ts"
import { LimitsUnavailable, SandboxUnavailable } from "../services/isolation/Sandbox.ts"
import { ArtifactDirUnavailable } from "../services/output/ArtifactStore.ts"
import { InvalidCwd } from "../services/registry/KernelRegistry.ts"
import { RunnerCacheWriteFailed, RunnerSourceMissing } from "../services/storage/RunnerCache.ts"
import { EvalResultSchema } from "../services/tool/EvalResult.ts"
import { BackendUnavailable, type EvalError, InvalidEvalParams, type IntrospectError } from "../services/tool/EvalTool.ts"

/** The entity type's name in the cluster. */
export const KERNEL_SESSION_ENTITY = "KernelSession"

/** An output's number in its call: outputs are numbered 0, 1, 2, ... in the order they happened. */
const OutputNumber = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

/** What one `Execute` answers: the cell's outputs from number `from` on, and its result once it ended. */
export const ExecuteBatch = Schema.Struct({
  /** Outputs in the order they happened, numbered from the request's `from`. */
  outputs: Schema.Array(KernelOutputSchema),
  /** The number of the next output: the `from` of the next request. */
  next: OutputNumber,
  /** The cell's result, in the answer that ends the call. */
  result: Schema.optional(EvalResultSchema)
})

/** What one `Execute` answers. */
export type ExecuteBatch = typeof ExecuteBatch.Type

/** The runner could not reach the session ledger, so it did not run the cell. */
export class SessionLedgerUnavailable extends Schema.TaggedError<SessionLedgerUnavailable>()("SessionLedgerUnavailable", {
  reason: Schema.String
}) {
  override get message(): string {
    return `the session ledger could not be reached, so the cell did not run: ${this.reason}`
  }
}

/** The caller's release and the runner's cannot talk (their protocol or effect versions); the sentence names both. */
export class ProtocolMismatch extends Schema.TaggedError<ProtocolMismatch>()("ProtocolMismatch", {
  reason: Schema.String
}) {
  override get message(): string {
    return `the runner refused the call: ${this.reason}`
  }
}

/**
 * Every error a session call fails with, crossing the wire as itself: the tool's and the
 * runner's own, with one language-neutral `RuntimeUnavailable` for any backend's
 * unavailability (see `toSessionCallError`).
 */
export const SessionCallError = Schema.Union([
  InvalidEvalParams,
  BackendUnavailable,
  InvalidCwd,
  RuntimeUnavailable,
  RunnerSourceMissing,
  RunnerCacheWriteFailed,
  KernelStartError,
  SandboxUnavailable,
  LimitsUnavailable,
  KernelDied,
  KernelClosed,
  ArtifactDirUnavailable,
  IntrospectionFailed,
  SessionLedgerUnavailable,
  ProtocolMismatch
])

/** An error a session call fails with. */
export type SessionCallError = typeof SessionCallError.Type

/** Whether a value is one of the session calls' errors, as decoded. */
export const isSessionCallError = Schema.is(SessionCallError)

/**
 * A tool's error as a session call fails with it: a backend's own unavailability error
 * becomes `RuntimeUnavailable`, with the same message. Every other error of the in-process
 * tool has its schema in the union: a new one is a compile error here until it is added.
 */
export const toSessionCallError = (error: EvalError | IntrospectError): SessionCallError =>
  "asRuntimeUnavailable" in error ? error.asRuntimeUnavailable() : error

/**
 * `Execute`'s params: the tool's raw params, the cwd the caller asks for (absent: the
 * session's own directory on its runner; the runner decides which it allows), the
 * caller's id for this call (the same on every request of the call, retries included)
 * and the number of the first output the caller has not yet received.
 */
export const ExecutePayload = Schema.Struct({
  params: Schema.Unknown,
  cwd: Schema.optional(Schema.String),
  callId: Schema.String,
  from: OutputNumber
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
  /** The call id of a running cell, when one runs (one of them when cells of several languages run). */
  running: Schema.NullOr(Schema.String)
})

/** The `KernelSession` entity. */
export const KernelSession = Entity.make(KERNEL_SESSION_ENTITY, [
  Rpc.make("Execute", { payload: ExecutePayload, success: ExecuteBatch, error: SessionCallError }),
  Rpc.make("Cancel", { payload: { callId: Schema.String }, success: Schema.Boolean }),
  Rpc.make("Interrupt", { payload: { callId: Schema.String }, success: Schema.Boolean }),
  Rpc.make("Reset", { success: Schema.Void }),
  Rpc.make("Shutdown", { success: Schema.Void }),
  Rpc.make("Status", { success: SessionStatus }),
  Rpc.make("Complete", { payload: IntrospectPayload, success: Completion, error: SessionCallError }),
  Rpc.make("Inspect", { payload: IntrospectPayload, success: Inspection, error: SessionCallError })
])
