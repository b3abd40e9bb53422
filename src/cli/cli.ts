/**
 * The `veyyon` command line as one effect that answers with the exit code: eval, repl,
 * setup python --check, mcp and demo. Logs go to stderr (stdout carries output, or the
 * MCP protocol). Every failure ends as an exit code (see `exitCodes.ts`) and, unless
 * the output already said it, one sentence on stderr (with `--json`, a JSON document on
 * stdout instead); never a stack trace.
 */
import { CliConfig, Command, HelpDoc, ValidationError } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Console, Effect, Logger } from "effect"
import stripAnsi from "strip-ansi"
import { checkArgv } from "./argvCheck.ts"
import { colorAllowed, plainConsole } from "./color.ts"
import { commandFlags } from "./commandFlags.ts"
import { demoCommand } from "./commands/demo.ts"
import { evalCommand } from "./commands/eval.ts"
import { exportCommand } from "./commands/export.ts"
import { mcpCommand } from "./commands/mcp.ts"
import { replCommand } from "./commands/repl.ts"
import { runnerCommand } from "./commands/runner.ts"
import { setupCommand, setupFlags } from "./commands/setup.ts"
import { CliFailure, ExitCode, failureJson, failureKind, usageError } from "./exitCodes.ts"
import { VERSION } from "./version.ts"

const subcommands = [evalCommand, replCommand, exportCommand, setupCommand, mcpCommand, runnerCommand, demoCommand] as const

const root = Command.make("veyyon").pipe(
  Command.withDescription("Run Python, JavaScript and Ruby cells in retained kernels: from the shell, interactively, as an MCP tool, or as a runner of a cluster."),
  Command.withSubcommands(subcommands)
)

const flagTable = commandFlags(root, [
  ...subcommands.filter((command) => command !== setupCommand).map((command) => commandFlags(command)),
  setupFlags
])

const cli = Command.run(root, { name: "veyyon", version: VERSION })

const stderrLogger = Logger.replace(Logger.defaultLogger, Logger.withConsoleError(Logger.logfmtLogger))

/** Says what went wrong: one sentence on stderr, or with `--json` the failure document on stdout. */
const reporter = (json: boolean) => (kind: string, sentence: string) =>
  Effect.sync(() => {
    if (json) process.stdout.write(failureJson(kind, sentence))
    else process.stderr.write(`veyyon: ${sentence}\n`)
  })

/** The text of a parse error's help document. */
const validationText = (error: ValidationError.ValidationError): string =>
  stripAnsi(HelpDoc.toAnsiText(error.error)).trim().replace(/\s*\n\s*/g, " ")

/**
 * Runs a command line (`argv` as `process.argv`: node, script, arguments) and answers with
 * the exit code. Flags are checked first (`argvCheck.ts`): an unknown one is a usage error,
 * never code. With `--json` before `--`, failures are JSON on stdout.
 */
export const program = (argv: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.suspend(() => {
    const checked = checkArgv(argv.slice(2), flagTable)
    const report = reporter(checked.flags.has("--json"))
    const run = checked.problem === undefined ? cli(argv) : Effect.fail(usageError(checked.problem))
    return run.pipe(
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
          return Effect.as(error.sentence === undefined ? Effect.void : report(failureKind(error.code), error.sentence), error.code)
        }
        if (ValidationError.isValidationError(error)) {
          // The parser has said it on stderr already; --json wants it on stdout too.
          return Effect.as(checked.flags.has("--json") ? report("usage", validationText(error)) : Effect.void, ExitCode.Usage)
        }
        return Effect.as(report("failed", `unexpected failure: ${String(error)}`), ExitCode.CellFailed)
      }),
      Effect.catchAllDefect((defect) =>
        Effect.as(
          report("internal", `internal error: ${defect instanceof Error ? defect.message : String(defect)}. Please report it with the command you ran.`),
          ExitCode.CellFailed
        )
      ),
      Effect.provide(CliConfig.layer({ showBuiltIns: false, showTypes: false })),
      Effect.provide(NodeContext.layer),
      Effect.provide(stderrLogger)
    )
  })
