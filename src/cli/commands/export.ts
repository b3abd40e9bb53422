/**
 * `veyyon export --session ID FILE.ipynb [--language ID]`: writes the cells a session
 * ran (through `veyyon eval --session ID`, the MCP server or the library) as an nbformat 4
 * notebook. Exit 0 once written, 2 on bad usage, 1 when the record or FILE cannot be used.
 */
import { Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { type BackendId, registeredBackends } from "../../backends/index.ts"
import { SessionRecord } from "../../services/output/SessionRecord.ts"
import { CliFailure, ExitCode } from "../exitCodes.ts"
import { cliEvalLayer } from "../session.ts"
import { DEFAULT_EVAL_SESSION } from "./eval.ts"

const file = Argument.String("FILE").pipe(Argument.withDescription("The notebook to write (.ipynb); replaced if it exists."))
const session = Flag.String("session").pipe(
  Flag.withMetavar("ID"),
  Flag.withDescription("The session whose cells to export (the id given to eval --session, or the MCP/library session)."),
  Flag.withDefault(DEFAULT_EVAL_SESSION)
)
const language = Flag.ChoiceWithValue("language", registeredBackends().map((backend) => [backend.id, backend.id] as const)).pipe(
  Flag.withDescription("The notebook's kernel (default: the first cell's language); cells in another language become raw cells."),
  Flag.optional
)

/** Writes the session's notebook and says how many cells it holds. */
export const exportSession = (sessionId: string, target: string, kernel?: BackendId) =>
  Effect.gen(function*() {
    const record = yield* SessionRecord
    const cells = yield* record.cells(sessionId)
    yield* record.exportNotebook(sessionId, target, kernel)
    return cells.length
  })

/** The `export` command. */
export const exportCommand = Command.make("export", { file, session, language }, (flags) =>
  exportSession(flags.session, flags.file, Option.getOrUndefined(flags.language)).pipe(
    Effect.flatMap((count) =>
      count === 0
        ? Effect.sync(() => process.stderr.write(`veyyon: session ${flags.session} has no recorded cells; wrote an empty notebook to ${flags.file}\n`))
        : Effect.sync(() => process.stderr.write(`veyyon: wrote ${count} cell${count === 1 ? "" : "s"} of session ${flags.session} to ${flags.file}\n`))
    ),
    Effect.catchTag("SessionRecordError", (error) => new CliFailure({ code: ExitCode.CellFailed, sentence: error.message })),
    Effect.provide(cliEvalLayer())
  )).pipe(Command.withDescription("Write a session's cells (sources, outputs, execution counts) as a Jupyter notebook (nbformat 4)."))
