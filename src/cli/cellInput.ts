/**
 * What `veyyon eval` runs: the code from exactly one source (the argument, `--file`, or
 * piped stdin) and the timeout flag read as the tool reads it (clamped to 1..3600,
 * anything that is not a number rejected).
 */
import { Effect, Option, Result } from "effect"
import * as fs from "node:fs"
import { clampTimeoutSeconds, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS } from "../services/tool/CellTimeout.ts"
import { type CliFailure, usageError } from "./exitCodes.ts"

/** Where the code comes from. */
export interface CodeSources {
  readonly argument: Option.Option<string>
  readonly file: Option.Option<string>
  /** Reads stdin to the end; only called when neither of the others is given and stdin is not a terminal. */
  readonly readStdin: () => Promise<string>
  readonly stdinIsTerminal: boolean
}

const NO_CODE = "no code to run: pass it as an argument (veyyon eval 'print(1)'), with --file FILE, or on stdin (echo 'print(1)' | veyyon eval)."

const readFile = (file: string): Effect.Effect<string, CliFailure> =>
  Effect.try({
    try: () => fs.readFileSync(file, "utf8"),
    catch: (error) => {
      const code = (error as NodeJS.ErrnoException).code
      const why = code === "ENOENT" ? "it does not exist" : code === "EISDIR" ? "it is a directory" : (error as Error).message
      return usageError(`cannot read --file ${file}: ${why}. Pass a readable file of code, or - for stdin.`)
    }
  })

const nonBlank = (code: string): Effect.Effect<string, CliFailure> =>
  code.trim().length === 0 ? Effect.fail(usageError(NO_CODE)) : Effect.succeed(code)

/** The cell's code from exactly one source; a usage error names the fix when there is none, or two. */
export const readCode = (sources: CodeSources): Effect.Effect<string, CliFailure> =>
  Effect.gen(function*() {
    const argument = Option.getOrUndefined(sources.argument)
    const file = Option.getOrUndefined(sources.file)
    if (argument !== undefined && file !== undefined) {
      return yield* usageError("give the code either as an argument or with --file, not both.")
    }
    if (argument !== undefined) return yield* nonBlank(argument)
    if (file !== undefined && file !== "-") return yield* nonBlank(yield* readFile(file))
    if (file === undefined && sources.stdinIsTerminal) return yield* usageError(NO_CODE)
    const text = yield* Effect.tryPromise({
      try: sources.readStdin,
      catch: (error) => usageError(`cannot read the code from stdin: ${(error as Error).message}.`)
    })
    return yield* nonBlank(text)
  })

/** Reads all of this process's stdin as UTF-8. */
export const readProcessStdin = (): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Array<Buffer> = []
    process.stdin.on("data", (chunk: Buffer) => chunks.push(chunk))
    process.stdin.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")))
    process.stdin.once("error", reject)
  })

/** A timeout flag's seconds, and a note when it was clamped into range. */
export interface TimeoutFlag {
  readonly seconds: number | undefined
  readonly note?: string
}

/** Reads `--timeout`: a number of seconds, clamped to 1..3600 (with a note); anything else is a usage error. */
export const parseTimeout = (raw: Option.Option<string>): Result.Result<TimeoutFlag, CliFailure> => {
  if (Option.isNone(raw)) return Result.succeed({ seconds: undefined })
  const text = raw.value.trim()
  const number = text.length === 0 ? Number.NaN : Number(text)
  return clampTimeoutSeconds(Number.isNaN(number) ? raw.value : number).pipe(
    Result.mapError((error) => usageError(error.message.replace(/^timeout/, "--timeout"))),
    Result.map((seconds): TimeoutFlag =>
      seconds === number
        ? { seconds }
        : { seconds, note: `--timeout ${text} is outside ${MIN_TIMEOUT_SECONDS}..${MAX_TIMEOUT_SECONDS} seconds; using ${seconds}.` }
    )
  )
}
