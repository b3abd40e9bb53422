/**
 * A short-lived command run to its end (an interpreter check, a probe, a warm-up): started
 * with `Subprocess.start`, its input written and closed, its output read, its exit awaited.
 * Interrupting the run (a timeout around it, or its caller's interruption) kills the
 * command's whole process group.
 */
import type { Readable } from "node:stream"
import { Effect } from "effect"
import type { ProcessExit, SpawnError } from "../kernel/KernelProcess.ts"
import { start, type SubprocessOptions } from "./Subprocess.ts"

/** What a finished command left: how it ended and what it wrote. */
export interface CommandResult {
  readonly exit: ProcessExit
  /** Its stdout as UTF-8, up to the output bound. */
  readonly stdout: string
  /** Its stderr as UTF-8, up to the output bound. */
  readonly stderr: string
}

/** How a command is run: where, with what environment, what it reads, how much of its output is kept. */
export interface CommandOptions extends Pick<SubprocessOptions, "command" | "args" | "cwd" | "env"> {
  /** Written to its stdin, which is then closed. Default: nothing. */
  readonly input?: string
  /** The bytes kept of each of stdout and stderr; the rest is read and dropped. Default 64 KiB. */
  readonly maxOutputBytes?: number
}

/** The default bound on the output kept of a command. */
export const COMMAND_OUTPUT_BYTES = 64 * 1024

/** The first `max` bytes a stream delivers, as text, once the stream has ended. */
const collect = (stream: Readable | null, max: number): Effect.Effect<string> =>
  stream === null
    ? Effect.succeed("")
    : Effect.callback<string>((resume) => {
      const kept: Array<Buffer> = []
      let size = 0
      const onData = (chunk: Buffer) => {
        if (size >= max) return
        const part = chunk.subarray(0, max - size)
        kept.push(part)
        size += part.length
      }
      const onEnd = () => resume(Effect.succeed(Buffer.concat(kept).toString("utf8")))
      stream.on("data", onData)
      stream.once("close", onEnd)
      stream.on("error", () => {})
      return Effect.sync(() => {
        stream.off("data", onData)
        stream.off("close", onEnd)
        stream.destroy()
      })
    })

/** Runs a command to its end and gives its exit and output; fails only when it cannot start. */
export const runCommand = (options: CommandOptions): Effect.Effect<CommandResult, SpawnError> =>
  Effect.scoped(
    Effect.gen(function*() {
      const proc = yield* start({ command: options.command, args: options.args, cwd: options.cwd, env: options.env })
      proc.stdin?.end(options.input ?? "")
      const max = options.maxOutputBytes ?? COMMAND_OUTPUT_BYTES
      const [stdout, stderr, exit] = yield* Effect.all([collect(proc.stdout, max), collect(proc.stderr, max), proc.exited], {
        concurrency: "unbounded"
      })
      return { exit, stdout, stderr }
    })
  )
