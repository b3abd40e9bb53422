/**
 * Whether the CLI may colour a stream: only a terminal, and only when `NO_COLOR` is unset
 * (or empty or blank) and `TERM` is not `dumb` (https://no-color.org). Text bound elsewhere, such as
 * `--help` rendered by the command-line library, goes through a console that strips ANSI.
 */
import { Console } from "effect"
import stripAnsi from "strip-ansi"
import { hostVariables, readText } from "../services/config/ConfigSources.ts"
import type { EnvRecord } from "../services/isolation/EnvPolicy.ts"

/** Whether `TERM` names a terminal that understands no escape sequences (`dumb`). */
export const dumbTerminal = (env: EnvRecord = hostVariables()): boolean => readText("TERM", env) === "dumb"

/** Whether text written to `stream` may carry ANSI colour, given the environment. */
export const colorAllowed = (
  stream: { readonly isTTY?: boolean },
  env: EnvRecord = hostVariables()
): boolean => stream.isTTY === true && readText("NO_COLOR", env) === undefined && !dumbTerminal(env)

const plain = (args: ReadonlyArray<unknown>): Array<unknown> =>
  args.map((arg) => (typeof arg === "string" ? stripAnsi(arg) : arg))

/** `base` with ANSI escapes removed from what it logs to stdout (`plainStdout`) and stderr (`plainStderr`). */
export const plainConsole = (
  base: Console.Console,
  options: { readonly plainStdout: boolean; readonly plainStderr: boolean }
): Console.Console => ({
  ...base,
  ...(options.plainStdout
    ? { log: (...args) => base.log(...plain(args)), info: (...args) => base.info(...plain(args)) }
    : {}),
  ...(options.plainStderr
    ? { error: (...args) => base.error(...plain(args)), warn: (...args) => base.warn(...plain(args)) }
    : {})
})
