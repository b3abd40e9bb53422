/**
 * Which Python interpreter a kernel runs, decided by pure rules over an injected
 * filesystem probe.
 *
 * Order: the `python.interpreter` setting (when given, nothing else is consulted);
 * else `VIRTUAL_ENV`, `CONDA_PREFIX`, `<cwd>/.venv`, `<cwd>/venv`, the managed venv
 * `~/.veyyon/python-env`, then `python3` and `python` on PATH. `python3` comes first
 * because on several systems `python` is missing or is Python 2 while `python3` is
 * always a Python 3. A venv that does not hold an interpreter is passed over and
 * reported; the next rule is tried.
 */
import { Result } from "effect"
import * as path from "node:path"
import type { EnvRecord } from "../../services/isolation/EnvPolicy.ts"
import { pathEnvKey } from "../../services/isolation/EnvPolicy.ts"

/** The rule that picked an interpreter, as `veyyon setup python --check` reports it. */
export type ResolutionRule = "setting" | "VIRTUAL_ENV" | "CONDA_PREFIX" | ".venv" | "venv" | "managed" | "PATH"

/** Every rule, in the order they are tried. */
export const RESOLUTION_RULES: ReadonlyArray<ResolutionRule> = [
  "setting", "VIRTUAL_ENV", "CONDA_PREFIX", ".venv", "venv", "managed", "PATH"
]

/** What the rules may ask of the filesystem. */
export interface FileProbe {
  /** Whether something exists at the path (following symlinks). */
  readonly exists: (file: string) => boolean
  /** Whether the path is a regular file the current user may execute. */
  readonly isExecutable: (file: string) => boolean
}

/** Everything the rules depend on. */
export interface ResolutionInput {
  /** The `python.interpreter` setting: a path (relative to `cwd`, `~` allowed) or a command name. */
  readonly interpreter: string | undefined
  readonly env: EnvRecord
  readonly cwd: string
  readonly homeDir: string
  readonly platform: NodeJS.Platform
  readonly probe: FileProbe
}

/** Why a rule did not yield an interpreter. */
export type AttemptOutcome = "unset" | "missing" | "not-executable"

/** One rule that was looked at and passed over. */
export interface ResolutionAttempt {
  readonly rule: ResolutionRule
  /** The path (or command) the rule looked at, when it had one. */
  readonly target: string | undefined
  readonly outcome: AttemptOutcome
}

/** The interpreter the rules chose, before anyone has run it. */
export interface PythonCandidate {
  readonly executable: string
  readonly rule: ResolutionRule
  /** The venv's bin (or Scripts) directory, to put first on PATH. */
  readonly venvBin?: string
  /** Earlier rules that were passed over, e.g. a `VIRTUAL_ENV` without an interpreter. */
  readonly skipped: ReadonlyArray<ResolutionAttempt>
}

/** Where the managed venv lives under the home directory. */
export const MANAGED_VENV_DIR = path.join(".veyyon", "python-env")

const pathApi = (platform: NodeJS.Platform): path.PlatformPath => (platform === "win32" ? path.win32 : path.posix)

/** The interpreter inside a venv or conda env, and the directory to put on PATH. */
export const envInterpreter = (
  dir: string,
  platform: NodeJS.Platform,
  kind: "venv" | "conda"
): { readonly executable: string; readonly bin: string } => {
  const p = pathApi(platform)
  if (platform === "win32") {
    const bin = kind === "conda" ? dir : p.join(dir, "Scripts")
    return { executable: p.join(bin, "python.exe"), bin }
  }
  const bin = p.join(dir, "bin")
  return { executable: p.join(bin, "python"), bin }
}

const checkFile = (probe: FileProbe, file: string): AttemptOutcome | undefined => {
  if (!probe.exists(file)) return "missing"
  return probe.isExecutable(file) ? undefined : "not-executable"
}

const isBlank = (value: string | undefined): value is undefined => value === undefined || value.trim().length === 0

/** Names looked up on PATH, in order. */
export const pathCommandNames = (platform: NodeJS.Platform): ReadonlyArray<string> =>
  platform === "win32" ? ["python.exe", "python3.exe"] : ["python3", "python"]

/** The first executable `name` in the absolute entries of PATH, if any. */
export const searchPath = (
  name: string,
  env: EnvRecord,
  platform: NodeJS.Platform,
  probe: FileProbe
): string | undefined => {
  const p = pathApi(platform)
  const value = env[pathEnvKey(env, platform)]
  if (isBlank(value)) return undefined
  const names = platform === "win32" && p.extname(name) === "" ? [name + ".exe", name] : [name]
  for (const entry of value.split(p.delimiter)) {
    if (!p.isAbsolute(entry)) continue
    for (const candidateName of names) {
      const file = p.join(entry, candidateName)
      if (probe.isExecutable(file)) return file
    }
  }
  return undefined
}

const looksLikePath = (value: string): boolean =>
  value.includes("/") || value.includes("\\") || value.startsWith("~")

const fromSetting = (input: ResolutionInput, interpreter: string): Result.Result<PythonCandidate, ResolutionAttempt> => {
  const p = pathApi(input.platform)
  if (!looksLikePath(interpreter)) {
    const found = searchPath(interpreter, input.env, input.platform, input.probe)
    return found === undefined
      ? Result.fail({ rule: "setting", target: interpreter, outcome: "missing" })
      : Result.succeed({ executable: found, rule: "setting", skipped: [] })
  }
  const expanded = interpreter === "~" || interpreter.startsWith("~/") || interpreter.startsWith("~\\")
    ? p.join(input.homeDir, interpreter.slice(1))
    : interpreter
  const executable = p.resolve(input.cwd, expanded)
  const outcome = checkFile(input.probe, executable)
  if (outcome !== undefined) return Result.fail({ rule: "setting", target: executable, outcome })
  const bin = p.dirname(executable)
  const inVenv = input.probe.exists(p.join(p.dirname(bin), "pyvenv.cfg"))
  return Result.succeed({ executable, rule: "setting", ...(inVenv ? { venvBin: bin } : {}), skipped: [] })
}

/**
 * Applies the rules in order. Right: the chosen candidate. Left: every rule that was
 * tried, for an error message that says what to fix.
 */
export const resolvePythonCandidate = (
  input: ResolutionInput
): Result.Result<PythonCandidate, ReadonlyArray<ResolutionAttempt>> => {
  if (!isBlank(input.interpreter)) {
    return fromSetting(input, input.interpreter.trim()).pipe(Result.mapError((attempt) => [attempt]))
  }
  const p = pathApi(input.platform)
  const tried: Array<ResolutionAttempt> = []
  const envDirs: ReadonlyArray<readonly [ResolutionRule, string | undefined, "venv" | "conda"]> = [
    ["VIRTUAL_ENV", input.env["VIRTUAL_ENV"], "venv"],
    ["CONDA_PREFIX", input.env["CONDA_PREFIX"], "conda"],
    [".venv", p.join(input.cwd, ".venv"), "venv"],
    ["venv", p.join(input.cwd, "venv"), "venv"],
    ["managed", p.join(input.homeDir, MANAGED_VENV_DIR), "venv"]
  ]
  for (const [rule, dir, kind] of envDirs) {
    if (isBlank(dir)) {
      tried.push({ rule, target: undefined, outcome: "unset" })
      continue
    }
    const { bin, executable } = envInterpreter(p.resolve(input.cwd, dir), input.platform, kind)
    const outcome = checkFile(input.probe, executable)
    if (outcome === undefined) return Result.succeed({ executable, rule, venvBin: bin, skipped: tried })
    tried.push({ rule, target: executable, outcome })
  }
  const names = pathCommandNames(input.platform)
  if (isBlank(input.env[pathEnvKey(input.env, input.platform)])) {
    tried.push({ rule: "PATH", target: undefined, outcome: "unset" })
    return Result.fail(tried)
  }
  for (const name of names) {
    const found = searchPath(name, input.env, input.platform, input.probe)
    if (found !== undefined) return Result.succeed({ executable: found, rule: "PATH", skipped: tried })
  }
  tried.push({ rule: "PATH", target: names.join(" or "), outcome: "missing" })
  return Result.fail(tried)
}

const RULE_LABELS: Record<ResolutionRule, string> = {
  setting: "python.interpreter setting",
  VIRTUAL_ENV: "VIRTUAL_ENV",
  CONDA_PREFIX: "CONDA_PREFIX",
  ".venv": "<cwd>/.venv",
  venv: "<cwd>/venv",
  managed: "managed venv ~/.veyyon/python-env",
  PATH: "PATH"
}

/** One line a person can read, e.g. `VIRTUAL_ENV: /p/.venv/bin/python does not exist`. */
export const describeAttempt = (attempt: ResolutionAttempt): string => {
  const label = RULE_LABELS[attempt.rule]
  switch (attempt.outcome) {
    case "unset":
      return `${label}: not set`
    case "missing":
      return attempt.target !== undefined && !looksLikePath(attempt.target)
        ? `${label}: no ${attempt.target} on PATH`
        : `${label}: ${attempt.target} does not exist`
    case "not-executable":
      return `${label}: ${attempt.target} is not an executable file`
  }
}
