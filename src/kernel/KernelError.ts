/**
 * Failures of a kernel as a whole (as opposed to a cell's own exceptions,
 * which arrive as `Error` outputs).
 */
import { Data } from "effect"
import { describeExit, type ProcessExit } from "./KernelProcess.ts"

const stderrNote = (tail: string): string => (tail.trim().length > 0 ? `; last stderr:\n${tail.trimEnd()}` : "")

/** The kernel could not be started. */
export class KernelStartError extends Data.TaggedError("KernelStartError")<{
  readonly reason: string
  readonly stderr: string
}> {
  override get message(): string {
    return `the kernel did not start: ${this.reason}${stderrNote(this.stderr)}`
  }
}

/** The kernel process exited while a cell ran, or before it could run one. */
export class KernelDied extends Data.TaggedError("KernelDied")<{
  readonly exit: ProcessExit
  readonly stderr: string
}> {
  override get message(): string {
    return `the kernel exited unexpectedly (${describeExit(this.exit)})${stderrNote(this.stderr)}`
  }
}

/** The kernel was shut down (by its owner or after a kill) and runs no more cells. */
export class KernelClosed extends Data.TaggedError("KernelClosed")<{ readonly reason: string }> {
  override get message(): string {
    return `the kernel is closed: ${this.reason}`
  }
}

/** Anything `Kernel.run` can fail with. */
export type KernelError = KernelDied | KernelClosed
