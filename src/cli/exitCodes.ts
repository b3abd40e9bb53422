/**
 * The exit codes of `veyyon` and the one failure type commands end with: a code plus,
 * unless the output already said what went wrong, one sentence for stderr.
 */
import { Data } from "effect"
import { cellSucceeded, type EvalResult } from "../services/tool/EvalResult.ts"

/** 0 ok, 1 the cell failed (error, cancelled, timed out, killed), 2 bad usage or input, 3 no usable backend. */
export const ExitCode = {
  Ok: 0,
  CellFailed: 1,
  Usage: 2,
  BackendUnavailable: 3
} as const

/** One of the exit codes. */
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

/** Ends a command with `code`; `sentence`, when given, is printed on stderr. */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  readonly code: ExitCode
  readonly sentence?: string
}> {}

/** What kind of failure an exit code reports, as `--json` names it. */
export const failureKind = (code: ExitCode): "usage" | "backend_unavailable" | "failed" =>
  code === ExitCode.Usage ? "usage" : code === ExitCode.BackendUnavailable ? "backend_unavailable" : "failed"

/** A failure as `--json` prints it on stdout: `{"error":{"kind":…,"message":…}}` and a newline. */
export const failureJson = (kind: string, message: string): string => JSON.stringify({ error: { kind, message } }) + "\n"

/** A usage error with the sentence that says how to call the command instead. */
export const usageError = (sentence: string): CliFailure => new CliFailure({ code: ExitCode.Usage, sentence })

/** The exit code for a finished cell. */
export const cellExitCode = (result: EvalResult): ExitCode => (cellSucceeded(result) ? ExitCode.Ok : ExitCode.CellFailed)

/** Anything with a tag and a message, as the library's errors are. */
export interface TaggedFailure {
  readonly _tag: string
  readonly message: string
}

const USAGE_TAGS: ReadonlySet<string> = new Set(["InvalidEvalParams", "InvalidCwd", "InvalidTimeout", "InvalidSettings"])
const BACKEND_TAGS: ReadonlySet<string> = new Set([
  "BackendUnavailable",
  "PythonUnavailable",
  "RuntimeUnavailable",
  "KernelStartError",
  "SandboxUnavailable",
  "LimitsUnavailable",
  "RunnerSourceMissing",
  "RunnerCacheWriteFailed",
  "ArtifactDirUnavailable"
])

/** The exit code a library error maps to: bad input 2, backend unavailable 3, a kernel lost mid-cell 1. */
export const exitCodeOf = (error: TaggedFailure): ExitCode =>
  USAGE_TAGS.has(error._tag)
    ? ExitCode.Usage
    : BACKEND_TAGS.has(error._tag)
    ? ExitCode.BackendUnavailable
    : ExitCode.CellFailed

/** A library error as the command's failure, with its message as the sentence. */
export const failureOf = (error: TaggedFailure): CliFailure =>
  error instanceof CliFailure ? error : new CliFailure({ code: exitCodeOf(error), sentence: error.message })
