/**
 * The process handle a kernel owns: spawn a runner in its own process group, write
 * request lines to it, read its frames, stdout and stderr, signal the group, await its exit.
 */
import { Context, Data, type Effect, type Scope, type Stream } from "effect"

/** How a process ended: an exit code, or the signal that killed it. */
export interface ProcessExit {
  readonly code: number | null
  readonly signal: string | null
}

/** Renders a process exit for messages, e.g. `exit code 3` or `signal SIGKILL`. */
export const describeExit = (exit: ProcessExit): string =>
  exit.signal !== null ? `signal ${exit.signal}` : `exit code ${exit.code ?? "unknown"}`

/**
 * Where a runner speaks the protocol: `stdio` (requests on stdin, frames on stdout) or
 * `fd3` (both on a socket at fd 3, stdin empty, stdout plain output).
 */
export type FrameChannel = "stdio" | "fd3"

/** What to spawn. */
export interface SpawnSpec {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  /** Default `stdio`. */
  readonly channel?: FrameChannel
  /** The command is a sandbox launcher whose grandchild is the runner: SIGINT goes to the runner alone. */
  readonly sandboxed?: boolean
  /** Cap the processes of the kernel's whole tree, where the spawner's containment can (a sandboxed command caps itself inside too). */
  readonly pidsMax?: number
}

/** The signals a kernel sends. */
export type KernelSignal = "SIGINT" | "SIGTERM" | "SIGKILL"

/** The process could not be started. */
export class SpawnError extends Data.TaggedError("SpawnError")<{
  readonly command: string
  readonly cause: unknown
}> {
  override get message(): string {
    const reason = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `could not start ${this.command}: ${reason}`
  }
}

/** A line could not be written because the process's stdin is closed. */
export class StdinClosed extends Data.TaggedError("StdinClosed")<{ readonly pid: number }> {
  override get message(): string {
    return `the kernel process ${this.pid} no longer reads its input`
  }
}

/** Receives the bytes of a channel as they arrive, then its end. */
export interface ByteListener {
  readonly onBytes: (bytes: Uint8Array) => void
  readonly onEnd: () => void
}

/** Flow control of a listened channel: a paused channel delivers nothing until resumed. */
export interface ByteFlow {
  readonly pause: () => void
  readonly resume: () => void
}

/** A running child process, owned by the scope it was spawned in. */
export interface KernelProcess {
  readonly pid: number
  /** Frame bytes when the runner speaks on fd 3 (`stdout` is then plain output); absent: frames are on `stdout`. */
  readonly frames?: Stream.Stream<Uint8Array>
  /**
   * Hands the frame channel's bytes (`frames` when present, else `stdout`) to a listener
   * from the data callback itself, instead of through that stream; then the stream is not
   * read. Optional: without it the frame channel is read as a stream.
   */
  readonly listenFrames?: (listener: ByteListener) => ByteFlow
  /** Raw stdout bytes; a single consumer. Ends when the pipe closes. */
  readonly stdout: Stream.Stream<Uint8Array>
  /** Raw stderr bytes; a single consumer. Ends when the pipe closes. */
  readonly stderr: Stream.Stream<Uint8Array>
  /** Writes request text to the runner (stdin, or fd 3), waiting for the pipe to accept it. */
  readonly write: (text: string | Uint8Array) => Effect.Effect<void, StdinClosed>
  /** Sends a signal to the process group without waiting for anything. */
  readonly signal: (signal: KernelSignal) => Effect.Effect<void>
  /** Completes when the process has exited. */
  readonly exited: Effect.Effect<ProcessExit>
  /** The exit, if the process has already exited. */
  readonly exitNow: Effect.Effect<ProcessExit | undefined>
}

/** Spawns kernel processes; the scope's close kills whatever is still running. */
export class KernelSpawner extends Context.Service<KernelSpawner, {
  readonly spawn: (spec: SpawnSpec) => Effect.Effect<KernelProcess, SpawnError, Scope.Scope>
}>()("veyyon/KernelSpawner") {}
