/**
 * Ruby: `kernel.backends.rb.interpreter` (`VEYYON_RUBY_INTERPRETER`) when set, else `ruby`
 * on PATH, run once to check it is Ruby 2.7+ and to learn the real executable
 * (`RbConfig.ruby`); spawned as `ruby <cache>/runner.rb` with frames on fd 3, the prelude
 * sent as one silent request before init.
 */
import { Data, Duration, Effect } from "effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { type EnvRecord, runnerEnv } from "../services/isolation/EnvPolicy.ts"
import { cachedPath } from "../services/storage/RunnerCache.ts"
import { makeBackend, RuntimeUnavailable } from "./Backend.ts"
import { runCommand } from "../process/RunCommand.ts"
import { describeExit } from "../kernel/KernelProcess.ts"

const ENTRY = "runner.rb"

/** The oldest Ruby the runner supports. */
export const MIN_RUBY_VERSION = [2, 7] as const

/** The environment variable naming the Ruby interpreter. */
export const RUBY_INTERPRETER_ENV = "VEYYON_RUBY_INTERPRETER"

/** A resolved, checked Ruby. */
export interface RubyInterpreter {
  /** What to spawn: `RbConfig.ruby` of the interpreter found. */
  readonly executable: string
  /** The path the rule picked. */
  readonly foundAt: string
  /** Which rule picked it. */
  readonly rule: "setting" | "PATH"
  /** `RUBY_VERSION`, e.g. `3.1.2`. */
  readonly version: string
}

/** Whether a `RUBY_VERSION` is new enough for the runner. */
export const isSupportedRubyVersion = (version: string): boolean => {
  const [major = 0, minor = 0] = version.split(".").map(Number)
  return major > MIN_RUBY_VERSION[0] || (major === MIN_RUBY_VERSION[0] && minor >= MIN_RUBY_VERSION[1])
}

const FIX_INSTALL = "install Ruby 2.7 or newer and put ruby on PATH (Debian: apt-get install ruby)"
const FIX_SETTING = `set kernel.backends.rb.interpreter (or ${RUBY_INTERPRETER_ENV}) to a Ruby 2.7+ executable`
const FIX_CHECK = "then run `veyyon setup ruby --check` to see which interpreter is picked"

const unavailable = (detail: string, fix: string) =>
  new RuntimeUnavailable({ language: "rb", detail: `Ruby backend not available: ${detail}`, fix: `${fix}; ${FIX_CHECK}` })

const isExecutableFile = (file: string): boolean => {
  try {
    NodeFs.accessSync(file, NodeFs.constants.X_OK)
    return NodeFs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** The candidate the rules pick: the setting (a path, relative to `cwd`, or a command on PATH), else `ruby` on PATH. */
export const findRubyCandidate = (
  setting: string | undefined,
  cwd: string,
  path: string | undefined
): { readonly file: string; readonly rule: "setting" | "PATH" } | RuntimeUnavailable => {
  const name = setting ?? "ruby"
  const rule = setting === undefined ? "PATH" : "setting"
  const candidates = name.includes("/")
    ? [NodePath.resolve(cwd, name)]
    : (path ?? "").split(NodePath.delimiter).filter((dir) => dir.length > 0).map((dir) => NodePath.join(dir, name))
  const file = candidates.find(isExecutableFile)
  if (file !== undefined) return { file, rule }
  return setting === undefined
    ? unavailable("no ruby found on PATH", `${FIX_INSTALL}, or ${FIX_SETTING}`)
    : unavailable(`the configured interpreter ${setting} is not an executable file`, `${FIX_SETTING}, or unset it to use ruby on PATH`)
}

class CheckFailed extends Data.TaggedError("CheckFailed")<{ readonly problem: string }> {}

const CHECK_SCRIPT = "require 'rbconfig'; print RbConfig.ruby, \"\\n\", RUBY_VERSION"

/** How long the one-off check may take. */
export const RUBY_CHECK_TIMEOUT_MS = 15_000

const runCheck = (file: string, cwd: string, env: Record<string, string>) =>
  runCommand({ command: file, args: ["-e", CHECK_SCRIPT], cwd, env }).pipe(
    Effect.mapError((error) => new CheckFailed({ problem: error.message })),
    Effect.flatMap(({ exit, stdout, stderr }) => {
      const [executable = "", version = ""] = stdout.trim().split("\n")
      if (exit.code !== 0 || !/^\d+\.\d+/.test(version)) {
        const said = stderr.trim().split("\n").slice(-3).join(" | ").slice(0, 400)
        const why = exit.code === 0 ? "it did not report a Ruby version (is it a Ruby interpreter?)" : `it ended with ${describeExit(exit)}`
        return Effect.fail(new CheckFailed({ problem: said.length > 0 ? `${why}: ${said}` : why }))
      }
      return Effect.succeed({ executable: isExecutableFile(executable) ? executable : file, version })
    }),
    Effect.timeoutOrElse({
      duration: Duration.millis(RUBY_CHECK_TIMEOUT_MS),
      orElse: () => Effect.fail(new CheckFailed({ problem: `it did not answer within ${RUBY_CHECK_TIMEOUT_MS / 1000}s` }))
    })
  )

/** Resolves and checks Ruby for kernels started in `cwd`; successful checks are kept in `cache`. */
export const resolveRuby = Effect.fnUntraced(function*(
  options: { readonly setting: string | undefined; readonly cwd: string; readonly env: EnvRecord },
  cache: Map<string, RubyInterpreter> = new Map()
): Effect.fn.Return<RubyInterpreter, RuntimeUnavailable> {
  const candidate = findRubyCandidate(options.setting, options.cwd, options.env.PATH)
  if (candidate instanceof RuntimeUnavailable) return yield* candidate
  const known = cache.get(candidate.file)
  if (known !== undefined) return known
  const checked = yield* runCheck(candidate.file, options.cwd, runnerEnv(options.env)).pipe(
    Effect.mapError((failed) =>
      unavailable(`${candidate.file} (picked by ${candidate.rule === "PATH" ? "PATH" : "the setting"}) does not run: ${failed.problem}`, `repair it, ${FIX_INSTALL}, or ${FIX_SETTING}`))
  )
  if (!isSupportedRubyVersion(checked.version)) {
    return yield* unavailable(
      `${candidate.file} is Ruby ${checked.version}, and Ruby ${MIN_RUBY_VERSION.join(".")} or newer is required`,
      `${FIX_INSTALL}, or ${FIX_SETTING}`
    )
  }
  const found: RubyInterpreter = { executable: checked.executable, foundAt: candidate.file, rule: candidate.rule, version: checked.version }
  cache.set(candidate.file, found)
  return found
})

const BLOCK_KEYWORD = /^\s*(?:[\w.]+\s*=\s*)?(?:def|class|module|if|unless|while|until|case|begin|for)\b/
const BLOCK_OPENER = /(?:\bdo|\{)\s*(?:\|[^|]*\|)?\s*(?:#.*)?$/

/** Whether a line typed at the REPL opens a Ruby block (`def`, `class`, `if`, `do |x|`, a `{` at its end, ...). */
export const opensRubyBlock = (line: string): boolean => BLOCK_KEYWORD.test(line) || BLOCK_OPENER.test(line)

/** The Ruby backend. */
export const ruby = makeBackend({
  id: "rb",
  displayName: "Ruby",
  guidance: [
    "Ruby: locals, methods and constants persist across cells (one binding, as in IRB); the last expression's inspect is shown (not nil, an assignment, a def/class, or a cell ending in `;`); puts, $stdout, $stderr and child-process output are captured.",
    "Ruby cells have display(obj) (to_html, to_markdown, to_svg, to_png hooks, or a MIME Hash like {\"text/html\" => html}), kv (kv[\"key\"] = value, shared with py and js cells), defs, env, and agent()/completion()."
  ],
  enabledByDefault: false,
  interpreterEnv: RUBY_INTERPRETER_ENV,
  searchPathEnv: "RUBYLIB",
  runner: { folder: "ruby", entry: ENTRY },
  notebook: {
    kernelspec: { name: "ruby", display_name: "Ruby", language: "ruby" },
    language_info: { name: "ruby", file_extension: ".rb", mimetype: "application/x-ruby" }
  },
  introspects: true,
  opensBlock: opensRubyBlock,
  predicateNames: true,
  memoryLimit: "address-space",
  runtime: (settings) => Effect.sync(() => {
    const cache = new Map<string, RubyInterpreter>()
    return {
      resolve: (cwd: string) =>
        Effect.map(resolveRuby({ setting: settings.interpreter, cwd, env: process.env }, cache), (found) => ({ executable: found.executable })),
      env: (_interpreter, { artifactsDir }) => runnerEnv(process.env, { artifactsDir })
    }
  }),
  launch: (interpreter, runner) => ({
    command: interpreter.executable,
    args: [cachedPath(runner, ENTRY)],
    channel: "fd3",
    prelude: runner.sources.get("prelude.rb") ?? ""
  })
})
