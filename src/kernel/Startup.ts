/**
 * A kernel's start-up: the init request (cwd, environment) and the prelude go out back
 * to back as silent requests, then both are awaited, bounded by the start timeout and
 * cut short by the process's death. Any failure is a `KernelStartError` with the stderr tail.
 */
import { Deferred, Duration, Effect } from "effect"
import { type KernelClosed, KernelDied, KernelStartError } from "./KernelError.ts"
import { describeExit, type ProcessExit } from "./KernelProcess.ts"
import type { DeathCause } from "./Lifecycle.ts"
import { executeLine, type RequestTable } from "./RequestTable.ts"
import type { StderrTail } from "./StderrTail.ts"

/** What start-up needs from its kernel. */
export interface StartupContext {
  readonly table: RequestTable
  readonly writeLine: (line: string) => Effect.Effect<void, KernelClosed>
  readonly stderrTail: StderrTail
  /** Completes when the kernel is dead. */
  readonly dead: Effect.Effect<DeathCause>
  /** Completes once every frame the process sent was handled. */
  readonly framesDrained: Effect.Effect<void>
  readonly cwd: string
  readonly initEnv: Readonly<Record<string, string>> | undefined
  readonly prelude: string | undefined
  readonly startTimeout: Duration.Duration
  /** Attributes of the `kernel.start` span. */
  readonly label: string
  readonly pid: number
}

/** Sends one silent start-up request; the returned effect awaits its end. */
const sendStartRequest = (context: StartupContext, code: string, extra: { cwd?: string; env?: Readonly<Record<string, string>> }) =>
  Effect.gen(function*() {
    const errors: Array<string> = []
    const request = context.table.add((output) =>
      Effect.sync(() => {
        if (output._tag === "Error") errors.push(`${output.ename}: ${output.evalue}`)
      })
    )
    yield* Effect.addFinalizer(() => Effect.sync(() => context.table.remove(request)))
    yield* context.writeLine(executeLine(request.id, { code, silent: true, storeHistory: false, ...extra }))
    return Effect.flatMap(Deferred.await(request.ended), () =>
      request.done?.status === "error"
        ? new KernelStartError({
          reason: `the start-up code failed: ${errors.join("; ") || "unknown error"}`,
          stderr: context.stderrTail.text()
        })
        : Effect.void)
  })

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

  return Effect.scoped(Effect.gen(function*() {
    const init = yield* sendStartRequest(context, "", { cwd: context.cwd, ...(context.initEnv === undefined ? {} : { env: context.initEnv }) })
    const prelude = context.prelude !== undefined && context.prelude.length > 0 ? yield* sendStartRequest(context, context.prelude, {}) : Effect.void
    yield* init
    yield* prelude
  })).pipe(
    Effect.mapError(startError),
    Effect.raceFirst(deathDuringStart),
    Effect.timeoutFail({
      duration: context.startTimeout,
      onTimeout: () =>
        new KernelStartError({
          reason: `start-up took longer than ${Duration.format(context.startTimeout)}`,
          stderr: context.stderrTail.text()
        })
    }),
    Effect.withSpan("kernel.start", { attributes: { "kernel.key": context.label, "kernel.pid": context.pid }, captureStackTrace: false })
  )
}
