/**
 * The `veyyon` command line as one effect that answers with the exit code: eval, repl,
 * setup python --check, mcp and demo. Logs go to stderr (stdout carries output, or the
 * MCP protocol). Every failure ends as an exit code (see `exitCodes.ts`) and, unless
 * the output already said it, one sentence on stderr; never a stack trace.
 */
import { CliConfig, Command, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Console, Effect, Logger } from "effect"
import { colorAllowed, plainConsole } from "./color.ts"
import { demoCommand } from "./commands/demo.ts"
import { evalCommand } from "./commands/eval.ts"
import { exportCommand } from "./commands/export.ts"
import { mcpCommand } from "./commands/mcp.ts"
import { replCommand } from "./commands/repl.ts"
import { runnerCommand } from "./commands/runner.ts"
import { setupCommand } from "./commands/setup.ts"
import { CliFailure, ExitCode } from "./exitCodes.ts"
import { VERSION } from "./version.ts"

const root = Command.make("veyyon").pipe(
  Command.withDescription("Run Python, JavaScript and Ruby cells in retained kernels: from the shell, interactively, as an MCP tool, or as a runner of a cluster."),
  Command.withSubcommands([evalCommand, replCommand, exportCommand, setupCommand, mcpCommand, runnerCommand, demoCommand])
)

const cli = Command.run(root, { name: "veyyon", version: VERSION })

const stderrLogger = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

const report = (sentence: string) => Effect.sync(() => process.stderr.write(`veyyon: ${sentence}\n`))

/** Runs a command line (`argv` as `process.argv`: node, script, arguments) and answers with the exit code. */
export const program = (argv: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.suspend(() => cli(argv)).pipe(
    (run) =>
      Console.consoleWith((console) =>
        Effect.withConsole(run, plainConsole(console, {
          plainStdout: !colorAllowed(process.stdout),
          plainStderr: !colorAllowed(process.stderr)
        }))
      ),
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
