/**
 * `EvalTool` as a cluster client: every call goes to the `KernelSession` entity of its
 * session, wherever the cluster placed it, in the session's own directory there unless the
 * policy forwards the caller's cwd. Params are checked here first (the same errors
 * as in-process); outputs reach `onEvent` as the runner streams them; aborting `signal`
 * cancels the cell on its runner (SIGINT, and the cancelled result still comes back);
 * interrupting the call interrupts the cell remotely, as in-process. A call that loses its
 * runner (a dead or departing runner, a broken socket) is sent again with the same call
 * id until the lock expiry has passed: the session ledger makes sure it never runs twice.
 * With a tracer installed, each cell is an `eval.run` span, as in-process, naming the
 * session and the runner that answered (`eval.runner`).
 */
import { Cause, Data, Duration, Effect, Result, Schedule } from "effect"
import type { Sharding } from "effect/cluster/Sharding"
import { randomBytes } from "node:crypto"
import { IntrospectionFailed } from "../kernel/Introspection.ts"
import { cellSpanFailure, withSpanWhenTraced } from "../kernel/Spans.ts"
import { KernelClosed } from "../kernel/KernelError.ts"
import {
  checkParams,
  EVAL_TOOL_NAME,
  type EvalContext,
  type EvalError,
  type EvalToolService,
  evalDescription,
  evalParametersSchema,
  InvalidEvalParams
} from "../services/tool/EvalTool.ts"
import { Settings } from "../services/config/Settings.ts"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { isWatchdogControl } from "../render/Status.ts"
import { DEFAULT_MAX_RICH_OUTPUTS, type SinkOutput } from "../services/output/OutputSink.ts"
import { makeTextWindow } from "../services/output/TextWindow.ts"
import { isSessionCallError, KernelSession, type SessionCallError } from "./KernelSession.ts"
import type { DatabaseWatch } from "./DatabaseOutage.ts"
import { LOST_CELL_NOTICE } from "./LedgerDecision.ts"
import { stateVersions } from "./ProtocolVersion.ts"
import { withStreamedOutputs } from "./NoticeResult.ts"

/** The attribute of a cell's `eval.run` span naming the runner that answered it (host:port). */
export const RUNNER_SPAN_ATTRIBUTE = "eval.runner"

/** A call that lost its runner on the way; sent again. */
class CallInTransit extends Data.TaggedError("CallInTransit")<{ readonly reason: string }> {}

/** The runner's error as the error the in-process tool would have failed with: itself, or a closed kernel for one of the runner's own. */
const evalErrorOf = (failure: SessionCallError): EvalError =>
  failure._tag === "SessionLedgerUnavailable" || failure._tag === "IntrospectionFailed" || failure._tag === "ProtocolMismatch"
    ? new KernelClosed({ reason: failure.message })
    : failure

const describe = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "object" && error !== null && "_tag" in error ? String((error as { _tag: unknown })._tag) : String(error)

/** Sends the call stating this process's versions; failures of the trip (not of the call) become `CallInTransit`; the runner's own answers pass through. */
const inTransit = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, SessionCallError | CallInTransit, R> =>
  effect.pipe(
    stateVersions,
    // Our own interruption skips this handler; an interruption seen here is the runner's
    // (it shut down or lost the shard mid-call), so the call goes out again.
    Effect.catchCause((cause): Effect.Effect<never, SessionCallError | CallInTransit> => {
      if (Cause.hasInterruptsOnly(cause)) return Effect.fail(new CallInTransit({ reason: "the runner stopped during the call" }))
      const failure = Cause.findErrorOption(cause)
      if (failure._tag === "Some" && isSessionCallError(failure.value)) return Effect.fail(failure.value)
      const reason = failure._tag === "Some" ? describe(failure.value) : describe(Cause.squash(cause))
      return Effect.fail(new CallInTransit({ reason }))
    })
  )

/** How long a client keeps sending a call that lost its runner. */
export interface ClusterCallPolicy {
  /** Give up after this long without an answer from any runner (lock expiry plus a margin). */
  readonly retryWindowMs: number
  /** Wait between two sends. */
  readonly retryIntervalMs: number
  /** Send the caller's cwd (the runner runs the cell there only under its allowed roots); false runs every session in its own directory on its runner. */
  readonly forwardCwd?: boolean
  /** The cluster's database as this client sees it: a call gives up once it has not answered for `wait`, named `name` in the error. */
  readonly database?: { readonly watch: DatabaseWatch; readonly name: string; readonly wait: Duration.Input }
}

/** A call given up because the cluster's database has not answered for the outage wait. */
class DatabaseGone extends Data.TaggedError("DatabaseGone")<{ readonly reason: string }> {}

/**
 * `call`, given up once the cluster's database has not answered for the policy's wait (a
 * runner waits for the database before it serves a shard, with no bound of its own). The
 * sentence says whether the call's cell can have run: not when the database was already
 * gone when the call was made (no runner could record it).
 */
const unlessDatabaseGone = <A, E>(call: Effect.Effect<A, E>, policy: ClusterCallPolicy, what: string): Effect.Effect<A, E | DatabaseGone> => {
  const database = policy.database
  if (database === undefined) return call
  const wait = Duration.fromInputUnsafe(database.wait)
  return Effect.suspend(() => {
    const madeAt = Date.now()
    const gone = Effect.suspend(() => {
      const outage = database.watch.outage()
      // Only a probe made during the call counts: one from before may predate the database's return.
      if (outage === undefined || outage.last < madeAt || Date.now() - outage.since < Duration.toMillis(wait)) return Effect.void
      const ran = outage.since <= madeAt ? `so ${what} did not run` : `${what} may have run before it went away`
      return Effect.fail(new DatabaseGone({ reason: `${database.name} could not be reached for ${Duration.format(wait)} (${outage.problem}); ${ran}` }))
    }).pipe(Effect.repeat(Schedule.spaced(Duration.seconds(1))), Effect.andThen(Effect.never))
    return Effect.raceFirst(call, gone)
  })
}

const withRetries = <A>(effect: Effect.Effect<A, SessionCallError | CallInTransit>, policy: ClusterCallPolicy) =>
  Effect.retry(effect, {
    schedule: Schedule.spaced(Duration.millis(policy.retryIntervalMs)).pipe(Schedule.upTo({ duration: Duration.millis(policy.retryWindowMs) })),
    while: (error) => error._tag === "CallInTransit"
  })

/** The eval tool over the cluster, for the settings and sharding in context. */
export const makeClusterEvalTool: (policy: ClusterCallPolicy) => Effect.Effect<EvalToolService, never, Settings | Sharding> = Effect.fnUntraced(function*(policy: ClusterCallPolicy) {
  const settings = yield* Settings
  const clientOf = yield* KernelSession.client
  const services = yield* Effect.context<never>()
  const cwdOf = (cwd: string): string | undefined => (policy.forwardCwd === true ? cwd : undefined)

  const runCell = Effect.fnUntraced(function*(raw: unknown, context: EvalContext, traced: boolean) {
    const checked = checkParams(raw, settings)
    if (Result.isFailure(checked)) {
      const error = checked.failure
      return yield* Effect.fail(error._tag === "InvalidTimeout" ? new InvalidEvalParams({ problem: error.message }) : error)
    }
    const callId = randomBytes(16).toString("hex")
    const session = clientOf(context.sessionId)
    const signal = context.signal
    /** Sends a call about this cell without waiting for it (its retries bounded to 10 s). */
    const sendAside = (call: Effect.Effect<boolean, unknown>) => {
      Effect.runForkWith(services)(Effect.ignore(withRetries(inTransit(call), { ...policy, retryWindowMs: Math.min(policy.retryWindowMs, 10_000) })))
    }
    const onAbort = () => sendAside(session.Cancel({ callId }))
    signal?.addEventListener("abort", onAbort, { once: true })
    const onEvent = context.onEvent
    const streamed = makeTextWindow<SinkOutput>(settings.output)
    let richStreamed = 0
    const keep = (output: KernelOutput) => {
      if (output._tag === "Stdout" || output._tag === "Stderr") {
        if (streamed.addText(output._tag, output.text)) streamed.spill()
      } else if (output._tag !== "Done" && !(output._tag === "Status" && isWatchdogControl(output)) && richStreamed++ < DEFAULT_MAX_RICH_OUTPUTS) {
        streamed.addEntry({ kind: "rich", item: output })
      }
    }
    let next = 0
    const ask = Effect.suspend(() => inTransit(session.Execute({ params: raw, cwd: cwdOf(context.cwd), callId, from: next })))
    const answer = Effect.gen(function*() {
      while (true) {
        const batch = yield* withRetries(ask, policy)
        for (const output of batch.outputs) {
          keep(output)
          onEvent?.(output)
        }
        next = batch.next
        if (batch.result !== undefined) return batch.result
        // Nothing yet from a runner the session's shard just left: ask the new owner.
        if (batch.outputs.length === 0) yield* Effect.sleep(Duration.millis(policy.retryIntervalMs))
      }
    }).pipe(
      Effect.onInterrupt(() => Effect.sync(() => sendAside(session.Interrupt({ callId }))))
    )
    return yield* unlessDatabaseGone(answer, policy, "the cell").pipe(
      Effect.map((result) => (result.notice === LOST_CELL_NOTICE && result.outputs.length === 0 ? withStreamedOutputs(result, streamed.finish()) : result)),
      Effect.ensuring(Effect.sync(() => signal?.removeEventListener("abort", onAbort))),
      Effect.mapError((error): EvalError =>
        error._tag === "CallInTransit"
          ? new KernelClosed({ reason: `no runner of the cluster answered for session ${context.sessionId} (${error.reason})` })
          : error._tag === "DatabaseGone"
          ? new KernelClosed({ reason: error.reason })
          : evalErrorOf(error)
      ),
      Effect.tap((result) => (traced && result.runner !== undefined ? Effect.annotateCurrentSpan(RUNNER_SPAN_ATTRIBUTE, result.runner) : Effect.void))
    )
  })

  const run: EvalToolService["run"] = (raw, context) =>
    withSpanWhenTraced((traced) => runCell(raw, context, traced), "eval.run", { attributes: { "eval.session": context.sessionId }, captureStackTrace: false }, cellSpanFailure)

  const introspect = <A>(call: Effect.Effect<A, unknown>) =>
    unlessDatabaseGone(withRetries(inTransit(call), policy), policy, "nothing").pipe(
      Effect.mapError((error) =>
        error._tag === "CallInTransit"
          ? new IntrospectionFailed({ reason: `no runner of the cluster answered (${error.reason})` })
          : error._tag === "DatabaseGone"
          ? new IntrospectionFailed({ reason: error.reason })
          : error._tag === "ArtifactDirUnavailable" || error._tag === "SessionLedgerUnavailable" || error._tag === "ProtocolMismatch"
          ? new IntrospectionFailed({ reason: error.message })
          : error
      )
    )

  return {
    definition: { name: EVAL_TOOL_NAME, description: evalDescription(settings), parameters: evalParametersSchema(settings) },
    run,
    complete: (params, context) => introspect(clientOf(context.sessionId).Complete({ params, cwd: cwdOf(context.cwd) })),
    inspect: (params, context) => introspect(clientOf(context.sessionId).Inspect({ params, cwd: cwdOf(context.cwd) })),
    endSession: (sessionId) =>
      unlessDatabaseGone(withRetries(inTransit(clientOf(sessionId).Shutdown()), { ...policy, retryWindowMs: Math.min(policy.retryWindowMs, 10_000) }), policy, "the shutdown").pipe(
        Effect.catch((error) => Effect.logWarning(`session ${sessionId} was not shut down on its runner: ${error.message}`))
      )
  } satisfies EvalToolService
})
