/**
 * `veyyon setup python --check`: which interpreter kernels started here would run, its
 * version, the rule that picked it, and the rules passed over on the way; then a real
 * kernel on it, started as `veyyon eval` starts one, runs a trivial cell. The
 * interpreter is always run for the check, even when `VEYYON_PYTHON_SKIP_CHECK` is set.
 * Exits 0 when cells run, 3 (with the reason or the fix) when they would not.
 * `veyyon setup ruby --check`: the same for the Ruby backend (setting, then `ruby` on PATH).
 * `veyyon setup sandbox --check`: see `setupSandbox.ts`.
 */
import { Effect, Layer } from "effect"
import { Command, Flag } from "effect/cli"
import { formatPythonVersion, type PythonInterpreter, PythonRuntime } from "../../backends/python/PythonRuntime.ts"
import { describeAttempt, type ResolutionRule } from "../../backends/python/RuntimeResolution.ts"
import { type RubyInterpreter, resolveRuby } from "../../backends/ruby.ts"
import { hostVariables } from "../../services/config/ConfigSources.ts"
import { backendSettingsOf, Settings, type SettingsValues } from "../../services/config/Settings.ts"
import type { CommandFlags } from "../argvCheck.ts"
import { commandFlags } from "../commandFlags.ts"
import { failureOf, usageError } from "../exitCodes.ts"
import { checkKernel, type KernelCheck } from "../kernelCheck.ts"
import { checkSandbox } from "./setupSandbox.ts"

const RULE_MEANINGS: Readonly<Record<ResolutionRule, string>> = {
  setting: "the python.interpreter setting (VEYYON_PYTHON_INTERPRETER)",
  VIRTUAL_ENV: "the active virtualenv (VIRTUAL_ENV)",
  CONDA_PREFIX: "the active conda env (CONDA_PREFIX)",
  ".venv": "the .venv directory here",
  venv: "the venv directory here",
  managed: "the managed venv ~/.veyyon/python-env",
  PATH: "python3/python on PATH"
}

/** The report's lines for a usable interpreter. */
export const describeInterpreter = (interpreter: PythonInterpreter): ReadonlyArray<string> => {
  const shim = interpreter.foundAt === interpreter.executable ? [] : [`found at     ${interpreter.foundAt}`]
  const passed = interpreter.skipped.map(describeAttempt)
  return [
    `interpreter  ${interpreter.executable}`,
    ...shim,
    `version      ${interpreter.version === undefined ? "not checked" : formatPythonVersion(interpreter.version)}`,
    `rule         ${interpreter.rule}: ${RULE_MEANINGS[interpreter.rule]}`,
    ...passed.map((line, index) => `${index === 0 ? "passed over " : "            "} ${line}`)
  ]
}

/** The report's last lines once a kernel on the interpreter ran the check cell. */
export const describeKernelCheck = (check: KernelCheck): ReadonlyArray<string> => [
  `kernel       started and ran a cell in ${check.millis} ms`,
  "ok: eval cells will run with this interpreter."
]

const withoutSkipCheck = (): Record<string, string | undefined> => ({ ...hostVariables(), VEYYON_PYTHON_SKIP_CHECK: undefined })

const runtimeLayer = Layer.merge(PythonRuntime.Live, Settings.fromEnv({}, withoutSkipCheck()))

const check = Flag.Boolean("check").pipe(
  Flag.withDescription("Report what kernels would run and which rule picked it (for python: and start one to run a cell)."),
  Flag.withDefault(false)
)

const printLines = (lines: ReadonlyArray<string>) => Effect.sync(() => process.stdout.write(lines.join("\n") + "\n"))

const pythonCommand = Command.make("python", { check }, ({ check }) =>
  check
    ? Effect.gen(function*() {
      const runtime = yield* PythonRuntime
      return yield* runtime.resolve(process.cwd(), backendSettingsOf(yield* Settings, "py"))
    }).pipe(
      Effect.tap((interpreter) => printLines(describeInterpreter(interpreter))),
      Effect.provide(runtimeLayer),
      Effect.mapError(failureOf),
      Effect.andThen(checkKernel("py", process.cwd(), withoutSkipCheck())),
      Effect.flatMap((kernel) => printLines(describeKernelCheck(kernel)))
    )
    : Effect.fail(usageError("setup python only checks for now: run `veyyon setup python --check`."))).pipe(
    Command.withDescription(
      "Show the interpreter kernels would run and the rule that picked it (setting, VIRTUAL_ENV, CONDA_PREFIX, .venv, venv, managed, PATH), then start a kernel on it and run a cell. Exit 0 usable, 3 not."
    )
  )

/** The report's lines for a usable Ruby. */
export const describeRuby = (interpreter: RubyInterpreter, settings: SettingsValues): ReadonlyArray<string> => [
  `interpreter  ${interpreter.executable}`,
  ...(interpreter.foundAt === interpreter.executable ? [] : [`found at     ${interpreter.foundAt}`]),
  `version      ${interpreter.version}`,
  `rule         ${
    interpreter.rule === "setting" ? "setting: kernel.backends.rb.interpreter (VEYYON_RUBY_INTERPRETER)" : "PATH: ruby on PATH"
  }`,
  settings.eval["rb"] === true
    ? "ok: rb cells will run with this interpreter."
    : "ok: rb cells would run with this interpreter; the rb backend is off (enable eval.rb or set VEYYON_RB=1)."
]

const rubyCommand = Command.make("ruby", { check }, ({ check }) =>
  check
    ? Effect.gen(function*() {
      const settings = yield* Settings
      const interpreter = yield* resolveRuby({ setting: backendSettingsOf(settings, "rb").interpreter, cwd: process.cwd(), env: process.env })
      yield* Effect.sync(() => process.stdout.write(describeRuby(interpreter, settings).join("\n") + "\n"))
    }).pipe(Effect.provide(Settings.fromEnv()), Effect.mapError(failureOf))
    : Effect.fail(usageError("setup ruby only checks for now: run `veyyon setup ruby --check`."))).pipe(
    Command.withDescription(
      "Show the Ruby kernels would run, its version and the rule that picked it (kernel.backends.rb.interpreter / VEYYON_RUBY_INTERPRETER, then ruby on PATH). Exit 0 usable, 3 not."
    )
  )

const sandboxCommand = Command.make("sandbox", { check }, ({ check }) =>
  check
    ? checkSandbox.pipe(Effect.provide(Settings.fromEnv()), Effect.mapError(failureOf))
    : Effect.fail(usageError("setup sandbox only checks for now: run `veyyon setup sandbox --check`."))).pipe(
    Command.withDescription(
      "Show whether kernels can be sandboxed here (bwrap, namespaces, network policy), how a kernel's process tree is contained, how limits are applied, and what sandbox.mode would do. Exit 0, or 3 when the mode is required and cannot be met."
    )
  )

const subcommands = [pythonCommand, rubyCommand, sandboxCommand] as const

/** The `setup` command and its `python`, `ruby` and `sandbox` subcommands. */
export const setupCommand = Command.make("setup").pipe(
  Command.withDescription("Check what veyyon needs from this machine."),
  Command.withSubcommands(subcommands)
)

/** The flags of `setup` and its subcommands. */
export const setupFlags: CommandFlags = commandFlags(setupCommand)
