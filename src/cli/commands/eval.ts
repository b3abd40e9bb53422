/**
 * `veyyon eval [CODE] [--file F] [--timeout S] [--reset] [--cwd DIR] [--session ID] [--json] [--language ID] [--python PATH]`:
 * runs one cell in a fresh kernel and prints its output as it streams, or the
 * `EvalResult` as JSON. Exits 0 when the cell ran cleanly, 1 when it raised, was
 * cancelled (Ctrl-C) or timed out, 2 on bad usage or input, 3 when no backend can run.
 */
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import * as path from "node:path"
import { makeCellView, stderrTarget, stdoutTarget } from "../cellView.ts"
import { parseTimeout, readCode, readProcessStdin } from "../cellInput.ts"
import { cellExitCode, CliFailure, ExitCode, failureOf } from "../exitCodes.ts"
import { savedImageLine } from "../images.ts"
import { takeOverSigint } from "../interrupts.ts"
import { type CellRun, cliEvalLayer, languageOption, pythonOption, runCell, startKernel } from "../session.ts"
import { structuredResult } from "../../services/tool/EvalSchema.ts"

/** The session id `veyyon eval` uses unless `--session` says otherwise. */
export const DEFAULT_EVAL_SESSION = "cli"

const code = Argument.String("CODE").pipe(
  Argument.withDescription("The cell's code. Without it (and without --file) the code is read from stdin."),
  Argument.optional
)
const file = Flag.String("file").pipe(
  Flag.withMetavar("FILE"),
  Flag.withDescription("Read the cell's code from FILE (- for stdin)."),
  Flag.optional
)
const timeout = Flag.String("timeout").pipe(
  Flag.withMetavar("SECONDS"),
  Flag.withDescription("The cell's time budget in seconds, 1..3600 (default 30); out-of-range values are clamped."),
  Flag.optional
)
const reset = Flag.Boolean("reset").pipe(Flag.withDescription("Start from a fresh kernel."), Flag.withDefault(false))
const cwd = Flag.String("cwd").pipe(
  Flag.withMetavar("DIR"),
  Flag.withDescription("Run the cell in DIR (default: the current directory)."),
  Flag.optional
)
const session = Flag.String("session").pipe(
  Flag.withMetavar("ID"),
  Flag.withDescription(
    "The session id: its kv store, artifacts and variables (restored from its snapshot) are kept across runs. " +
      "Without it the session is `cli`, whose kv and artifacts are kept but whose variables are not."
  ),
  Flag.optional
)
const json = Flag.Boolean("json").pipe(
  Flag.withDescription("Print the result as JSON (the MCP tool's structured result, with imageFiles, the saved images) instead of the rendered output."),
  Flag.withDefault(false)
)

const printJson = (run: CellRun) =>
  Effect.sync(() => {
    const document = { ...structuredResult(run.result), imageFiles: run.images.map((image) => image.path) }
    process.stdout.write(JSON.stringify(document, null, 2) + "\n")
  })

const printImages = (run: CellRun) =>
  Effect.sync(() => {
    for (const image of run.images) process.stdout.write(savedImageLine(image) + "\n")
    if (run.imageProblem !== undefined) process.stderr.write(`veyyon: the cell's images were not saved: ${run.imageProblem}\n`)
  })

/** The `eval` command. */
export const evalCommand = Command.make(
  "eval",
  { code, file, timeout, reset, cwd, session, json, language: languageOption, python: pythonOption },
  (flags) =>
    Effect.gen(function*() {
      const source = yield* readCode({
        argument: flags.code,
        file: flags.file,
        readStdin: readProcessStdin,
        stdinIsTerminal: process.stdin.isTTY === true
      })
      const budget = yield* Effect.fromResult(parseTimeout(flags.timeout))
      if (budget.note !== undefined) process.stderr.write(`veyyon: ${budget.note}\n`)
      const named = Option.isSome(flags.session)
      const context = {
        sessionId: Option.getOrElse(flags.session, () => DEFAULT_EVAL_SESSION),
        cwd: path.resolve(Option.getOrElse(flags.cwd, () => process.cwd())),
        language: flags.language
      }
      const run = yield* Effect.scoped(
        Effect.gen(function*() {
          const controller = new AbortController()
          yield* takeOverSigint((passOn) => (controller.signal.aborted ? passOn() : controller.abort()))
          yield* startKernel(context, { reset: flags.reset })
          return yield* runCell(
            { code: source, ...(budget.seconds === undefined ? {} : { timeout: budget.seconds }) },
            { ...context, signal: controller.signal },
            flags.json ? undefined : makeCellView(stdoutTarget(), stderrTarget())
          )
        })
      ).pipe(Effect.mapError(failureOf), Effect.provide(cliEvalLayer({ python: flags.python, language: flags.language, snapshots: named })))
      yield* flags.json ? printJson(run) : printImages(run)
      const exit = cellExitCode(run.result)
      if (exit !== ExitCode.Ok) return yield* new CliFailure({ code: exit })
    })
).pipe(
  Command.withDescription(
    "Run one cell (Python unless --language says otherwise) and print its output. Exit 0 ok, 1 cell error/cancelled/timed out, 2 usage, 3 no backend."
  )
)
