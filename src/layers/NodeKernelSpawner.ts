/**
 * The Node implementation of `KernelSpawner`, on `Subprocess.start`: the child runs in its
 * own process group, signals go to the whole group, and the scope's close SIGKILLs the
 * group if the process is still alive. A runner on the `fd3` channel gets an empty stdin
 * and a socket at fd 3 that carries requests and frames.
 *
 * Where the machine offers it, each child starts inside a cgroup of its own (see
 * `Containment`): SIGKILL and the scope's close kill that whole tree, processes that
 * left the group with `setsid` included. A sandboxed child's SIGINT goes to the runner
 * alone (the launcher would die of it and take the runner along).
 *
 * A spawn is a sequence of steps (`SpawnStep`), each registering its undo in the scope
 * before the next begins: the cgroup (removed, after its processes are killed and gone),
 * the spawn (the group SIGKILLed and the child awaited), the attach (the child has joined
 * its cgroup; undone by killing the cgroup's processes). The kernel's readiness, the last
 * step, is the kernel's own. Interrupted at any point, the scope's close leaves nothing.
 */
import type { Writable } from "node:stream"
import * as NodeStream from "@effect/platform-node/NodeStream"
import * as NodeFs from "node:fs"
import { Duration, Effect, Layer, Schedule, Stream } from "effect"
import {
  type ByteFlow,
  type ByteListener,
  KernelSpawner,
  SpawnError,
  StdinClosed,
  type KernelProcess,
  type KernelSignal,
  type SpawnSpec
} from "../kernel/KernelProcess.ts"
import { containment, joinGroupLauncher, type TreeGroup } from "../process/Containment.ts"
import { start, type Subprocess } from "../process/Subprocess.ts"

/** The steps of a kernel spawn that the spawner takes, in order (`cgroup` and `attach` only where there is containment). */
export type SpawnStep = "cgroup" | "spawn" | "attach"

/** How the Node spawner is built. */
export interface NodeKernelSpawnerOptions {
  /** Runs after each step, once its undo is registered (tests stop a spawn there). */
  readonly afterStep?: (step: SpawnStep) => Effect.Effect<void>
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

/** The undo of the cgroup step: kill what is left in it, wait until it is empty (at most 5 s), remove it. */
const endGroup = (group: TreeGroup) =>
  Effect.sync(() => {
    group.kill()
    return group.empty()
  }).pipe(
    Effect.repeat({ until: (empty) => empty, schedule: Schedule.spaced(Duration.millis(10)).pipe(Schedule.upTo({ duration: Duration.seconds(5) })) }),
    Effect.ensuring(Effect.sync(() => group.remove()))
  )

/** How long a launcher may take to join its cgroup. */
const ATTACH_TIMEOUT = Duration.seconds(10)

/** Completes once the child is in its cgroup, or has exited (a launcher that cannot join exits 125, which the kernel reports). */
const attached = (group: TreeGroup, proc: Subprocess, command: string): Effect.Effect<void, SpawnError> =>
  Effect.sync(() => proc.exitNow() !== undefined || group.holds(proc.pid)).pipe(
    Effect.repeat({ until: (done) => done, schedule: Schedule.spaced(Duration.millis(1)) }),
    Effect.timeoutOrElse({
      duration: ATTACH_TIMEOUT,
      orElse: () => Effect.fail(new SpawnError({ command, cause: new Error(`it did not join its cgroup within ${Duration.format(ATTACH_TIMEOUT)}`) }))
    }),
    Effect.asVoid
  )

const spawnProcess = (afterStep: (step: SpawnStep) => Effect.Effect<void>) => Effect.fnUntraced(function*(spec: SpawnSpec) {
  const tree = yield* containment
  const group = yield* Effect.acquireRelease(Effect.sync(() => tree.create(spec.pidsMax)), (group) => group === undefined ? Effect.void : endGroup(group))
  if (group !== undefined) yield* afterStep("cgroup")
  const launch = launchOf(spec, group)
  const proc = yield* start({
    command: launch.command,
    args: launch.args,
    cwd: spec.cwd,
    env: spec.env,
    stdin: spec.channel === "fd3" ? "ignore" : "pipe",
    fd3: spec.channel === "fd3"
  }).pipe(Effect.mapError((error) => new SpawnError({ command: spec.command, cause: error.cause })))
  yield* afterStep("spawn")
  if (group !== undefined) {
    yield* Effect.acquireRelease(attached(group, proc, spec.command), () => Effect.sync(() => group.kill()))
    yield* afterStep("attach")
  }
  const socket = proc.fd3
  const input: Writable | null = spec.channel === "fd3" ? socket : proc.stdin
  const pid = proc.pid
  let runnerPid: number | undefined
  const signal = (signal: KernelSignal): void => {
    if (signal === "SIGINT" && spec.sandboxed === true) {
      runnerPid ??= sandboxedRunner(pid)
      if (runnerPid !== undefined && proc.exitNow() === undefined) {
        try {
          process.kill(runnerPid, "SIGINT")
        } catch {
          // already gone
        }
      }
      return
    }
    proc.signalGroup(signal)
    if (signal === "SIGKILL") group?.kill()
  }
  const write = (text: string | Uint8Array): Effect.Effect<void, StdinClosed> =>
    Effect.suspend(() => {
      if (input === null || input.destroyed || input.writableEnded) return Effect.fail(new StdinClosed({ pid }))
      input.write(text)
      return Effect.void
    })
  const readable = (stream: NodeJS.ReadableStream | null): Stream.Stream<Uint8Array> =>
    stream === null
      ? Stream.empty
      : NodeStream.fromReadable<Uint8Array>({ evaluate: () => stream, closeOnDone: false }).pipe(Stream.catchCause(() => Stream.empty))
  const frameSource = (socket ?? proc.stdout) as NodeJS.ReadableStream | null
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
    stdout: readable(proc.stdout),
    stderr: readable(proc.stderr),
    write,
    signal: (name) => Effect.sync(() => signal(name)),
    exited: proc.exited,
    exitNow: Effect.sync(() => proc.exitNow())
  }
  return handle
})

/** A `KernelSpawner` backed by real child processes, with `options`. */
export const makeNodeKernelSpawner = (options: NodeKernelSpawnerOptions = {}): KernelSpawner["Service"] => ({
  spawn: spawnProcess(options.afterStep ?? (() => Effect.void))
})

/** `KernelSpawner` backed by real child processes. */
export const NodeKernelSpawnerLive = Layer.succeed(KernelSpawner, makeNodeKernelSpawner())
