/**
 * The `veyyon` command line as one effect that answers with the exit code: eval, repl,
 * setup python --check, mcp and demo. Logs go to stderr (stdout carries output, or the
 * MCP protocol). Every failure ends as an exit code (see `exitCodes.ts`) and, unless
 * the output already said it, one sentence on stderr (with `--json`, a JSON document on
 * stdout instead); never a stack trace.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Console, Effect, Layer, Logger } from "effect"
import { CliError, CliOutput, Command } from "effect/cli"
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
import { sessionCommand } from "./commands/sessionCommand.ts"
import { setupCommand } from "./commands/setup.ts"
import { CliFailure, ExitCode, failureJson, failureKind, usageError } from "./exitCodes.ts"
import { VERSION } from "./version.ts"

const root = Command.make("veyyon").pipe(
  Command.withDescription("Run Python, JavaScript and Ruby cells in retained kernels: from the shell, interactively, as an MCP tool, or as a runner of a cluster."),
  Command.withSubcommands([evalCommand, replCommand, exportCommand, sessionCommand, setupCommand, mcpCommand, runnerCommand, demoCommand])
)

const flagTable = commandFlags(root)

const cli = Command.runWith(root, { version: VERSION })

const stderrLogger = Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)])

/** Help without the built-in flags' section below each command (the root's help still lists them), coloured only on a terminal. */
const helpFormatter = () =>
  CliOutput.layer(CliOutput.defaultFormatter({ colors: colorAllowed(process.stdout), globalFlags: "summary" }))

/** Says what went wrong: one sentence on stderr, or with `--json` the failure document on stdout. */
const reporter = (json: boolean) => (kind: string, sentence: string) =>
  Effect.sync(() => {
    if (json) process.stdout.write(failureJson(kind, sentence))
    else process.stderr.write(`veyyon: ${sentence}\n`)
  })

/** The text of a parse error: its problems, one line. */
const usageText = (error: CliError.CliError): string => {
  const problems = error._tag === "ShowHelp" ? error.errors.map((problem) => problem.message) : [error.message]
  const text = stripAnsi(problems.join(" ")).trim().replace(/\s*\n\s*/g, " ")
  return text.length > 0 ? text : "a command is needed; `veyyon --help` lists them."
}

/**
 * Runs a command line (`argv` as `process.argv`: node, script, arguments) and answers with
 * the exit code. Flags are checked first (`argvCheck.ts`): an unknown one is a usage error,
 * never code. With `--json` before `--`, failures are JSON on stdout.
 */
export const program = (argv: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.suspend(() => {
    const checked = checkArgv(argv.slice(2), flagTable)
    const json = checked.flags.has("--json")
    const report = reporter(json)
    const run = checked.problem === undefined ? cli(argv.slice(2)) : Effect.fail(usageError(checked.problem))
    return run.pipe(
      (run) =>
        Console.consoleWith((console) =>
          Effect.provideService(run, Console.Console, plainConsole(console, {
            plainStdout: !colorAllowed(process.stdout),
            plainStderr: !colorAllowed(process.stderr)
          }))
        ),
      Effect.as<number>(ExitCode.Ok),
      Effect.catch((error) => {
        if (error instanceof CliFailure) {
          return Effect.as(error.sentence === undefined ? Effect.void : report(failureKind(error.code), error.sentence), error.code)
        }
        if (CliError.isCliError(error)) {
          // The parser has said it on stderr already; --json wants it on stdout too.
          return Effect.as(json ? report("usage", usageText(error)) : Effect.void, ExitCode.Usage)
        }
        return Effect.as(report("failed", `unexpected failure: ${String(error)}`), ExitCode.CellFailed)
      }),
      Effect.catchDefect((defect) =>
        Effect.as(
          report("internal", `internal error: ${defect instanceof Error ? defect.message : String(defect)}. Please report it with the command you ran.`),
          ExitCode.CellFailed
        )
      ),
      Effect.provide(Layer.mergeAll(helpFormatter(), NodeServices.layer, stderrLogger))
    )
  })
