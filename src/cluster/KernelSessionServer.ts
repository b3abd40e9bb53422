/**
 * The runner side of `KernelSession`: each entity drives this runner's local `EvalTool`
 * with the entity id as the session id, in the cwd the runner's workspace decides (the
 * session's own directory, removed on `Shutdown`, unless the call names an allowed one). One cell at a time (a second `Execute` is
 * answered "busy"), the ledger consulted before a cell runs (no silent re-runs, a notice
 * on a re-homed session), and the session's kernels ended when the entity leaves this
 * runner (idle time, hand-off, shutdown).
 */
import { Cause, Duration, Effect, Exit, Layer, Option, Queue, Result, Schema, type Scope, Stream } from "effect"
import * as Entity from "effect/cluster/Entity"
import { Sharding } from "effect/cluster/Sharding"
import { KernelClosed } from "../kernel/KernelError.ts"
import { EvalResultSchema } from "../services/tool/EvalResult.ts"
import { checkParams, EvalTool, type EvalResult } from "../services/tool/EvalTool.ts"
import { Settings } from "../services/config/Settings.ts"
import { type ExecuteEvent, KernelSession, type SessionCallError, SessionLedgerUnavailable } from "./KernelSession.ts"
import { busyResult, noticeResult, withNotice } from "./NoticeResult.ts"
import { ArtifactPublisher } from "./ArtifactPublisher.ts"
import { CellHandOff } from "./CellHandOff.ts"
import { answersAt } from "./OwnerProbe.ts"
import { RunnerWorkspace } from "./RunnerWorkspace.ts"
import { MAX_KEPT_RESULT_CHARS, SessionLedger } from "./SessionLedger.ts"

/**
 * How long past a cell's own timeout a new owner waits for a live old owner still running
 * the call (the interrupt's escalation, publishing its artifacts, the ledger write).
 */
const HAND_OFF_MARGIN_MS = 20_000

const decodeKeptResult = Schema.decodeUnknownEffect(Schema.fromJsonString(EvalResultSchema))

const only = (event: ExecuteEvent): Stream.Stream<ExecuteEvent, SessionCallError> => Stream.make(event)

/** A result as the ledger keeps it (JSON), or null when there is none or it is too large to keep. */
const keptResult = (result: EvalResult | undefined): string | null => {
  if (result === undefined) return null
  const json = JSON.stringify(result)
  return json.length <= MAX_KEPT_RESULT_CHARS ? json : null
}

interface RunningCell {
  readonly callId: string
  readonly controller: AbortController
}

const ledgerFailure = (error: { readonly message: string }) => new SessionLedgerUnavailable({ reason: error.message })

const makeHandlers = Effect.fnUntraced(function*(advertised: string) {
  const address = yield* Entity.CurrentAddress
  const sessionId = address.entityId
  const tool = yield* EvalTool
  const ledger = yield* SessionLedger
  const publisher = yield* ArtifactPublisher
  const workspace = yield* RunnerWorkspace
  const sharding = yield* Sharding
  const settings = yield* Settings
  const handOff = yield* CellHandOff
  // The session's shard left this runner while the runner keeps running (a rebalance, dropped locks).
  const movedAway = Effect.map(sharding.isShutdown, (stopping) => !stopping && !sharding.hasShardId(address.shardId))
  /** A result as this runner answers it, saying which runner that is. */
  const answeredHere = (event: ExecuteEvent): ExecuteEvent =>
    event._tag === "Result" ? { _tag: "Result", result: { ...event.result, runner: advertised } } : event
  const cwdFor = (requested: string | undefined) => workspace.cwdFor(sessionId, requested)
  let running: RunningCell | undefined

  yield* Effect.addFinalizer(() =>
    handOff.afterCell(
      sessionId,
      Effect.andThen(
        tool.endSession(sessionId),
        ledger.release(sessionId).pipe(Effect.catch((error) => Effect.logWarning(`the ledger did not record the release of session ${sessionId}: ${error.message}`)))
      )
    ))

  /** Copies a cell's artifacts into Postgres before its result goes back, so `artifact://` resolves anywhere. */
  const publish = (ids: ReadonlyArray<string>) =>
    publisher.publish(sessionId, ids).pipe(
      Effect.tap((report) =>
        Effect.forEach(report.skipped, (skip) => Effect.logWarning(`artifact ${skip.id} of session ${sessionId} stays on this runner: ${skip.reason}`), { discard: true })),
      Effect.catch((error) => Effect.logWarning(`the artifacts of session ${sessionId} were not published: ${error.message}`))
    )

  const finish = (callId: string, result: EvalResult | undefined) =>
    ledger.finishExecute(sessionId, callId, keptResult(result)).pipe(
      Effect.catch((error) => Effect.logWarning(`the ledger did not record the end of call ${callId}: ${error.message}`))
    )

  /**
   * The ledger's word on the call. While the runner that had this very call in flight still
   * answers (a shard moving on a rebalance or a hand-off), it is waited for until it finishes
   * or lets go, so its result is replayed instead of the cell called lost: only a runner that
   * stopped loses a cell. Bounded by the cell's own timeout plus a margin.
   */
  const decide = Effect.fnUntraced(function*(callId: string, params: unknown) {
    const checked = checkParams(params, settings)
    const deadline = Date.now() + (Result.isSuccess(checked) ? checked.success.timeoutSeconds * 1000 : 0) + HAND_OFF_MARGIN_MS
    let awaitOwner = true
    while (true) {
      const step = yield* ledger.beginExecute(sessionId, callId, awaitOwner && Date.now() < deadline)
      if (step._tag !== "InflightElsewhere") return step
      if (yield* answersAt(step.address, 1000)) yield* Effect.sleep(Duration.millis(250))
      else awaitOwner = false
    }
  })

  const runCell = Effect.fnUntraced(function*(params: unknown, cwd: string, cell: RunningCell, notice: string | undefined) {
    const events = yield* Queue.unbounded<ExecuteEvent, SessionCallError | Cause.Done>()
    // The cell's `Done` leaves with its result, in one message.
    let done: ExecuteEvent | undefined
    const work = tool.run(params, {
      sessionId,
      cwd,
      signal: cell.controller.signal,
      onEvent: (output) => {
        if (output._tag === "Done") done = { _tag: "Output", output }
        else Queue.offerUnsafe(events, { _tag: "Output", output })
      }
    }).pipe(
      Effect.map((result): EvalResult => (notice === undefined ? result : withNotice(result, notice))),
      Effect.tap((result) => (result.artifactIds.length === 0 ? Effect.void : publish(result.artifactIds))),
      Effect.onExit((exit) =>
        Exit.isFailure(exit) && Cause.hasInterrupts(exit.cause) ? Effect.void : finish(cell.callId, Exit.isSuccess(exit) ? exit.value : undefined)),
      Effect.matchCauseEffect({
        onSuccess: (result) =>
          Effect.andThen(Queue.offerAll(events, done === undefined ? [{ _tag: "Result", result }] : [done, { _tag: "Result", result }]), Queue.end(events)),
        onFailure: (cause) =>
          Effect.andThen(
            done === undefined ? Effect.void : Queue.offer(events, done),
            Option.match(Cause.findErrorOption(cause), {
              onSome: (error) => Queue.fail(events, error),
              onNone: () => Queue.failCause(events, cause as Cause.Cause<never>)
            })
          )
      }),
      Effect.ensuring(Effect.sync(() => {
        if (running === cell) running = undefined
      }))
    )
    yield* handOff.start(sessionId, cell.callId, work, movedAway)
    // Its call ends without a result if the shard moves; the caller sends it again to the new owner.
    return Stream.fromQueue(events).pipe(Stream.interruptWhen(handOff.whenMovedAway(movedAway)))
  })

  /** After the cwd was decided: the ledger's word on the call, then the cell (or its answer without running). */
  const startCell = (callId: string, params: unknown, cwd: string, cell: RunningCell, release: Effect.Effect<void>) =>
    decide(callId, params).pipe(
      Effect.tapCause(() => release),
      Effect.mapError(ledgerFailure),
      Effect.flatMap((decision) =>
        decision._tag === "Answer"
          ? Effect.as(release, only({ _tag: "Result", result: noticeResult(params, decision.notice) }))
          : decision._tag === "Replay"
          ? Effect.andThen(release, decodeKeptResult(decision.result)).pipe(
            Effect.mapBoth({
              onFailure: (error) => new KernelClosed({ reason: `the result kept for call ${callId} could not be read: ${error.message}` }),
              onSuccess: (result) => only({ _tag: "Result", result })
            })
          )
          : Effect.onInterrupt(runCell(params, cwd, cell, decision.notice), () => release)
      )
    )

  return KernelSession.of({
    Execute: (request) =>
      Stream.map(Stream.unwrap(Effect.suspend((): Effect.Effect<Stream.Stream<ExecuteEvent, SessionCallError>, SessionCallError, Scope.Scope> => {
        const { callId, params } = request.payload
        if (running !== undefined) return Effect.succeed(only({ _tag: "Result", result: busyResult(params) }))
        // A cell of this session still finishing here after its shard moved away and back:
        // its own call waits for it (the ledger then replays its result), another is busy.
        const finishing = handOff.runningCall(sessionId)
        if (finishing !== undefined && finishing !== callId) return Effect.succeed(only({ _tag: "Result", result: busyResult(params) }))
        const cell: RunningCell = { callId, controller: new AbortController() }
        running = cell
        const release = Effect.sync(() => {
          if (running === cell) running = undefined
        })
        return handOff.awaitCell(sessionId).pipe(
          Effect.andThen(cwdFor(request.payload.cwd)),
          Effect.tapCause(() => release),
          Effect.flatMap((cwd) => startCell(callId, params, cwd, cell, release))
        )
      })), answeredHere),
    Cancel: (request) =>
      Effect.sync(() => {
        if (running === undefined || running.callId !== request.payload.callId) return false
        running.controller.abort()
        return true
      }),
    Reset: () => Effect.andThen(tool.endSession(sessionId), Effect.ignore(ledger.end(sessionId), { log: "Debug" })),
    Shutdown: () => Effect.andThen(tool.endSession(sessionId), Effect.andThen(Effect.ignore(ledger.end(sessionId), { log: "Debug" }), workspace.endSession(sessionId))),
    Status: () => Effect.succeed({ runner: advertised, incarnation: ledger.incarnation, running: running?.callId ?? null }),
    Complete: (request) =>
      Effect.flatMap(cwdFor(request.payload.cwd), (cwd) =>
        tool.complete(request.payload.params as Parameters<typeof tool.complete>[0], { sessionId, cwd })),
    Inspect: (request) =>
      Effect.flatMap(cwdFor(request.payload.cwd), (cwd) =>
        tool.inspect(request.payload.params as Parameters<typeof tool.inspect>[0], { sessionId, cwd }))
  })
})

/** Registers `KernelSession` on this runner: entities idle out after the kernel idle time (`kernel.idleTtlMs`). */
export const kernelSessionServer = (
  advertised: string
): Layer.Layer<never, never, Sharding | EvalTool | SessionLedger | ArtifactPublisher | Settings | RunnerWorkspace | CellHandOff> =>
  Layer.unwrap(Effect.gen(function*() {
    const settings = yield* Settings
    return KernelSession.toLayer(makeHandlers(advertised), {
      concurrency: "unbounded",
      maxIdleTime: Duration.millis(Math.max(settings.kernel.idleTtlMs, 1000))
    })
  }))
