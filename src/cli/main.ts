/**
 * The `veyyon` command: eval, repl, setup python --check, mcp and demo, on
 * `NodeRuntime.runMain`. Logs go to stderr (stdout carries output, or the MCP
 * protocol). Every failure ends as an exit code (see `exitCodes.ts`) and, unless the
 * output already said it, one sentence on stderr; never a stack trace.
 */
import { CliConfig, Command, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Logger } from "effect"
import { demoCommand } from "./commands/demo.ts"
import { evalCommand } from "./commands/eval.ts"
import { mcpCommand } from "./commands/mcp.ts"
import { replCommand } from "./commands/repl.ts"
import { setupCommand } from "./commands/setup.ts"
import { CliFailure, ExitCode } from "./exitCodes.ts"
import { VERSION } from "./version.ts"

/** The exit code of a run interrupted by a signal (128 + SIGINT). */
export const INTERRUPTED_EXIT_CODE = 130

const root = Command.make("veyyon").pipe(
  Command.withDescription("Run Python cells in a retained kernel: from the shell, interactively, or as an MCP tool."),
  Command.withSubcommands([evalCommand, replCommand, setupCommand, mcpCommand, demoCommand])
)

const cli = Command.run(root, { name: "veyyon", version: VERSION })

const stderrLogger = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

const report = (sentence: string) => Effect.sync(() => process.stderr.write(`veyyon: ${sentence}\n`))

/** The whole program: runs the command line and answers with the exit code. */
export const program = (argv: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.suspend(() => cli(argv)).pipe(
    Effect.as<number>(ExitCode.Ok),
    Effect.catchAll((error) => {
      if (error instanceof CliFailure) {
        return Effect.as(error.sentence === undefined ? Effect.void : report(error.sentence), error.code)
      }
      if (ValidationError.isValidationError(error)) return Effect.succeed(ExitCode.Usage)
      return Effect.as(report(`unexpected failure: ${String(error)}`), ExitCode.CellFailed)
    }),
    Effect.catchAllDefect((defect) =>
      Effect.as(
        report(`internal error: ${defect instanceof Error ? defect.message : String(defect)}. Please report it with the command you ran.`),
        ExitCode.CellFailed
      )
    ),
    Effect.provide(CliConfig.layer({ showBuiltIns: false, showTypes: false })),
    Effect.provide(NodeContext.layer),
    Effect.provide(stderrLogger)
  )

/** Exits with the program's code once stdout has drained. */
const teardown = <E, A>(exit: Exit.Exit<E, A>, onExit: (code: number) => void): void => {
  const code = Exit.isSuccess(exit) && typeof exit.value === "number"
    ? exit.value
    : Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
    ? INTERRUPTED_EXIT_CODE
    : ExitCode.CellFailed
  process.exitCode = code
  process.stdout.write("", () => onExit(code))
}

NodeRuntime.runMain(program(process.argv), { disableErrorReporting: true, teardown })
