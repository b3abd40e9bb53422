/**
 * Whether the CLI may colour a stream: only a terminal, and only when `NO_COLOR` is unset
 * or empty and `TERM` is not `dumb` (https://no-color.org). Text bound elsewhere, such as
 * `--help` rendered by the command-line library, goes through a console that strips ANSI.
 */
import { Console } from "effect"
import stripAnsi from "strip-ansi"

/** Whether text written to `stream` may carry ANSI colour, given the environment. */
export const colorAllowed = (
  stream: { readonly isTTY?: boolean },
  env: Readonly<Record<string, string | undefined>> = process.env
): boolean => stream.isTTY === true && (env.NO_COLOR ?? "") === "" && env.TERM !== "dumb"

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
