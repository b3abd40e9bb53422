/**
 * Room `process`: how this package starts, contains and ends the processes it runs (kernels,
 * interpreter checks, the sandbox probe, the containment watcher). It uses the kernel's
 * process types; nothing above.
 *
 * `start` is the one place that calls `node:child_process`. A child always leads a
 * process group of its own and is owned by the scope it was started in: the child is
 * registered with that scope before the first await, so an interruption at any moment
 * (while Node reports the spawn, or later) SIGKILLs its whole group and waits until the
 * child and every member of its group are gone.
 */
import { type ChildProcess, spawn as spawnChild, type StdioOptions } from "node:child_process"
import type { Duplex, Readable, Writable } from "node:stream"
import { Deferred, Duration, Effect, Schedule, type Scope } from "effect"
import { type ProcessExit, SpawnError } from "../kernel/KernelProcess.ts"

/** What to start and how to connect it. */
export interface SubprocessOptions {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** Default: this process's cwd. */
  readonly cwd?: string | undefined
  /** The child's whole environment (nothing is inherited); a variable set to undefined is left out. */
  readonly env: Readonly<Record<string, string | undefined>>
  /** Default `pipe`; `ignore` is /dev/null. */
  readonly stdin?: "pipe" | "ignore"
  /** Default `pipe`. */
  readonly stdout?: "pipe" | "ignore"
  /** Default `pipe`. */
  readonly stderr?: "pipe" | "ignore"
  /** Give the child a socket at fd 3 (a duplex channel beside stdio). */
  readonly fd3?: boolean
  /** Do not let the child or its stdin keep this process alive (a helper that lives as long as the host). */
  readonly unref?: boolean
}

/** A running child, the leader of its own process group; the scope it was started in kills that group when it closes. */
export interface Subprocess {
  readonly pid: number
  readonly stdin: Writable | null
  readonly stdout: Readable | null
  readonly stderr: Readable | null
  /** The socket at fd 3, when asked for. */
  readonly fd3: Duplex | null
  /** Completes when the child has exited. */
  readonly exited: Effect.Effect<ProcessExit>
  /** The exit, once the child has exited. */
  readonly exitNow: () => ProcessExit | undefined
  /** Sends a signal to the child's process group (the child alone when the group is gone), without waiting. */
  readonly signalGroup: (signal: NodeJS.Signals) => void
}

interface Launched {
  readonly child: ChildProcess
  readonly started: Deferred.Deferred<void, SpawnError>
  readonly exit: Deferred.Deferred<ProcessExit>
  exitStatus: ProcessExit | undefined
}

const signalGroupOf = (child: ChildProcess, signal: NodeJS.Signals): void => {
  const pid = child.pid
  if (pid === undefined) return
  try {
    process.kill(-pid, signal)
  } catch {
    try {
      child.kill(signal)
    } catch {
      // already gone
    }
  }
}

const stdioOf = (options: SubprocessOptions): StdioOptions => {
  const stdio: Array<"pipe" | "ignore"> = [options.stdin ?? "pipe", options.stdout ?? "pipe", options.stderr ?? "pipe"]
  if (options.fd3 === true) stdio.push("pipe")
  return stdio
}

const definedEnv = (env: Readonly<Record<string, string | undefined>>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) if (value !== undefined) out[name] = value
  return out
}

/** Calls `spawn` and wires the child's events, synchronously: nothing can come between the fork and the wiring. */
const launch = (options: SubprocessOptions): Effect.Effect<Launched, SpawnError> =>
  Effect.suspend(() => {
    const started = Deferred.makeUnsafe<void, SpawnError>()
    const exit = Deferred.makeUnsafe<ProcessExit>()
    let child: ChildProcess
    try {
      child = spawnChild(options.command, [...options.args], {
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
        env: definedEnv(options.env),
        detached: true,
        stdio: stdioOf(options)
      })
    } catch (cause) {
      return Effect.fail(new SpawnError({ command: options.command, cause }))
    }
    const launched: Launched = { child, started, exit, exitStatus: undefined }
    child.on("error", (cause) => Deferred.doneUnsafe(started, Effect.fail(new SpawnError({ command: options.command, cause }))))
    child.once("spawn", () => Deferred.doneUnsafe(started, Effect.void))
    child.once("exit", (code, signal) => {
      launched.exitStatus = { code, signal }
      Deferred.doneUnsafe(exit, Effect.succeed(launched.exitStatus))
    })
    child.stdin?.on("error", () => {})
    const fd3 = options.fd3 === true ? (child.stdio[3] as Duplex | null | undefined) ?? null : null
    fd3?.on("error", () => {})
    if (options.unref === true) {
      child.unref()
      ;(child.stdin as unknown as { unref?: () => void } | null)?.unref?.()
    }
    return Effect.succeed(launched)
  })

/** Whether process group `pgid` still has a member (a zombie not yet reaped counts). */
const groupExists = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** How long the undo waits for a killed group's members after the child itself has exited. */
const GROUP_GONE_WITHIN = Duration.seconds(5)

/** The undo of `launch`: a child still running has its whole group SIGKILLed; the child, then every member of its group, is waited for. */
const end = (launched: Launched): Effect.Effect<void> =>
  Effect.suspend(() => {
    const pid = launched.child.pid
    if (pid === undefined || launched.exitStatus !== undefined) return Effect.void
    signalGroupOf(launched.child, "SIGKILL")
    return Deferred.await(launched.exit).pipe(
      Effect.andThen(Effect.sync(() => groupExists(pid)).pipe(
        Effect.repeat({ while: (exists) => exists, schedule: Schedule.spaced(Duration.millis(5)).pipe(Schedule.upTo({ duration: GROUP_GONE_WITHIN })) })
      )),
      Effect.asVoid
    )
  })

const handleOf = (launched: Launched, options: SubprocessOptions): Subprocess => {
  const child = launched.child
  return {
    pid: child.pid!,
    stdin: child.stdin,
    stdout: child.stdout,
    stderr: child.stderr,
    fd3: options.fd3 === true ? (child.stdio[3] as Duplex | null | undefined) ?? null : null,
    exited: Deferred.await(launched.exit),
    exitNow: () => launched.exitStatus,
    signalGroup: (signal) => signalGroupOf(child, signal)
  }
}

/**
 * Starts a child in a process group of its own, owned by the current scope: the scope's
 * close (or an interruption while Node reports the spawn) SIGKILLs the group if the child
 * still runs, and waits until the child and its group are gone. Fails with `SpawnError` when it cannot start.
 */
export const start = (options: SubprocessOptions): Effect.Effect<Subprocess, SpawnError, Scope.Scope> =>
  Effect.flatMap(Effect.acquireRelease(launch(options), end), (launched) =>
    Effect.as(Deferred.await(launched.started), handleOf(launched, options)))
