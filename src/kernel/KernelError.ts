/**
 * Failures of a kernel as a whole (as opposed to a cell's own exceptions,
 * which arrive as `Error` outputs).
 */
import { Schema } from "effect"
import { describeExit } from "./KernelProcess.ts"

const stderrNote = (tail: string): string => (tail.trim().length > 0 ? `; last stderr:\n${tail.trimEnd()}` : "")

/** The kernel could not be started. */
export class KernelStartError extends Schema.TaggedError<KernelStartError>()("KernelStartError", {
  reason: Schema.String,
  stderr: Schema.String
}) {
  override get message(): string {
    return `the kernel did not start: ${this.reason}${stderrNote(this.stderr)}`
  }
}

/** The kernel process exited while a cell ran, or before it could run one. */
export class KernelDied extends Schema.TaggedError<KernelDied>()("KernelDied", {
  exit: Schema.Struct({ code: Schema.NullOr(Schema.Finite), signal: Schema.NullOr(Schema.String) }),
  stderr: Schema.String
}) {
  override get message(): string {
    return `the kernel exited unexpectedly (${describeExit(this.exit)})${stderrNote(this.stderr)}`
  }
}

/** The kernel was shut down (by its owner or after a kill) and runs no more cells. */
export class KernelClosed extends Schema.TaggedError<KernelClosed>()("KernelClosed", { reason: Schema.String }) {
  override get message(): string {
    return `the kernel is closed: ${this.reason}`
  }
}

/** Anything `Kernel.run` can fail with. */
export type KernelError = KernelDied | KernelClosed
