/**
 * A kernel's start-up: the prelude goes out as a silent request as soon as the runner is
 * spawned (`sendPrelude`), so a spare has run it before it is taken; binding the kernel
 * (`startUp`) sends the init request (cwd, environment) and awaits both, bounded by the
 * start timeout and cut short by the process's death. Every kernel runs them in that
 * order, spare or not. Any failure is a `KernelStartError` with the stderr tail.
 */
import { Deferred, Duration, Effect, Result } from "effect"
import { type KernelClosed, KernelDied, type KernelError, KernelStartError } from "./KernelError.ts"
import { describeExit, type ProcessExit } from "./KernelProcess.ts"
import type { DeathCause } from "./Lifecycle.ts"
import { executeLine, type RequestTable } from "./RequestTable.ts"
import type { StderrTail } from "./StderrTail.ts"

/** Where start-up requests go: the kernel's request table and writer. */
export interface StartupChannel {
  readonly table: RequestTable
  readonly writeLine: (line: string) => Effect.Effect<void, KernelClosed>
  readonly stderrTail: StderrTail
}

/** What binding a spawned kernel needs. */
export interface StartupContext extends StartupChannel {
  /** Completes when the kernel is dead. */
  readonly dead: Effect.Effect<DeathCause>
  /** Completes once every frame the process sent was handled. */
  readonly framesDrained: Effect.Effect<void>
  readonly cwd: string
  readonly initEnv: Readonly<Record<string, string>> | undefined
  /** The prelude sent at spawn (`sendPrelude`): completes when it has run. */
  readonly prelude: Effect.Effect<void, KernelStartError | KernelError>
  readonly startTimeout: Duration.Duration
  /** Attributes of the `kernel.start` span. */
  readonly label: string
  readonly pid: number
}

/** Sends one silent start-up request; the returned effect awaits its end and takes it out of the table. */
const sendStartRequest = Effect.fnUntraced(function*(
  channel: StartupChannel,
  code: string,
  extra: { cwd?: string; env?: Readonly<Record<string, string>> }
) {
  const errors: Array<string> = []
  const request = channel.table.add((output) =>
    Effect.sync(() => {
      if (output._tag === "Error") errors.push(`${output.ename}: ${output.evalue}`)
    })
  )
  yield* channel.writeLine(executeLine(request.id, { code, silent: true, storeHistory: false, ...extra })).pipe(
    Effect.tapError(() => Effect.sync(() => channel.table.remove(request)))
  )
  return Effect.flatMap(Deferred.await(request.ended), () =>
    request.done?.status === "error"
      ? new KernelStartError({
        reason: `the start-up code failed: ${errors.join("; ") || "unknown error"}`,
        stderr: channel.stderrTail.text()
      })
      : Effect.void).pipe(Effect.ensuring(Effect.sync(() => channel.table.remove(request))))
})

/**
 * Sends the prelude (none: nothing to send) right after the spawn, before any session is
 * known; what it returns completes when the prelude has run, failing when it raised or
 * could not be sent. The prelude must not read the cwd or the environment at its top
 * level: init (the session's cwd and env) comes after it.
 */
export const sendPrelude = (
  channel: StartupChannel,
  prelude: string | undefined
): Effect.Effect<Effect.Effect<void, KernelStartError | KernelError>> =>
  prelude === undefined || prelude.length === 0
    ? Effect.succeed(Effect.void)
    : Effect.map(Effect.result(sendStartRequest(channel, prelude, {})), (sent) => (Result.isFailure(sent) ? Effect.fail(sent.failure) : sent.success))

/** How long start-up waits for the exit of a runner whose input closed, to report that instead. */
const CLOSED_GRACE = Duration.seconds(2)

const exitedDuringStart = (exit: ProcessExit, stderr: string) =>
  new KernelStartError({ reason: `the runner exited during start-up (${describeExit(exit)})`, stderr })

/** Runs init and the prelude. */
export const startUp = (context: StartupContext): Effect.Effect<void, KernelStartError> => {
  const startError = (error: unknown): KernelStartError =>
    error instanceof KernelStartError
      ? error
      : error instanceof KernelDied
      ? exitedDuringStart(error.exit, error.stderr)
      : new KernelStartError({ reason: String((error as Error)?.message ?? error), stderr: context.stderrTail.text() })

  const deathDuringStart = Effect.flatMap(context.dead, (cause) =>
    Effect.gen(function*() {
      const exit: ProcessExit = cause._tag === "Exited" ? cause.exit : { code: null, signal: null }
      yield* context.framesDrained.pipe(Effect.timeoutOption(Duration.millis(200)))
      return yield* exitedDuringStart(exit, context.stderrTail.text())
    }))

  return Effect.gen(function*() {
    const init = yield* sendStartRequest(context, "", { cwd: context.cwd, ...(context.initEnv === undefined ? {} : { env: context.initEnv }) })
    yield* context.prelude
    yield* init
  }).pipe(
    // A runner that no longer reads its input has usually exited: its exit says more than the closed pipe.
    Effect.catchTag("KernelClosed", (closed) => Effect.raceFirst(deathDuringStart, Effect.delay(Effect.fail(closed), CLOSED_GRACE))),
    Effect.mapError(startError),
    Effect.raceFirst(deathDuringStart),
    Effect.timeoutOrElse({
      duration: context.startTimeout,
      orElse: () =>
        Effect.fail(
          new KernelStartError({
            reason: `start-up took longer than ${Duration.format(context.startTimeout)}`,
            stderr: context.stderrTail.text()
          })
        )
    }),
    Effect.withSpan("kernel.start", { attributes: { "kernel.key": context.label, "kernel.pid": context.pid } }, { captureStackTrace: false })
  )
}
