/**
 * The Node implementation of `KernelSpawner` on `node:child_process`: the child runs
 * detached (its own process group), signals go to the whole group, and the scope's
 * last-resort finalizer SIGKILLs the group if the process is still alive. A runner on the
 * `fd3` channel gets an empty stdin and a socket at fd 3 that carries requests and frames.
 *
 * Where the machine offers it, each child starts inside a cgroup of its own (see
 * `NodeContainment`): SIGKILL and the scope's close kill that whole tree, processes that
 * left the group with `setsid` included. A sandboxed child's SIGINT goes to the runner
 * alone (the launcher would die of it and take the runner along).
 */
import { spawn as spawnChild, type ChildProcess } from "node:child_process"
import type { Duplex, Writable } from "node:stream"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as NodeFs from "node:fs"
import { Deferred, Duration, Effect, Layer, Schedule, Stream } from "effect"
import {
  type ByteFlow,
  type ByteListener,
  KernelSpawner,
  SpawnError,
  StdinClosed,
  type KernelProcess,
  type KernelSignal,
  type ProcessExit,
  type SpawnSpec
} from "../kernel/KernelProcess.ts"
import { containment, joinGroupLauncher, type TreeGroup } from "./NodeContainment.ts"

const signalGroup = (child: ChildProcess, signal: KernelSignal): void => {
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

const childrenOf = (pid: number): ReadonlyArray<number> => {
  try {
    return NodeFs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

/** The runner inside a sandbox launcher: the launcher's only grandchild (launcher -> namespace init -> runner). */
const sandboxedRunner = (launcher: number): number | undefined => {
  const init = childrenOf(launcher)[0]
  return init === undefined ? undefined : childrenOf(init)[0]
}

/**
 * The launch: the spec's command, inside a fresh tree group when there is one, and
 * `RLIMIT_NPROC` when the group cannot cap pids and the spec is not sandboxed (a sandboxed
 * spec sets it inside its user namespace, where it counts that namespace alone).
 */
const launchOf = (spec: SpawnSpec, group: TreeGroup | undefined): { readonly command: string; readonly args: ReadonlyArray<string> } => {
  const limited = spec.pidsMax !== undefined && group?.pidsLimited !== true && spec.sandboxed !== true
    ? { command: "prlimit", args: [`--nproc=${spec.pidsMax}`, "--", spec.command, ...spec.args] }
    : spec
  return group === undefined ? limited : joinGroupLauncher(group.procsFiles, limited.command, limited.args)
}

const endGroup = (group: TreeGroup) =>
  Effect.sync(() => {
    group.kill()
    return group.empty()
  }).pipe(
    Effect.repeat({ until: (empty) => empty, schedule: Schedule.spaced(Duration.millis(10)).pipe(Schedule.upTo({ duration: Duration.seconds(5) })) }),
    Effect.ensuring(Effect.sync(() => group.remove()))
  )

const spawnProcess = Effect.fnUntraced(function*(spec: SpawnSpec) {
  const exit = yield* Deferred.make<ProcessExit>()
  let exitStatus: ProcessExit | undefined
  const group = containment().create(spec.pidsMax)
  const launch = launchOf(spec, group)
  const child = yield* Effect.callback<ChildProcess, SpawnError>((resume) => {
    let child: ChildProcess
    try {
      child = spawnChild(launch.command, [...launch.args], {
        cwd: spec.cwd,
        env: { ...spec.env },
        detached: true,
        stdio: spec.channel === "fd3" ? ["ignore", "pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe"]
      })
    } catch (cause) {
      resume(Effect.fail(new SpawnError({ command: spec.command, cause })))
      return
    }
    const onError = (cause: Error) => resume(Effect.fail(new SpawnError({ command: spec.command, cause })))
    child.once("error", onError)
    child.once("spawn", () => {
      child.off("error", onError)
      child.on("error", () => {})
      resume(Effect.succeed(child))
    })
    child.once("exit", (code, signal) => {
      exitStatus = { code, signal }
      Deferred.doneUnsafe(exit, Effect.succeed(exitStatus))
    })
  })
  const socket = spec.channel === "fd3" ? (child.stdio[3] as Duplex | null | undefined) ?? null : null
  const input: Writable | null = spec.channel === "fd3" ? socket : child.stdin
  input?.on("error", () => {})
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => {
      if (exitStatus !== undefined) return Effect.void
      signalGroup(child, "SIGKILL")
      return Deferred.await(exit)
    }).pipe(Effect.andThen(group === undefined ? Effect.void : endGroup(group)))
  )
  const pid = child.pid!
  let runnerPid: number | undefined
  const signal = (signal: KernelSignal): void => {
    if (signal === "SIGINT" && spec.sandboxed === true) {
      runnerPid ??= sandboxedRunner(pid)
      if (runnerPid !== undefined && exitStatus === undefined) {
        try {
          process.kill(runnerPid, "SIGINT")
        } catch {
          // already gone
        }
      }
      return
    }
    signalGroup(child, signal)
    if (signal === "SIGKILL") group?.kill()
  }
  const write = (text: string): Effect.Effect<void, StdinClosed> =>
    Effect.suspend(() => {
      if (input === null || input.destroyed || input.writableEnded) return Effect.fail(new StdinClosed({ pid }))
      input.write(text)
      return Effect.void
    })
  const readable = (stream: NodeJS.ReadableStream | null): Stream.Stream<Uint8Array> =>
    stream === null
      ? Stream.empty
      : NodeStream.fromReadable<Uint8Array>({ evaluate: () => stream, closeOnDone: false }).pipe(Stream.catchCause(() => Stream.empty))
  const frameSource = (socket ?? child.stdout) as NodeJS.ReadableStream | null
  const listenFrames = (listener: ByteListener): ByteFlow => {
    if (frameSource === null) {
      listener.onEnd()
      return { pause: () => {}, resume: () => {} }
    }
    let ended = false
    const end = () => {
      if (ended) return
      ended = true
      listener.onEnd()
    }
    frameSource.on("data", (bytes: Uint8Array) => listener.onBytes(bytes))
    frameSource.once("end", end)
    frameSource.once("close", end)
    frameSource.on("error", end)
    return { pause: () => frameSource.pause(), resume: () => frameSource.resume() }
  }
  const handle: KernelProcess = {
    pid,
    listenFrames,
    ...(socket === null ? {} : { frames: readable(socket) }),
    stdout: readable(child.stdout),
    stderr: readable(child.stderr),
    write,
    signal: (name) => Effect.sync(() => signal(name)),
    exited: Deferred.await(exit),
    exitNow: Effect.sync(() => exitStatus)
  }
  return handle
})

/** `KernelSpawner` backed by real child processes. */
export const NodeKernelSpawnerLive = Layer.succeed(KernelSpawner, { spawn: spawnProcess })
