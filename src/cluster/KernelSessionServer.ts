/**
 * The runner side of `KernelSession`: each entity drives this runner's local `EvalTool`
 * with the entity id as the session id, in the cwd the runner's workspace decides (the
 * session's own directory, removed on `Shutdown`, unless the call names an allowed one).
 * One cell at a time per language, as in-process: a cell of another language runs beside
 * it, another call's `Execute` of the same language is answered "busy", and the running
 * call's own requests take its outputs in turn. The ledger is consulted before a cell runs
 * (no silent re-runs, a notice on a re-homed session), and the session's kernels are ended
 * when the entity leaves this runner (idle time, hand-off, shutdown). A cell outlives each
 * request of its call; it is interrupted by `Interrupt`, when a request of its call is
 * interrupted (the caller went away while it waited), when no request of its call has come
 * for the call lease (the caller went away between two requests) or when its entity ends
 * with the session still here, and finishes here when the session's shard moved or the
 * runner is stopping.
 */
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Layer, Result, Schema, Scope } from "effect"
import * as Entity from "effect/cluster/Entity"
import type * as Headers from "effect/http/Headers"
import { Sharding } from "effect/cluster/Sharding"
import { KernelClosed } from "../kernel/KernelError.ts"
import { EvalResultSchema } from "../services/tool/EvalResult.ts"
import { checkParams, EvalTool, type EvalResult, InvalidEvalParams } from "../services/tool/EvalTool.ts"
import { Settings } from "../services/config/Settings.ts"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { type ExecuteBatch, KernelSession, ProtocolMismatch, type SessionCallError, SessionLedgerUnavailable, toSessionCallError } from "./KernelSession.ts"
import { callerProblem, VERSIONS_HEADER } from "./ProtocolVersion.ts"
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

/** A result as the ledger keeps it (JSON), or null when there is none or it is too large to keep. */
const keptResult = (result: EvalResult | undefined): string | null => {
  if (result === undefined) return null
  const json = JSON.stringify(result)
  return json.length <= MAX_KEPT_RESULT_CHARS ? json : null
}

/**
 * The session's latest call of one language on this runner: its cell's outputs not yet
 * acknowledged, and its end once it ended (kept until the session's next call of the
 * language, so an answer lost on the way can be asked for again here), with the scope its
 * cell runs under and its lease.
 */
interface SessionCall {
  readonly callId: string
  readonly language: string
  readonly controller: AbortController
  readonly scope: Scope.Closeable
  /** Outputs numbered from `acknowledged` on. */
  readonly outputs: Array<KernelOutput>
  acknowledged: number
  end: Exit.Exit<EvalResult, SessionCallError> | undefined
  /** Completed, and replaced, whenever an output or the end arrives. */
  changed: Deferred.Deferred<void>
  /** The requests of the call waiting for its outputs now. */
  waiting: number
  /** Interrupts the cell once the call lease passes without a request; running only while none waits. */
  lease: Fiber.Fiber<void> | undefined
  /** Why the cell was interrupted on this runner, when it was for a reason its caller did not give. */
  interruptedBecause: string | undefined
}

const notify = (call: SessionCall) => {
  const changed = call.changed
  call.changed = Deferred.makeUnsafe<void>()
  Deferred.doneUnsafe(changed, Exit.void)
}

const ended = (call: SessionCall, exit: Exit.Exit<EvalResult, SessionCallError>) => {
  call.end = exit
  notify(call)
}

/** What a waiting `Execute` watches besides its call: its runner stopping, its session's shard leaving. */
interface Watch {
  readonly stopping: Effect.Effect<boolean>
  readonly whenMoved: Effect.Effect<void>
}

/**
 * The call's outputs from number `from` on, waiting until there is one or the call ended
 * (then with its result). A stopping runner answers only at the end, so the request it
 * waits on keeps the entity until the result has left. When `whenMoved` completes first,
 * an empty answer tells the caller to ask again: the session's shard left this runner and
 * the new owner answers.
 */
const takeFrom = (call: SessionCall, from: number, watch: Watch): Effect.Effect<ExecuteBatch, SessionCallError> =>
  Effect.suspend(() => {
    const acknowledged = Math.min(Math.max(0, from - call.acknowledged), call.outputs.length)
    if (acknowledged > 0) {
      call.outputs.splice(0, acknowledged)
      call.acknowledged += acknowledged
    }
    const end = call.end
    const batch = { outputs: [...call.outputs], next: call.acknowledged + call.outputs.length }
    if (end !== undefined) return Exit.isSuccess(end) ? Effect.succeed({ ...batch, result: end.value }) : Effect.failCause(end.cause)
    const wait = Effect.raceFirst(Effect.as(Deferred.await(call.changed), false), Effect.as(watch.whenMoved, true)).pipe(
      Effect.flatMap((moved) => (moved ? Effect.succeed(batch) : takeFrom(call, from, watch)))
    )
    if (batch.outputs.length === 0) return wait
    return Effect.flatMap(watch.stopping, (stopping) => (stopping ? wait : Effect.succeed(batch)))
  })

/** How a cell's run ended, as the call's end: its result, its error, or a closed kernel for an interruption (`because`, when said) or a defect. */
const endOf = (callId: string, exit: Exit.Exit<EvalResult, SessionCallError>, because?: string): Exit.Exit<EvalResult, SessionCallError> => {
  if (Exit.isSuccess(exit)) return exit
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "Some") return Exit.fail(error.value)
  const reason = Cause.hasInterrupts(exit.cause) ? `was interrupted${because === undefined ? "" : ` (${because})`}` : `failed: ${String(Cause.squash(exit.cause))}`
  return Exit.fail(new KernelClosed({ reason: `call ${callId}'s cell ${reason} on its runner` }))
}

const ledgerFailure = (error: { readonly message: string }) => new SessionLedgerUnavailable({ reason: error.message })

const makeHandlers = Effect.fnUntraced(function*(advertised: string, callLeaseMs: number) {
  const address = yield* Entity.CurrentAddress
  const sessionId = address.entityId
  const entityScope = yield* Effect.scope
  const tool = yield* EvalTool
  const ledger = yield* SessionLedger
  const publisher = yield* ArtifactPublisher
  const workspace = yield* RunnerWorkspace
  const sharding = yield* Sharding
  const settings = yield* Settings
  const handOff = yield* CellHandOff
  // The cell may finish here without its entity: the session's shard left this runner while
  // the runner keeps running (a rebalance, dropped locks), or the runner is stopping (its
  // stop grace bounds the wait); the call's next request goes to the new owner, which waits.
  const mayFinishHere = Effect.map(sharding.isShutdown, (stopping) => stopping || !sharding.hasShardId(address.shardId))
  const watch: Watch = {
    stopping: sharding.isShutdown,
    whenMoved: handOff.whenMovedAway(Effect.map(sharding.isShutdown, (stopping) => !stopping && !sharding.hasShardId(address.shardId)))
  }
  /** A result as this runner answers it, saying which runner that is. */
  const answeredHere = (batch: ExecuteBatch): ExecuteBatch =>
    batch.result === undefined ? batch : { ...batch, result: { ...batch.result, runner: advertised } }
  const cwdFor = (requested: string | undefined) => workspace.cwdFor(sessionId, requested)
  /** The latest call of each language. */
  const calls = new Map<string, SessionCall>()
  const callOf = (callId: string): SessionCall | undefined => [...calls.values()].find((call) => call.callId === callId)
  const runningCell = (language: string): SessionCall | undefined => {
    const call = calls.get(language)
    return call !== undefined && call.end === undefined ? call : undefined
  }
  const runningCallOf = (callId: string): SessionCall | undefined => {
    const call = callOf(callId)
    return call !== undefined && call.end === undefined ? call : undefined
  }

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

  const finish = (call: SessionCall, result: EvalResult | undefined) =>
    ledger.finishExecute(sessionId, call.language, call.callId, keptResult(result)).pipe(
      Effect.catch((error) => Effect.logWarning(`the ledger did not record the end of call ${call.callId}: ${error.message}`))
    )

  /**
   * The ledger's word on the call. While the runner that holds the session with a call in
   * flight (this one, or another language's) still answers (a shard moving on a rebalance or
   * a hand-off), it is waited for until it finishes or lets go, so its results are replayed
   * instead of its cells called lost: only a runner that stopped loses a cell. Bounded by
   * the cell's own timeout plus a margin.
   */
  const decide = Effect.fnUntraced(function*(call: SessionCall, timeoutSeconds: number) {
    const deadline = Date.now() + timeoutSeconds * 1000 + HAND_OFF_MARGIN_MS
    let awaitOwner = true
    while (true) {
      const step = yield* ledger.beginExecute(sessionId, call.language, call.callId, awaitOwner && Date.now() < deadline)
      if (step._tag !== "InflightElsewhere") return step
      if (yield* answersAt(step.address, 1000)) yield* Effect.sleep(Duration.millis(250))
      else awaitOwner = false
    }
  })

  /** Starts the cell under the call's own scope (under the entity's), so it outlives each request of its call. */
  const runCell = Effect.fnUntraced(function*(params: unknown, cwd: string, call: SessionCall, notice: string | undefined) {
    // The cell's `Done` leaves with its result, in one answer.
    let done: KernelOutput | undefined
    const work = tool.run(params, {
      sessionId,
      cwd,
      signal: call.controller.signal,
      onEvent: (output) => {
        if (output._tag === "Done") done = output
        else {
          call.outputs.push(output)
          notify(call)
        }
      }
    }).pipe(
      Effect.mapError(toSessionCallError),
      Effect.map((result): EvalResult => (notice === undefined ? result : withNotice(result, notice))),
      Effect.tap((result) => (result.artifactIds.length === 0 ? Effect.void : publish(result.artifactIds))),
      Effect.onExit((exit) =>
        Exit.isFailure(exit) && Cause.hasInterrupts(exit.cause) ? Effect.void : finish(call, Exit.isSuccess(exit) ? exit.value : undefined)),
      Effect.onExit((exit) =>
        Effect.sync(() => {
          if (done !== undefined) call.outputs.push(done)
          ended(call, endOf(call.callId, exit, call.interruptedBecause))
        })),
      Effect.asVoid,
      Effect.ignore
    )
    yield* Scope.provide(handOff.start(sessionId, call.language, call.callId, work, mayFinishHere), call.scope)
  })

  /** Interrupts the call's cell once the call lease passes with no request of the call waiting (unless it finishes here: its session moved, or the runner stops). */
  const startLease = (call: SessionCall) =>
    Effect.flatMap(
      Effect.forkIn(
        Effect.andThen(
          Effect.sleep(Duration.millis(callLeaseMs)),
          Effect.uninterruptible(Effect.flatMap(mayFinishHere, (finishesHere) => {
            if (finishesHere || call.waiting > 0 || call.end !== undefined) return Effect.void
            call.interruptedBecause = `its caller sent no request for ${Duration.format(Duration.millis(callLeaseMs))}`
            return Effect.andThen(
              Effect.logInfo(`call ${call.callId} of session ${sessionId} ${call.interruptedBecause}; its cell is interrupted`),
              Scope.close(call.scope, Exit.void)
            )
          }))
        ),
        entityScope
      ),
      (fiber) => Effect.sync(() => void (call.lease = fiber))
    )

  const stopLease = (call: SessionCall) =>
    Effect.suspend(() => {
      const lease = call.lease
      call.lease = undefined
      return lease === undefined ? Effect.void : Fiber.interrupt(lease)
    })

  /**
   * A request of the call waiting for its outputs; when it is interrupted (its caller went
   * away or interrupted it) the cell is interrupted too, unless it may finish here. While no
   * request of the call waits, its lease runs: the caller's next request stops it.
   */
  const waitOn = (call: SessionCall, from: number) =>
    Effect.suspend(() => {
      call.waiting++
      return Effect.andThen(stopLease(call), takeFrom(call, from, watch)).pipe(
        Effect.onInterrupt(() => Scope.close(call.scope, Exit.void)),
        Effect.ensuring(Effect.suspend(() => {
          call.waiting--
          return call.waiting === 0 && call.end === undefined ? startLease(call) : Effect.void
        }))
      )
    })

  /** A new call: the ledger's word on it, then its cell, or its answer without running. */
  const startCall = Effect.fnUntraced(function*(callId: string, language: string, timeoutSeconds: number, params: unknown, requestedCwd: string | undefined, from: number) {
    const previous = calls.get(language)
    const call: SessionCall = {
      callId,
      language,
      controller: new AbortController(),
      scope: yield* Scope.fork(entityScope),
      outputs: [],
      acknowledged: from,
      end: undefined,
      changed: Deferred.makeUnsafe<void>(),
      waiting: 0,
      lease: undefined,
      interruptedBecause: undefined
    }
    calls.set(language, call)
    if (previous !== undefined) yield* Effect.andThen(stopLease(previous), Scope.close(previous.scope, Exit.void))
    const answer = (exit: Exit.Exit<EvalResult, SessionCallError>) => Effect.sync(() => ended(call, exit))
    yield* Effect.gen(function*() {
      // A cell still finishing here from the session's previous entity, and the end of its
      // kernels deferred behind it; this entity's own cells of other languages run on beside.
      yield* handOff.awaitCell(sessionId, (id) => callOf(id) !== undefined)
      const cwd = yield* cwdFor(requestedCwd)
      const decision = yield* decide(call, timeoutSeconds).pipe(Effect.mapError(ledgerFailure))
      if (decision._tag === "Answer") return yield* answer(Exit.succeed(noticeResult(params, decision.notice)))
      if (decision._tag === "Replay") {
        const result = yield* decodeKeptResult(decision.result).pipe(
          Effect.mapError((error) => new KernelClosed({ reason: `the result kept for call ${callId} could not be read: ${error.message}` }))
        )
        return yield* answer(Exit.succeed(result))
      }
      yield* runCell(params, cwd, call, decision.notice)
    }).pipe(
      // A call that could not start (the ledger unreachable, a cwd refused, its request
      // interrupted) is answered so to whoever waits on it, and is not remembered: the
      // caller's next try starts it afresh.
      Effect.onExit((exit) =>
        Exit.isSuccess(exit) ? Effect.void : Effect.andThen(answer(endOf(callId, Exit.failCause(exit.cause))), Effect.sync(() => {
          if (calls.get(language) === call) calls.delete(language)
        }))),
      Effect.ignore
    )
    return yield* waitOn(call, from)
  })

  /** The answer to a call that finds another cell running: its "busy" result alone. */
  const busy = (from: number, params: unknown) => Effect.succeed<ExecuteBatch>({ outputs: [], next: from, result: busyResult(params) })

  /** Serves a request from a release this runner talks with; one from another fails with `ProtocolMismatch` naming both versions. */
  const fromCompatible = <A, E>(headers: Headers.Headers, serve: Effect.Effect<A, E>): Effect.Effect<A, E | ProtocolMismatch> => {
    const problem = callerProblem(headers[VERSIONS_HEADER])
    return problem === undefined ? serve : Effect.fail(new ProtocolMismatch({ reason: problem }))
  }

  /** `fromCompatible` for a call that answers no error: one from another release changes nothing, answers `refused`, and is logged. */
  const onlyFromCompatible = <A>(headers: Headers.Headers, serve: Effect.Effect<A>, refused: A): Effect.Effect<A> =>
    Effect.catch(fromCompatible(headers, serve), (mismatch) => Effect.as(Effect.logWarning(`session ${sessionId}: ${mismatch.message}`), refused))

  return KernelSession.of({
    Execute: (request) =>
      fromCompatible(request.headers, Effect.suspend((): Effect.Effect<ExecuteBatch, SessionCallError> => {
        const { callId, params, from } = request.payload
        const known = callOf(callId)
        if (known !== undefined) return waitOn(known, from)
        const checked = checkParams(params, settings)
        if (Result.isFailure(checked)) {
          const error = checked.failure
          return Effect.fail(error._tag === "InvalidTimeout" ? new InvalidEvalParams({ problem: error.message }) : error)
        }
        const { language, timeoutSeconds } = checked.success
        if (runningCell(language) !== undefined) return busy(from, params)
        // A cell of this language still finishing here after the session's shard moved away
        // and back: its own call waits for it (the ledger then replays its result), another is busy.
        const finishing = handOff.runningCall(sessionId, language)
        if (finishing !== undefined && finishing !== callId) return busy(from, params)
        return startCall(callId, language, timeoutSeconds, params, request.payload.cwd, from)
      }).pipe(Effect.map(answeredHere))),
    Cancel: (request) =>
      onlyFromCompatible(request.headers, Effect.sync(() => {
        const cell = runningCallOf(request.payload.callId)
        if (cell === undefined) return false
        cell.controller.abort()
        return true
      }), false),
    Interrupt: (request) =>
      onlyFromCompatible(request.headers, Effect.suspend(() => {
        const cell = runningCallOf(request.payload.callId)
        if (cell === undefined) return Effect.succeed(false)
        return Effect.as(Effect.andThen(stopLease(cell), Scope.close(cell.scope, Exit.void)), true)
      }), false),
    Reset: (request) => onlyFromCompatible(request.headers, Effect.andThen(tool.endSession(sessionId), Effect.ignore(ledger.end(sessionId), { log: "Debug" })), undefined),
    Shutdown: (request) =>
      onlyFromCompatible(
        request.headers,
        Effect.andThen(tool.endSession(sessionId), Effect.andThen(Effect.ignore(ledger.end(sessionId), { log: "Debug" }), workspace.endSession(sessionId))),
        undefined
      ),
    Status: () => Effect.succeed({ runner: advertised, incarnation: ledger.incarnation, running: [...calls.values()].find((call) => call.end === undefined)?.callId ?? null }),
    Complete: (request) =>
      fromCompatible(request.headers, Effect.flatMap(cwdFor(request.payload.cwd), (cwd) =>
        Effect.mapError(tool.complete(request.payload.params as Parameters<typeof tool.complete>[0], { sessionId, cwd }), toSessionCallError))),
    Inspect: (request) =>
      fromCompatible(request.headers, Effect.flatMap(cwdFor(request.payload.cwd), (cwd) =>
        Effect.mapError(tool.inspect(request.payload.params as Parameters<typeof tool.inspect>[0], { sessionId, cwd }), toSessionCallError)))
  })
})

/**
 * Registers `KernelSession` on this runner: entities idle out after the kernel idle time
 * (`kernel.idleTtlMs`), and a running cell whose caller sends no request for `callLeaseMs` is interrupted.
 */
export const kernelSessionServer = (
  advertised: string,
  callLeaseMs: number
): Layer.Layer<never, never, Sharding | EvalTool | SessionLedger | ArtifactPublisher | Settings | RunnerWorkspace | CellHandOff> =>
  Layer.unwrap(Effect.gen(function*() {
    const settings = yield* Settings
    return KernelSession.toLayer(makeHandlers(advertised, callLeaseMs), {
      concurrency: "unbounded",
      maxIdleTime: Duration.millis(Math.max(settings.kernel.idleTtlMs, 1000))
    })
  }))
