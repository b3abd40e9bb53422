/**
 * One kernel = one supervised actor owning one runner process: the Python runner, or any
 * other runner speaking the same protocol (the Node one). Fibers in the kernel's scope
 * read frames, stdout, stderr and the exit; `execute` runs one cell at a time and streams
 * its outputs. Interrupting the consumer, the cell's watchdog or the caller's cancel
 * signal deliver SIGINT; a cell that ignores it gets the kernel killed. Closing the scope
 * runs the shutdown escalation: exit request, SIGTERM, SIGKILL to the process group.
 */
import * as NodeFs from "node:fs"
import {
  Cause,
  Deferred,
  Duration,
  Effect,
  Exit,
  FiberSet,
  Mailbox,
  Option,
  Scope,
  Stream
} from "effect"
import { AgentBridge, type AgentBridgeError } from "../services/AgentBridge.ts"
import * as CellWatchdog from "./CellWatchdog.ts"
import { decodeFrames } from "./FrameDecoder.ts"
import {
  BridgeResultFrame,
  CompleteRequestFrame,
  type CompleteReplyFrame,
  type DoneFrame,
  encodeHostLine,
  ExecuteRequestFrame,
  ExitRequestFrame,
  type HostFrame,
  InspectRequestFrame,
  type InspectReplyFrame,
  type RunnerFrame,
  STATUS_MIME
} from "./Frame.ts"
import {
  type Completion,
  completionOf,
  type Inspection,
  inspectionOf,
  INTROSPECT_TIMEOUT,
  IntrospectionFailed,
  MAX_INTROSPECT_CODE,
  toCodePoints
} from "./Introspection.ts"
import { KernelClosed, KernelDied, type KernelError, KernelStartError } from "./KernelError.ts"
import { type CellOutcome, KernelOutput } from "./KernelOutput.ts"
import {
  describeExit,
  type FrameChannel,
  type KernelProcess,
  KernelSpawner,
  type ProcessExit,
  type SpawnSpec
} from "./KernelProcess.ts"
import { KernelTimings } from "./KernelTimings.ts"
import {
  DeathCause,
  type InterruptReason,
  isTerminal,
  LifecycleEvent,
  LifecycleState,
  transition
} from "./Lifecycle.ts"
import { cellSpanFailure, withSpanWhenTraced } from "./Spans.ts"
import { StderrTail } from "./StderrTail.ts"

/** A Python runner, spawned as `<python> -u <runnerPath>`. */
export interface PythonLaunch {
  /** The interpreter executable. */
  readonly python: string
  /** The runner script. */
  readonly runnerPath: string
  readonly command?: never
}

/** Any runner speaking the protocol, spawned as `<command> <args...>`. */
export interface CommandLaunch {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** Where it speaks the protocol; default `stdio`. */
  readonly channel?: FrameChannel
  readonly python?: never
}

/** What every kernel needs besides its launch. */
export interface KernelOptions {
  /** The kernel's working directory. */
  readonly cwd: string
  /** The process environment, already filtered. */
  readonly env: Readonly<Record<string, string>>
  /** Environment entries the init request applies inside the runner. */
  readonly initEnv?: Readonly<Record<string, string>>
  /** Source run silently after init (the prelude). */
  readonly prelude?: string
  /** A label for logs and spans, e.g. the registry key. */
  readonly key?: string
  /** Skip checking that the interpreter exists before spawning. */
  readonly skipCheck?: boolean
  /** Log every frame both ways. */
  readonly trace?: boolean
}

/** How to start a kernel. */
export type KernelSpec = (PythonLaunch | CommandLaunch) & KernelOptions

/** The spawn a spec describes. */
export const launchOf = (spec: KernelSpec): Pick<SpawnSpec, "command" | "args" | "channel"> =>
  spec.command === undefined
    ? { command: spec.python, args: ["-u", spec.runnerPath] }
    : { command: spec.command, args: spec.args, ...(spec.channel === undefined ? {} : { channel: spec.channel }) }

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
}

/** A running kernel. */
export interface PythonKernel {
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
  /** What the name at `cursor` is (IPython's `obj?`; detail level 1 adds the source), beside any running cell. */
  readonly inspect: (
    code: string,
    cursor?: number,
    detailLevel?: 0 | 1
  ) => Effect.Effect<Inspection, KernelClosed | IntrospectionFailed>
  /** The lifecycle state now. */
  readonly state: Effect.Effect<LifecycleState>
  /** Whether the kernel can still run cells. */
  readonly isAlive: Effect.Effect<boolean>
  /** Completes with the cause once the kernel is dead. */
  readonly dead: Effect.Effect<DeathCause>
  /** Shuts the kernel down now (idempotent); also runs when its scope closes. */
  readonly shutdown: Effect.Effect<void>
}

interface ActiveRequest {
  readonly id: string
  readonly emit: (output: KernelOutput) => Effect.Effect<void>
  /** Completes when the runner says the cell began; only then does SIGINT reach it. */
  readonly started: Deferred.Deferred<void>
  readonly done: Deferred.Deferred<DoneFrame, KernelError>
  /** Whichever comes first: the cell's `done`, or a reason to stop it (timeout, cancel). */
  readonly first: Deferred.Deferred<FirstEvent, KernelError>
  /** The cell's scope: its bridge calls run in it and end with it. */
  readonly scope: Scope.Scope
  /** Made at the first bridge call. */
  bridges: FiberSet.FiberSet | undefined
  watchdog: CellWatchdog.CellWatchdog | undefined
}

type FirstEvent =
  | { readonly _tag: "finished"; readonly frame: DoneFrame }
  | { readonly _tag: "stop"; readonly reason: InterruptReason }

const stopBecause = (reason: InterruptReason): FirstEvent => ({ _tag: "stop", reason })

const failRequest = (request: ActiveRequest, error: KernelError) =>
  Effect.zipRight(Deferred.fail(request.done, error), Deferred.fail(request.first, error))

const MAILBOX_CAPACITY = 64

const statusOf = (bundle: Readonly<Record<string, unknown>>): { op: string; fields: Record<string, unknown> } | undefined => {
  const status = bundle[STATUS_MIME]
  if (typeof status !== "object" || status === null || Array.isArray(status)) return undefined
  const { op, ...fields } = status as Record<string, unknown>
  return typeof op === "string" ? { op, fields } : undefined
}

const timeoutNotice = (seconds: number): string =>
  `eval cell timed out after ${seconds}s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted.`

const killedNotice = (reason: InterruptReason, seconds: number | undefined, escalation: Duration.Duration): string => {
  const why = reason === "timeout" && seconds !== undefined ? `eval cell timed out after ${seconds}s` : "eval cell was cancelled"
  return `${why}; the kernel did not stop within ${Duration.format(escalation)} of SIGINT and was killed. The next call starts a fresh kernel; earlier state is gone.`
}

/** Receives a running cell's outputs one at a time; the next waits until it completes. */
export type OutputHandler = (output: KernelOutput) => Effect.Effect<void>

const annotateSpan = (requestId: string, outcome: CellOutcome, outputBytes: number) =>
  Effect.flatMap(Effect.option(Effect.currentSpan), (span) =>
    Effect.sync(() => {
      if (span._tag === "None") return
      span.value.attribute("kernel.request_id", requestId)
      span.value.attribute("kernel.status", outcome.status)
      span.value.attribute("kernel.execution_count", outcome.executionCount)
      span.value.attribute("kernel.cancelled", outcome.cancelled)
      span.value.attribute("kernel.timed_out", outcome.timedOut)
      span.value.attribute("kernel.killed", outcome.killed)
      span.value.attribute("kernel.output_bytes", outputBytes)
    }))

const executeFrame = (id: string, req: ExecuteRequest): ExecuteRequestFrame =>
  new ExecuteRequestFrame({
    id,
    code: req.code,
    silent: req.silent ?? false,
    storeHistory: req.storeHistory ?? true,
    ...(req.cwd === undefined ? {} : { cwd: req.cwd }),
    ...(req.env === undefined ? {} : { env: { ...req.env } })
  }, { disableValidation: true })

/** A cell run with an output handler, as a stream of its outputs ending with `Done`. */
export const streamOf = <E, R>(
  start: (onOutput: OutputHandler) => Effect.Effect<CellOutcome, E, R>
): Stream.Stream<KernelOutput, E, R> =>
  Stream.unwrapScoped(
    Effect.gen(function*() {
      const mailbox = yield* Mailbox.make<KernelOutput, E>({ capacity: MAILBOX_CAPACITY })
      yield* Effect.addFinalizer(() => mailbox.shutdown)
      yield* start((output) => Effect.asVoid(mailbox.offer(output))).pipe(
        Effect.flatMap((outcome) => Effect.zipRight(mailbox.offer(KernelOutput.Done(outcome)), mailbox.end)),
        Effect.catchAll((error) => mailbox.fail(error)),
        Effect.forkScoped
      )
      return Mailbox.toStream(mailbox)
    })
  )

const checkExecutable = (spec: KernelSpec): Effect.Effect<void, KernelStartError> => {
  const executable = spec.command ?? spec.python
  return Effect.try({
    try: () => NodeFs.accessSync(executable, NodeFs.constants.X_OK),
    catch: () =>
      new KernelStartError({
        reason: spec.command === undefined
          ? `the interpreter ${executable} does not exist or is not executable. Install Python 3.8+ or set python.interpreter; \`veyyon setup python --check\` shows what is resolved`
          : `the runner command ${executable} does not exist or is not executable`,
        stderr: ""
      })
  })
}

/** Starts a kernel in the current scope; the scope's close shuts it down. */
export const make = (
  spec: KernelSpec
): Effect.Effect<PythonKernel, KernelStartError, Scope.Scope | KernelSpawner | AgentBridge> =>
  Effect.gen(function*() {
    const spawner = yield* KernelSpawner
    const bridge = yield* AgentBridge
    const timings = yield* KernelTimings
    const label = spec.key ?? spec.cwd
    if (spec.skipCheck !== true) yield* checkExecutable(spec)

    const proc = yield* spawner
      .spawn({ ...launchOf(spec), cwd: spec.cwd, env: spec.env })
      .pipe(Effect.mapError((error) => new KernelStartError({ reason: error.message, stderr: "" })))

    let lifecycle: LifecycleState = LifecycleState.Starting()
    const deadSignal = yield* Deferred.make<DeathCause>()
    const stderrTail = new StderrTail()
    /** Requests sent and not finished, by id: the start-up requests go out together, cells one at a time. */
    const open = new Map<string, ActiveRequest>()
    /** The newest open request: raw output of the process belongs to it. */
    let current: ActiveRequest | undefined
    let nextId = 0
    /** Complete and inspect requests awaiting their reply, by id. */
    const queries = new Map<string, Deferred.Deferred<CompleteReplyFrame | InspectReplyFrame>>()

    const write = (frame: HostFrame): Effect.Effect<void, KernelClosed> => {
      const line = encodeHostLine(frame)
      return Effect.zipRight(
        spec.trace === true ? Effect.logInfo(`ipc -> ${line.trimEnd().slice(0, 200)}`) : Effect.void,
        proc.write(line).pipe(Effect.mapError(() => new KernelClosed({ reason: "its process no longer reads requests" })))
      )
    }

    const failActive = (requestId: string, cause: DeathCause) =>
      Effect.suspend(() => {
        const request = open.get(requestId)
        if (request === undefined) return Effect.void
        return DeathCause.$match(cause, {
          Exited: ({ exit }) => failRequest(request, new KernelDied({ exit, stderr: stderrTail.text() })),
          Shutdown: () => failRequest(request, new KernelClosed({ reason: "it was shut down while the cell ran" })),
          Killed: () => Effect.void
        })
      })

    const shutdownSequence = (proc: KernelProcess) =>
      Effect.gen(function*() {
        const span = yield* Effect.currentSpan.pipe(Effect.option)
        const step = (name: string) =>
          Effect.sync(() => Option.map(span, (s) => s.event(name, BigInt(Date.now()) * 1_000_000n)))
        const exitedWithin = (grace: Duration.Duration) =>
          Effect.interruptible(proc.exited).pipe(Effect.timeoutOption(grace), Effect.map(Option.isSome))
        if ((yield* proc.exitNow) === undefined) {
          yield* step("exit-request")
          yield* proc.write(encodeHostLine(new ExitRequestFrame({ type: "exit" }))).pipe(Effect.ignore)
          if (!(yield* exitedWithin(timings.shutdownGrace))) {
            yield* step("SIGTERM")
            yield* proc.signal("SIGTERM")
            if (!(yield* exitedWithin(timings.shutdownGrace))) {
              yield* step("SIGKILL")
              yield* proc.signal("SIGKILL")
              yield* Effect.interruptible(proc.exited).pipe(Effect.timeoutOption(timings.shutdownGrace))
            }
          }
        }
        yield* proc.signal("SIGKILL")
      }).pipe(Effect.withSpan("kernel.shutdown", { attributes: { "kernel.key": label, "kernel.pid": proc.pid }, captureStackTrace: false }))

    const shutdownOnce = yield* Effect.cached(
      Effect.uninterruptible(
        Effect.gen(function*() {
          yield* dispatch(LifecycleEvent.Shutdown())
          yield* shutdownSequence(proc)
          const exit = yield* proc.exitNow
          if (exit !== undefined) yield* dispatch(LifecycleEvent.Exited({ exit }))
        })
      )
    )

    const actionEffect = (action: ReturnType<typeof transition>["actions"][number]): Effect.Effect<void> => {
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

    yield* Effect.addFinalizer(() => shutdownOnce)

    const onBridge = (request: ActiveRequest, frame: Extract<RunnerFrame, { type: "bridge" }>) =>
      Effect.gen(function*() {
        const pause = request.watchdog?.pause ?? Effect.void
        const resume = request.watchdog?.resume ?? Effect.void
        yield* pause
        const answer = yield* bridge
          .call({
            method: frame.method,
            params: frame.params,
            callId: frame.callId,
            requestId: frame.id,
            ...(spec.key === undefined ? {} : { kernelKey: spec.key })
          })
          .pipe(
            Effect.map((value) => new BridgeResultFrame({ type: "bridge_result", callId: frame.callId, ok: true, value })),
            Effect.catchAllCause((cause) => {
              const failure = Cause.failureOption(cause)
              const error = Option.isSome(failure)
                ? { name: (failure.value as AgentBridgeError).name, message: (failure.value as AgentBridgeError).message }
                : { name: "BridgeDefect", message: Cause.pretty(cause) }
              return Cause.isInterruptedOnly(cause)
                ? Effect.interrupt
                : Effect.succeed(new BridgeResultFrame({ type: "bridge_result", callId: frame.callId, ok: false, error }))
            }),
            Effect.ensuring(resume)
          )
        yield* write(answer).pipe(Effect.ignore)
      })

    const route = (frame: RunnerFrame): Effect.Effect<void> => {
      if (frame.type === "complete_reply" || frame.type === "inspect_reply") {
        const query = queries.get(frame.id)
        return query === undefined
          ? Effect.logDebug(`dropped a ${frame.type} for ${frame.id}, which nobody awaits`)
          : Effect.asVoid(Deferred.succeed(query, frame))
      }
      if (frame.type === "error" && (frame.id === undefined || frame.id === null)) {
        return Effect.logWarning(`runner reported an error outside any request: ${frame.ename}: ${frame.evalue}`)
      }
      const request = typeof frame.id === "string" ? open.get(frame.id) : undefined
      if (request === undefined) {
        return frame.type === "started"
          ? Effect.void
          : Effect.logDebug(`dropped a ${frame.type} frame for request ${frame.id}, which is not running`)
      }
      switch (frame.type) {
        case "started":
          return Deferred.succeed(request.started, undefined)
        case "stdout":
          return request.emit(KernelOutput.Stdout({ text: frame.data }))
        case "stderr":
          return request.emit(KernelOutput.Stderr({ text: frame.data }))
        case "result":
          return request.emit(KernelOutput.Result({ bundle: frame.bundle }))
        case "error":
          return request.emit(
            KernelOutput.Error({ ename: frame.ename, evalue: frame.evalue, traceback: frame.traceback })
          )
        case "display": {
          const status = statusOf(frame.bundle)
          if (status === undefined) return request.emit(KernelOutput.Display({ bundle: frame.bundle }))
          const watchdog = request.watchdog
          const control =
            status.op === "timeout" && watchdog !== undefined
              ? status.fields.action === "pause"
                ? watchdog.pause
                : status.fields.action === "resume"
                ? watchdog.resume
                : Effect.void
              : Effect.void
          return Effect.zipRight(control, request.emit(KernelOutput.Status(status)))
        }
        case "done":
          return Effect.all([
            dispatch(LifecycleEvent.Done({ requestId: frame.id })),
            Deferred.succeed(request.done, frame),
            Deferred.succeed(request.first, { _tag: "finished", frame })
          ], { discard: true })
        case "bridge":
          return Effect.suspend(() =>
            request.bridges === undefined
              ? Effect.tap(Scope.extend(FiberSet.make(), request.scope), (set) => Effect.sync(() => request.bridges = set))
              : Effect.succeed(request.bridges)
          ).pipe(Effect.flatMap((set) => FiberSet.run(set, onBridge(request, frame))), Effect.asVoid)
      }
    }

    const stdoutDone = yield* Deferred.make<void>()
    yield* decodeFrames(proc.frames ?? proc.stdout, { trace: spec.trace === true }).pipe(
      Stream.runForEach(route),
      Effect.ensuring(Deferred.succeed(stdoutDone, undefined)),
      Effect.forkScoped
    )
    const plainOutput = (bytes: Stream.Stream<Uint8Array>, toOutput: (text: string) => KernelOutput, tail: boolean) =>
      bytes.pipe(
        Stream.decodeText(),
        Stream.runForEach((text) => {
          if (tail) stderrTail.push(text)
          const request = current
          return request === undefined ? Effect.void : request.emit(toOutput(text))
        }),
        Effect.forkScoped
      )
    yield* plainOutput(proc.stderr, (text) => KernelOutput.Stderr({ text }), true)
    if (proc.frames !== undefined) yield* plainOutput(proc.stdout, (text) => KernelOutput.Stdout({ text }), false)
    yield* proc.exited.pipe(
      Effect.tap(() => Effect.interruptible(Deferred.await(stdoutDone)).pipe(Effect.timeoutOption(Duration.millis(500)))),
      Effect.flatMap((exit) => dispatch(LifecycleEvent.Exited({ exit }))),
      Effect.forkScoped
    )

    const begin = (emit: (output: KernelOutput) => Effect.Effect<void>) =>
      Effect.gen(function*() {
        const request: ActiveRequest = {
          id: `r${++nextId}`,
          emit,
          started: yield* Deferred.make<void>(),
          done: yield* Deferred.make<DoneFrame, KernelError>(),
          first: yield* Deferred.make<FirstEvent, KernelError>(),
          scope: yield* Effect.scope,
          bridges: undefined,
          watchdog: undefined
        }
        open.set(request.id, request)
        current = request
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            open.delete(request.id)
            if (current === request) current = undefined
          })
        )
        return request
      })

    /** Sends one silent start-up request; the returned effect awaits its end. */
    const sendStartRequest = (code: string, extra: { cwd?: string; env?: Readonly<Record<string, string>> }) =>
      Effect.gen(function*() {
        const errors: Array<string> = []
        const request = yield* begin((output) =>
          Effect.sync(() => {
            if (output._tag === "Error") errors.push(`${output.ename}: ${output.evalue}`)
          })
        )
        yield* write(executeFrame(request.id, { code, silent: true, storeHistory: false, ...extra }))
        return Effect.flatMap(Deferred.await(request.done), (done) =>
          done.status === "error"
            ? new KernelStartError({
              reason: `the start-up code failed: ${errors.join("; ") || "unknown error"}`,
              stderr: stderrTail.text()
            })
            : Effect.void)
      })

    const startError = (error: unknown): KernelStartError =>
      error instanceof KernelStartError
        ? error
        : error instanceof KernelDied
        ? new KernelStartError({ reason: `the runner exited during start-up (${describeExit(error.exit)})`, stderr: error.stderr })
        : new KernelStartError({ reason: String((error as Error)?.message ?? error), stderr: stderrTail.text() })

    const deathDuringStart = Deferred.await(deadSignal).pipe(
      Effect.flatMap((cause) =>
        Effect.gen(function*() {
          const exit: ProcessExit = cause._tag === "Exited" ? cause.exit : { code: null, signal: null }
          yield* Deferred.await(stdoutDone).pipe(Effect.timeoutOption(Duration.millis(200)))
          return yield* new KernelStartError({
            reason: `the runner exited during start-up (${describeExit(exit)})`,
            stderr: stderrTail.text()
          })
        })
      )
    )

    yield* Effect.scoped(Effect.gen(function*() {
      const init = yield* sendStartRequest("", { cwd: spec.cwd, ...(spec.initEnv === undefined ? {} : { env: spec.initEnv }) })
      const prelude = spec.prelude !== undefined && spec.prelude.length > 0 ? yield* sendStartRequest(spec.prelude, {}) : Effect.void
      yield* init
      yield* prelude
    })).pipe(
      Effect.mapError(startError),
      Effect.raceFirst(deathDuringStart),
      Effect.timeoutFail({
        duration: timings.startTimeout,
        onTimeout: () =>
          new KernelStartError({
            reason: `start-up took longer than ${Duration.format(timings.startTimeout)}`,
            stderr: stderrTail.text()
          })
      }),
      Effect.withSpan("kernel.start", { attributes: { "kernel.key": label, "kernel.pid": proc.pid }, captureStackTrace: false })
    )
    yield* dispatch(LifecycleEvent.Ready())

    const permits = yield* Effect.makeSemaphore(1)

    const interruptCell = (
      request: ActiveRequest,
      reason: InterruptReason,
      timeoutSeconds: number | undefined
    ): Effect.Effect<{ readonly frame: DoneFrame | undefined; readonly notice?: string }, KernelError> =>
      Effect.gen(function*() {
        const finished = Effect.interruptible(Deferred.await(request.done))
        const began = yield* Effect.interruptible(Deferred.await(request.started)).pipe(
          Effect.raceFirst(Effect.asVoid(finished)),
          Effect.timeoutOption(timings.interruptEscalation),
          Effect.map(Option.isSome)
        )
        if (began) yield* dispatch(LifecycleEvent.Interrupt({ requestId: request.id, reason }))
        const answered = began
          ? yield* finished.pipe(Effect.timeoutOption(timings.interruptEscalation))
          : Option.none<DoneFrame>()
        if (Option.isSome(answered)) {
          return reason === "timeout" && timeoutSeconds !== undefined
            ? { frame: answered.value, notice: timeoutNotice(timeoutSeconds) }
            : { frame: answered.value }
        }
        yield* dispatch(LifecycleEvent.EscalationTimeout({ requestId: request.id }))
        yield* shutdownOnce
        return { frame: undefined, notice: killedNotice(reason, timeoutSeconds, timings.interruptEscalation) }
      }).pipe(Effect.withSpan("kernel.interrupt", { attributes: { "kernel.key": label, reason }, captureStackTrace: false }))

    const runCell = (req: ExecuteRequest, onOutput: OutputHandler, traced: boolean): Effect.Effect<CellOutcome, KernelError> =>
      Effect.scoped(
        Effect.gen(function*() {
          yield* Effect.acquireRelease(permits.take(1), () => permits.release(1))
          const state = lifecycle
          if (state._tag === "Dead" && state.cause._tag === "Exited") {
            return yield* new KernelDied({ exit: state.cause.exit, stderr: stderrTail.text() })
          }
          if (isTerminal(state)) return yield* new KernelClosed({ reason: "it was shut down" })
          const bytes = { count: 0 }
          const request: ActiveRequest = yield* begin((output) => {
            if (output._tag === "Stdout" || output._tag === "Stderr") bytes.count += output.text.length
            return Effect.catchAllCause(
              Effect.suspend(() => onOutput(output)),
              (cause) => Cause.isInterruptedOnly(cause) ? Effect.void : Deferred.failCause(request.first, cause)
            )
          })
          yield* Effect.addFinalizer(() =>
            Effect.gen(function*() {
              if ((yield* Deferred.isDone(request.done)) || isTerminal(lifecycle)) return
              yield* interruptCell(request, "abandon", req.timeoutSeconds).pipe(Effect.ignore)
            })
          )
          yield* dispatch(LifecycleEvent.Execute({ requestId: request.id }))
          if (req.timeoutSeconds !== undefined) {
            request.watchdog = yield* CellWatchdog.make(
              Duration.seconds(req.timeoutSeconds),
              Effect.asVoid(Deferred.succeed(request.first, stopBecause("timeout")))
            )
          }
          if (req.cancel !== undefined) {
            yield* Effect.forkScoped(Effect.zipRight(req.cancel, Deferred.succeed(request.first, stopBecause("cancel"))))
          }
          yield* write(executeFrame(request.id, req)).pipe(
            Effect.tapError(() => failRequest(request, new KernelClosed({ reason: "its process no longer reads requests" }))),
            Effect.ignore
          )
          const ended = yield* Deferred.await(request.first)
          const { frame, notice } =
            ended._tag === "finished"
              ? { frame: ended.frame, notice: undefined }
              : yield* interruptCell(request, ended.reason, req.timeoutSeconds)
          const outcome: CellOutcome = {
            status: frame?.status ?? "error",
            executionCount: frame?.executionCount ?? 0,
            cancelled: ended._tag === "stop" || frame?.cancelled === true,
            timedOut: ended._tag === "stop" && ended.reason === "timeout",
            killed: frame === undefined,
            ...(notice === undefined ? {} : { notice })
          }
          if (traced) yield* annotateSpan(request.id, outcome, bytes.count)
          return outcome
        })
      )

    const run = (req: ExecuteRequest, onOutput: OutputHandler): Effect.Effect<CellOutcome, KernelError> =>
      withSpanWhenTraced((traced) => runCell(req, onOutput, traced), "kernel.execute", {
        attributes: { "kernel.key": label, "kernel.pid": proc.pid },
        captureStackTrace: false
      }, cellSpanFailure)

    const execute = (req: ExecuteRequest): Stream.Stream<KernelOutput, KernelError> => streamOf((emit) => run(req, emit))

    const ask = <F extends CompleteReplyFrame | InspectReplyFrame>(
      code: string,
      frame: (id: string) => HostFrame
    ): Effect.Effect<F, KernelClosed | IntrospectionFailed> =>
      Effect.gen(function*() {
        if (code.length > MAX_INTROSPECT_CODE) {
          return yield* new IntrospectionFailed({ reason: `the code is longer than ${MAX_INTROSPECT_CODE} characters` })
        }
        if (isTerminal(lifecycle)) return yield* new KernelClosed({ reason: "it was shut down" })
        const id = `q${++nextId}`
        const reply = yield* Deferred.make<CompleteReplyFrame | InspectReplyFrame>()
        queries.set(id, reply)
        const ended = Effect.flatMap(Deferred.await(deadSignal), () => new KernelClosed({ reason: "it ended before answering" }))
        const answer = yield* write(frame(id)).pipe(
          Effect.zipRight(Effect.raceFirst(Deferred.await(reply), ended)),
          Effect.timeoutFail({
            duration: INTROSPECT_TIMEOUT,
            onTimeout: () => new IntrospectionFailed({ reason: `the kernel did not answer within ${Duration.format(INTROSPECT_TIMEOUT)}` })
          }),
          Effect.ensuring(Effect.sync(() => queries.delete(id)))
        )
        if (answer.error !== undefined) return yield* new IntrospectionFailed({ reason: answer.error })
        return answer as F
      })

    const complete = (code: string, cursor = code.length) =>
      ask<CompleteReplyFrame>(code, (id) =>
        new CompleteRequestFrame({ type: "complete", id, code, cursorPos: toCodePoints(code, cursor) })).pipe(
          Effect.map((reply) => completionOf(code, reply))
        )

    const inspect = (code: string, cursor = code.length, detailLevel: 0 | 1 = 0) =>
      ask<InspectReplyFrame>(code, (id) =>
        new InspectRequestFrame({ type: "inspect", id, code, cursorPos: toCodePoints(code, cursor), detailLevel })).pipe(
          Effect.map(inspectionOf)
        )

    return {
      pid: proc.pid,
      run,
      execute,
      complete,
      inspect,
      state: Effect.sync(() => lifecycle),
      isAlive: Effect.sync(() => !isTerminal(lifecycle)),
      dead: Deferred.await(deadSignal),
      shutdown: shutdownOnce
    } satisfies PythonKernel
  })

/** Runs a cell and collects its outputs; convenient for tests and one-shot callers. */
export const executeCollect = (
  kernel: PythonKernel,
  request: ExecuteRequest
): Effect.Effect<ReadonlyArray<KernelOutput>, KernelError> =>
  kernel.execute(request).pipe(Stream.runCollect, Effect.map((chunk) => Array.from(chunk)))

/** Whether an exit of `execute` was a kernel death (the registry's cue to replace and retry). */
export const isKernelDeath = <A>(exit: Exit.Exit<A, KernelError>): boolean =>
  Exit.isFailure(exit) && Option.exists(Cause.failureOption(exit.cause), (error) => error._tag === "KernelDied")
