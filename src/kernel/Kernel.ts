/**
 * One kernel = one supervised actor owning one runner process that speaks the protocol
 * (any language's runner). Fibers in the kernel's scope read frames, plain output and the
 * exit; `run` runs one cell at a time and hands its outputs on. Interrupting the caller,
 * the cell's watchdog or the caller's cancel signal deliver SIGINT; a cell that ignores it
 * gets the kernel killed. Closing the scope runs the shutdown escalation.
 *
 * The parts: `Startup` (init and prelude), `FrameInbox` (frames from the data callback),
 * `RequestTable` (requests in flight, frame routing), `BridgeCalls` (a cell's calls to the
 * host), `Queries` (complete, inspect), `Interrupt` (SIGINT and escalation), `Shutdown`
 * (the escalation steps), `Lifecycle` (the pure state machine), `CellWatchdog` over
 * `WatchdogBudget` (the per-cell budget).
 */
import * as NodeFs from "node:fs"
import { Cause, Deferred, Duration, Effect, Exit, Option, Queue, Scope, Semaphore, Stream } from "effect"
import { AgentBridge } from "./AgentBridge.ts"
import { bridgeCalls } from "./BridgeCalls.ts"
import * as CellWatchdog from "./CellWatchdog.ts"
import { type DoneFrame, encodeHostLine, type HostFrame, type RunnerFrame } from "./Frame.ts"
import { decodeFrames } from "./FrameDecoder.ts"
import * as FrameInbox from "./FrameInbox.ts"
import type { Completion, Inspection, IntrospectionFailed } from "./Introspection.ts"
import { interruptCell, type InterruptContext } from "./Interrupt.ts"
import { KernelClosed, KernelDied, type KernelError, KernelStartError } from "./KernelError.ts"
import { type CellOutcome, KernelOutput } from "./KernelOutput.ts"
import { type FrameChannel, KernelSpawner } from "./KernelProcess.ts"
import { KernelTimings } from "./KernelTimings.ts"
import { DeathCause, inFlight, isTerminal, type LifecycleAction, LifecycleEvent, LifecycleState, transition } from "./Lifecycle.ts"
import { queries } from "./Queries.ts"
import { type RestoreOutcome, type SnapshotOptions, stateTransfers, type TakenSnapshot } from "./StateTransfer.ts"
import {
  abortRequest,
  type CellEnding,
  type CellRequest,
  executeLine,
  failRequest,
  frameRouter,
  markDone,
  markStarted,
  offerNow,
  RequestTable,
  stopRequest,
  stopRequestNow
} from "./RequestTable.ts"
import { runShutdown, shutdownSteps } from "./Shutdown.ts"
import { cellSpanFailure, withCurrentSpan, withSpanWhenTraced } from "./Spans.ts"
import { sendPrelude, startUp } from "./Startup.ts"
import { StderrTail } from "./StderrTail.ts"

/** How to start a kernel: the runner command and what the kernel sets up before its first cell. */
export interface KernelLaunch {
  /** The executable, e.g. an interpreter. */
  readonly command: string
  /** Its arguments, e.g. `["-u", bootPath]`. */
  readonly args: ReadonlyArray<string>
  /** Where it speaks the protocol; default `stdio`. */
  readonly channel?: FrameChannel
  /** The kernel's working directory. */
  readonly cwd: string
  /** The process environment, already filtered. */
  readonly env: Readonly<Record<string, string>>
  /** Environment entries the init request applies inside the runner. */
  readonly initEnv?: Readonly<Record<string, string>>
  /** Source run silently as soon as the runner is spawned, before init (the prelude); it must not read the cwd or env at its top level. */
  readonly prelude?: string
  /** A label for logs and spans, e.g. the registry key. */
  readonly key?: string
  /** Skip checking that the command exists before spawning. */
  readonly skipCheck?: boolean
  /** Added to the start error when the command is missing, e.g. how to install or configure it. */
  readonly missingHint?: string
  /** Log every frame both ways. */
  readonly trace?: boolean
  /** Outputs the host adds to whichever cell is running when each arrives (dropped between cells), e.g. the egress proxy's decisions. */
  readonly notes?: Stream.Stream<KernelOutput>
}

/** One cell to run. */
export interface ExecuteRequest {
  readonly code: string
  readonly silent?: boolean
  readonly storeHistory?: boolean
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string>>
  /** The watchdog budget in seconds; no watchdog when absent. */
  readonly timeoutSeconds?: number
  /** Completes when the caller wants the cell stopped (it then ends cancelled, with its outputs). */
  readonly cancel?: Effect.Effect<void>
  /** Aborting it stops the cell as `cancel` does, watched by a listener instead of a fiber. */
  readonly signal?: AbortSignal
}

/**
 * Receives a running cell's outputs one at a time; the next waits until it completes. A
 * handler with `now` may take stream text at once: the kernel offers it stdout and stderr
 * in the pipe's data callback when nothing is queued before them; it answers true when it
 * took the output, false (having changed nothing) to have it handed over as an effect.
 */
export type OutputHandler = ((output: KernelOutput) => Effect.Effect<void>) & {
  readonly now?: (output: KernelOutput) => boolean
}

/** `handler` with a synchronous `now` path (see `OutputHandler`). */
export const outputHandler = (
  handler: (output: KernelOutput) => Effect.Effect<void>,
  now: (output: KernelOutput) => boolean
): OutputHandler => Object.assign((output: KernelOutput) => handler(output), { now })

/** A running kernel. */
export interface Kernel {
  readonly pid: number
  /** Runs one cell, handing each output to `onOutput` in order; callers queue and never interleave. */
  readonly run: (request: ExecuteRequest, onOutput: OutputHandler) => Effect.Effect<CellOutcome, KernelError>
  /** `run` as a stream of outputs ending with `Done`. */
  readonly execute: (request: ExecuteRequest) => Stream.Stream<KernelOutput, KernelError>
  /**
   * Completions for the token before `cursor` (a UTF-16 offset into `code`; default its
   * end). Answered beside a running cell, which it neither waits for nor counts as one.
   */
  readonly complete: (code: string, cursor?: number) => Effect.Effect<Completion, KernelClosed | IntrospectionFailed>
  /** What the name at `cursor` is (detail level 1 adds the source), beside any running cell. */
  readonly inspect: (
    code: string,
    cursor?: number,
    detailLevel?: 0 | 1
  ) => Effect.Effect<Inspection, KernelClosed | IntrospectionFailed>
  /**
   * Asks for the user state between cells (the runner yields to a cell that comes; see
   * PROTOCOL.md, "Snapshots and restores"): the outer effect sends the request, so a cell
   * sent after it runs after it; the inner one waits for the snapshot.
   */
  readonly snapshot: (options: SnapshotOptions) => Effect.Effect<Effect.Effect<TakenSnapshot, KernelClosed>, KernelClosed>
  /** Hands a snapshot's payload back before the first cell; `executionCount` is the count it was saved at. */
  readonly restore: (payload: Uint8Array, executionCount?: number) => Effect.Effect<RestoreOutcome, KernelClosed>
  /** The lifecycle state now. */
  readonly state: Effect.Effect<LifecycleState>
  /** Whether the kernel can still run cells. */
  readonly isAlive: Effect.Effect<boolean>
  /** Completes with the cause once the kernel is dead. */
  readonly dead: Effect.Effect<DeathCause>
  /** Shuts the kernel down now (idempotent); also runs when its scope closes. */
  readonly shutdown: Effect.Effect<void>
}

const OUTPUT_BUFFER = 64

/** Stops the cell when `signal` aborts (at once if it has); returns what removes the listener. */
const watchSignal = (signal: AbortSignal, request: CellRequest): (() => void) | undefined => {
  const stop = () => stopRequestNow(request, "cancel")
  if (signal.aborted) {
    stop()
    return undefined
  }
  signal.addEventListener("abort", stop, { once: true })
  return () => signal.removeEventListener("abort", stop)
}

const cellOutcome = (ended: CellEnding, frame: DoneFrame | undefined, notice: string | undefined): CellOutcome => ({
  status: frame?.status ?? "error",
  executionCount: frame?.executionCount ?? 0,
  cancelled: ended._tag === "stop" || frame?.cancelled === true,
  timedOut: ended._tag === "stop" && ended.reason === "timeout",
  killed: frame === undefined,
  ...(notice === undefined ? {} : { notice })
})

const annotateSpan = (requestId: string, outcome: CellOutcome, outputBytes: number) =>
  withCurrentSpan((span) => {
    span.attribute("kernel.request_id", requestId)
    span.attribute("kernel.status", outcome.status)
    span.attribute("kernel.execution_count", outcome.executionCount)
    span.attribute("kernel.cancelled", outcome.cancelled)
    span.attribute("kernel.timed_out", outcome.timedOut)
    span.attribute("kernel.killed", outcome.killed)
    span.attribute("kernel.output_bytes", outputBytes)
  })

/** A cell run with an output handler, as a stream of its outputs ending with `Done`. */
export const streamOf = <E, R>(
  start: (onOutput: OutputHandler) => Effect.Effect<CellOutcome, E, R>
): Stream.Stream<KernelOutput, E, R> =>
  Stream.callback<KernelOutput, E, R>(
    (queue) =>
      Effect.flatMap(
        start((output) => Effect.asVoid(Queue.offer(queue, output))),
        (outcome) => Effect.andThen(Queue.offer(queue, KernelOutput.Done(outcome)), Queue.end(queue))
      ),
    { bufferSize: OUTPUT_BUFFER }
  )

const checkExecutable = (launch: KernelLaunch): Effect.Effect<void, KernelStartError> =>
  Effect.try({
    try: () => NodeFs.accessSync(launch.command, NodeFs.constants.X_OK),
    catch: () =>
      new KernelStartError({
        reason: `the runner command ${launch.command} does not exist or is not executable` +
          (launch.missingHint === undefined ? "" : `. ${launch.missingHint}`),
        stderr: ""
      })
  })

/** Where and for whom a spawned runner starts up: the init request's cwd and env, and the kernel's label. */
export interface KernelBinding {
  readonly cwd: string
  readonly initEnv?: Readonly<Record<string, string>> | undefined
  readonly key?: string | undefined
}

/** A spawned runner bound to no session yet (a spare), which has been sent only the prelude: `start` binds it (init) and gives the kernel, once. */
export interface PendingKernel {
  readonly pid: number
  /** Whether its process is still alive. */
  readonly isAlive: Effect.Effect<boolean>
  /** Completes with the cause once it is dead. */
  readonly dead: Effect.Effect<DeathCause>
  /** Shuts it down now (idempotent); also runs when its scope closes. */
  readonly shutdown: Effect.Effect<void>
  /** Sends init with the binding's cwd and env and awaits it and the prelude; the kernel's bridge calls go to the `AgentBridge` in context. */
  readonly start: (binding: KernelBinding) => Effect.Effect<Kernel, KernelStartError, AgentBridge>
}

/** Starts a kernel in the current scope; the scope's close shuts it down. */
export const make = (
  launch: KernelLaunch
): Effect.Effect<Kernel, KernelStartError, Scope.Scope | KernelSpawner | AgentBridge> =>
  Effect.flatMap(spawn(launch), (pending) => pending.start({ cwd: launch.cwd, initEnv: launch.initEnv, key: launch.key }))

/** Spawns a runner in the current scope (in `launch.cwd`, with `launch.env`) without starting it up; the scope's close shuts it down. */
export const spawn = Effect.fnUntraced(function*(
  launch: KernelLaunch
): Effect.fn.Return<PendingKernel, KernelStartError, Scope.Scope | KernelSpawner> {
  const spawner = yield* KernelSpawner
  const timings = yield* KernelTimings
  let label = launch.key ?? launch.cwd
  let bridge: AgentBridge["Service"] | undefined
  if (launch.skipCheck !== true) yield* checkExecutable(launch)

  const proc = yield* spawner
    .spawn({
      command: launch.command,
      args: launch.args,
      ...(launch.channel === undefined ? {} : { channel: launch.channel }),
      cwd: launch.cwd,
      env: launch.env
    })
    .pipe(Effect.mapError((error) => new KernelStartError({ reason: error.message, stderr: "" })))

  let lifecycle: LifecycleState = LifecycleState.Starting()
  const deadSignal = yield* Deferred.make<DeathCause>()
  const stderrTail = new StderrTail()
  const table = new RequestTable()

  const sendLine = (line: string | Uint8Array): Effect.Effect<void, KernelClosed> =>
    Effect.catch(proc.write(line), () => Effect.fail(new KernelClosed({ reason: "its process no longer reads requests" })))
  const writeLine = launch.trace === true
    ? (line: string | Uint8Array) =>
      Effect.andThen(Effect.logInfo(`ipc -> ${(typeof line === "string" ? line : Buffer.from(line.subarray(0, 200)).toString("latin1")).trimEnd().slice(0, 200)}`), sendLine(line))
    : sendLine
  const write = (frame: HostFrame) => writeLine(encodeHostLine(frame))

  const failActive = (requestId: string, cause: DeathCause) =>
    Effect.suspend(() => {
      const request = table.get(requestId)
      if (request === undefined) return Effect.void
      return DeathCause.$match(cause, {
        Exited: ({ exit }) => failRequest(request, new KernelDied({ exit, stderr: stderrTail.text() })),
        Shutdown: () => failRequest(request, new KernelClosed({ reason: "it was shut down while the cell ran" })),
        Killed: () => Effect.void
      })
    })

  const actionEffect = (action: LifecycleAction): Effect.Effect<void> => {
    switch (action._tag) {
      case "SendSigint":
        return proc.signal("SIGINT")
      case "FailActive":
        return failActive(action.requestId, action.cause)
      case "Escalate":
        return Effect.void
    }
  }

  const dispatch = (event: LifecycleEvent): Effect.Effect<void> =>
    Effect.suspend(() => {
      const next = transition(lifecycle, event)
      lifecycle = next.state
      const effects = next.actions.map(actionEffect)
      if (next.state._tag === "Dead") effects.push(Effect.asVoid(Deferred.succeed(deadSignal, next.state.cause)))
      return effects.length === 0 ? Effect.void : Effect.all(effects, { discard: true })
    })

  const shutdownOnce = yield* Effect.cached(
    Effect.uninterruptible(
      Effect.gen(function*() {
        const state = lifecycle
        const busy = inFlight(state) !== undefined || (state._tag === "ShuttingDown" && state.cause._tag === "Killed")
        yield* dispatch(LifecycleEvent.Shutdown())
        yield* runShutdown(proc, shutdownSteps(timings.shutdownGrace, busy)).pipe(
          Effect.withSpan("kernel.shutdown", { attributes: { "kernel.key": label, "kernel.pid": proc.pid } }, { captureStackTrace: false })
        )
        const exit = yield* proc.exitNow
        if (exit !== undefined) yield* dispatch(LifecycleEvent.Exited({ exit }))
      })
    )
  )
  yield* Effect.addFinalizer(() => shutdownOnce)

  const route = frameRouter(table, {
    onDone: (_, frame) => dispatch(LifecycleEvent.Done({ requestId: frame.id })),
    onBridge: (request, call) => bridge === undefined ? Effect.void : bridgeCalls(bridge, write, label)(request, call)
  })

  /** The hot frames, taken in the data callback when nothing is queued before them. */
  const takeNow = (frame: RunnerFrame): boolean => {
    if (frame.type === "stdout" || frame.type === "stderr") {
      const request = table.get(frame.id)
      if (request?.now === undefined) return false
      return offerNow(request, frame.type === "stdout" ? KernelOutput.Stdout({ text: frame.data }) : KernelOutput.Stderr({ text: frame.data }))
    }
    if (frame.type !== "started" && frame.type !== "done") return false
    const request = table.get(frame.id)
    if (request === undefined) return frame.type === "started"
    if (frame.type === "started") {
      markStarted(request)
      return true
    }
    const next = transition(lifecycle, LifecycleEvent.Done({ requestId: frame.id }))
    if (next.actions.length > 0 || next.state._tag === "Dead") return false
    lifecycle = next.state
    markDone(request, frame)
    return true
  }

  const stdoutDone = yield* Deferred.make<void>()
  if (proc.listenFrames !== undefined) {
    const drained = yield* FrameInbox.make(proc.listenFrames, { takeNow, route, trace: launch.trace === true })
    yield* drained.pipe(Effect.ensuring(Deferred.succeed(stdoutDone, undefined)), Effect.forkScoped)
  } else {
    yield* decodeFrames(proc.frames ?? proc.stdout, { trace: launch.trace === true }).pipe(
      Stream.runForEach(route),
      Effect.ensuring(Deferred.succeed(stdoutDone, undefined)),
      Effect.forkScoped
    )
  }
  const plainOutput = (bytes: Stream.Stream<Uint8Array>, toOutput: (text: string) => KernelOutput, tail: boolean) =>
    bytes.pipe(
      Stream.decodeText(),
      Stream.runForEach((text) => {
        if (tail) stderrTail.push(text)
        const request = table.current
        return request === undefined ? Effect.void : request.emit(toOutput(text))
      }),
      Effect.forkScoped
    )
  yield* plainOutput(proc.stderr, (text) => KernelOutput.Stderr({ text }), true)
  if (launch.notes !== undefined) {
    yield* launch.notes.pipe(
      Stream.runForEach((output) => {
        const request = table.current
        return request === undefined ? Effect.void : request.emit(output)
      }),
      Effect.forkScoped
    )
  }
  if (proc.frames !== undefined) yield* plainOutput(proc.stdout, (text) => KernelOutput.Stdout({ text }), false)
  yield* proc.exited.pipe(
    Effect.tap(() => Effect.interruptible(Deferred.await(stdoutDone)).pipe(Effect.timeoutOption(Duration.millis(500)))),
    Effect.flatMap((exit) => dispatch(LifecycleEvent.Exited({ exit }))),
    Effect.forkScoped
  )

  const preludeRun = yield* sendPrelude({ table, writeLine, stderrTail }, launch.prelude)

  let started = false
  const start = Effect.fnUntraced(function*(binding: KernelBinding) {
    if (started) return yield* new KernelStartError({ reason: "this runner was already started", stderr: "" })
    started = true
    bridge = yield* AgentBridge
    if (binding.key !== undefined) label = binding.key
    yield* startUp({
      table,
      writeLine,
      stderrTail,
      dead: Deferred.await(deadSignal),
      framesDrained: Deferred.await(stdoutDone),
      cwd: binding.cwd,
      initEnv: binding.initEnv,
      prelude: preludeRun,
      startTimeout: timings.startTimeout,
      label,
      pid: proc.pid
    })
    yield* dispatch(LifecycleEvent.Ready())


    const permits = yield* Semaphore.make(1)
    const interrupts: InterruptContext = { escalation: timings.interruptEscalation, dispatch, shutdown: shutdownOnce, label }

    /** What a cell leaves running beside it, stopped when it ends (no finalizer: `onExit`). */
    const endCell = (request: CellRequest, unwatch: (() => void) | undefined) =>
      Effect.suspend(() => {
        table.remove(request)
        unwatch?.()
        const stopWatchdog = request.watchdog?.stop
        const bridgeScope = request.bridgeScope
        if (bridgeScope === undefined) return stopWatchdog ?? Effect.void
        const closeBridge = Scope.close(bridgeScope, Exit.void)
        return stopWatchdog === undefined ? closeBridge : Effect.andThen(stopWatchdog, closeBridge)
      })

    const runCell = Effect.fnUntraced(
      function*(req: ExecuteRequest, onOutput: OutputHandler, traced: boolean): Effect.fn.Return<CellOutcome, KernelError> {
        const state = lifecycle
        if (state._tag === "Dead" && state.cause._tag === "Exited") {
          return yield* new KernelDied({ exit: state.cause.exit, stderr: stderrTail.text() })
        }
        if (isTerminal(state)) return yield* new KernelClosed({ reason: "it was shut down" })
        const request: CellRequest = table.add((output) => {
          if (output._tag === "Stdout" || output._tag === "Stderr") request.textChars += output.text.length
          return Effect.catchCause(
            Effect.suspend(() => onOutput(output)),
            (cause) => Cause.hasInterruptsOnly(cause) ? Effect.void : abortRequest(request, cause)
          )
        })
        request.now = onOutput.now
        let unwatch: (() => void) | undefined
        const outcomeOf = (ended: CellEnding): Effect.Effect<CellOutcome, KernelError> => {
          const outcome = ended._tag === "finished"
            ? Effect.succeed(cellOutcome(ended, ended.frame, undefined))
            : Effect.map(interruptCell(interrupts, request, ended.reason, req.timeoutSeconds), ({ frame, notice }) =>
              cellOutcome(ended, frame, notice))
          return traced ? Effect.tap(outcome, (done) => annotateSpan(request.id, done, request.textChars)) : outcome
        }
        const send = writeLine(executeLine(request.id, req)).pipe(
          Effect.catch(() => failRequest(request, new KernelClosed({ reason: "its process no longer reads requests" })))
        )
        const watched = req.timeoutSeconds === undefined
          ? send
          : Effect.flatMap(CellWatchdog.start(Duration.seconds(req.timeoutSeconds), stopRequest(request, "timeout")), (watchdog) => {
            request.watchdog = watchdog
            return send
          })
        const signal = req.signal
        const cancel = req.cancel
        const armed = signal !== undefined
          ? Effect.andThen(Effect.sync(() => (unwatch = watchSignal(signal, request))), watched)
          : cancel === undefined
          ? watched
          : Effect.flatMap(Effect.forkDetach(Effect.interruptible(Effect.andThen(cancel, stopRequest(request, "cancel")))), (fiber) => {
            unwatch = () => fiber.interruptUnsafe()
            return watched
          })
        const cell = dispatch(LifecycleEvent.Execute({ requestId: request.id })).pipe(
          Effect.andThen(armed),
          Effect.andThen(Deferred.await(request.ended)),
          Effect.flatMap(outcomeOf)
        )
        return yield* cell.pipe(
          Effect.onExit(() =>
            request.done !== undefined || isTerminal(lifecycle)
              ? endCell(request, unwatch)
              : Effect.andThen(Effect.ignore(interruptCell(interrupts, request, "abandon", req.timeoutSeconds)), endCell(request, unwatch))
          )
        )
      },
      permits.withPermits(1)
    )

    const run = (req: ExecuteRequest, onOutput: OutputHandler): Effect.Effect<CellOutcome, KernelError> =>
      withSpanWhenTraced((traced) => runCell(req, onOutput, traced), "kernel.execute", {
        attributes: { "kernel.key": label, "kernel.pid": proc.pid },
        captureStackTrace: false
      }, cellSpanFailure)

    const execute = (req: ExecuteRequest): Stream.Stream<KernelOutput, KernelError> => streamOf((emit) => run(req, emit))

    const queryContext = {
      table,
      write,
      writeLine,
      closed: () => isTerminal(lifecycle),
      dead: Deferred.await(deadSignal)
    }
    const { complete, inspect } = queries(queryContext)
    const { snapshot, restore } = stateTransfers(queryContext)

    return {
      pid: proc.pid,
      run,
      execute,
      complete,
      inspect,
      snapshot,
      restore,
      state: Effect.sync(() => lifecycle),
      isAlive: Effect.sync(() => !isTerminal(lifecycle)),
      dead: Deferred.await(deadSignal),
      shutdown: shutdownOnce
    } satisfies Kernel
  })

  return {
    pid: proc.pid,
    isAlive: Effect.sync(() => !isTerminal(lifecycle)),
    dead: Deferred.await(deadSignal),
    shutdown: shutdownOnce,
    start
  } satisfies PendingKernel
})

/** Runs a cell and collects its outputs; convenient for tests and one-shot callers. */
export const executeCollect = (
  kernel: Kernel,
  request: ExecuteRequest
): Effect.Effect<ReadonlyArray<KernelOutput>, KernelError> =>
  kernel.execute(request).pipe(Stream.runCollect, Effect.map((chunk) => Array.from(chunk)))

/** Whether an exit of `execute` was a kernel death (the registry's cue to replace and retry). */
export const isKernelDeath = <A>(exit: Exit.Exit<A, KernelError>): boolean =>
  Exit.isFailure(exit) && Option.exists(Cause.findErrorOption(exit.cause), (error) => error._tag === "KernelDied")
