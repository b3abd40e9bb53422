/**
 * The Node implementation of `KernelSpawner` on `node:child_process`: the child runs
 * detached (its own process group), signals go to the whole group, and the scope's
 * last-resort finalizer SIGKILLs the group if the process is still alive. A runner on the
 * `fd3` channel gets an empty stdin and a socket at fd 3 that carries requests and frames.
 */
import { spawn as spawnChild, type ChildProcess } from "node:child_process"
import type { Duplex, Writable } from "node:stream"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Deferred, Effect, Layer, Stream } from "effect"
import {
  KernelSpawner,
  SpawnError,
  StdinClosed,
  type KernelProcess,
  type KernelSignal,
  type ProcessExit,
  type SpawnSpec
} from "../kernel/KernelProcess.ts"

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

const spawnProcess = (spec: SpawnSpec) =>
  Effect.gen(function*() {
    const exit = yield* Deferred.make<ProcessExit>()
    let exitStatus: ProcessExit | undefined
    const child = yield* Effect.async<ChildProcess, SpawnError>((resume) => {
      let child: ChildProcess
      try {
        child = spawnChild(spec.command, [...spec.args], {
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
        Deferred.unsafeDone(exit, Effect.succeed(exitStatus))
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
      })
    )
    const pid = child.pid!
    const write = (text: string): Effect.Effect<void, StdinClosed> =>
      Effect.suspend(() => {
        if (input === null || input.destroyed || input.writableEnded) return Effect.fail(new StdinClosed({ pid }))
        input.write(text)
        return Effect.void
      })
    const readable = (stream: NodeJS.ReadableStream | null): Stream.Stream<Uint8Array> =>
      stream === null
        ? Stream.empty
        : NodeStream.fromReadable<never, Uint8Array>(() => stream, () => undefined as never, {
          closeOnDone: false
        }).pipe(Stream.catchAllCause(() => Stream.empty))
    const handle: KernelProcess = {
      pid,
      ...(socket === null ? {} : { frames: readable(socket) }),
      stdout: readable(child.stdout),
      stderr: readable(child.stderr),
      write,
      signal: (signal) => Effect.sync(() => signalGroup(child, signal)),
      exited: Deferred.await(exit),
      exitNow: Effect.sync(() => exitStatus)
    }
    return handle
  })

/** `KernelSpawner` backed by real child processes. */
export const NodeKernelSpawnerLive = Layer.succeed(KernelSpawner, { spawn: spawnProcess })
