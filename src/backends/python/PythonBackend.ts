/**
 * Python: the interpreter `PythonRuntime` resolves (setting, active venv or conda env, a
 * venv in the cwd, the managed venv, PATH), spawned as `<python> -u <cache>/boot.py` with
 * frames on the runner's private dup of fd 1; the prelude is sent as one silent request.
 */
import { Duration, Effect } from "effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { PythonRuntime } from "./PythonRuntime.ts"
import { cachedPath, type CachedRunner } from "../../services/storage/RunnerCache.ts"
import { makeBackend } from "../Backend.ts"
import { runCommand } from "../../process/RunCommand.ts"

const ENTRY = "boot.py"

/** The runner package below `runner/python/` (and below its cached copy); boot.py serves it. */
export const PYTHON_PACKAGE_DIR = "_veyyon_runner"

/**
 * Writes the runner package's compiled modules beside them (boot.py caches each as
 * `_veyyon_runner/<module>.<cache_tag>.pyc`) when no interpreter has yet: a sandboxed
 * kernel sees the runner cache read-only, so it could not, and would compile the runner
 * at every start. Runs our own boot once with `--warm`, outside the sandbox, with only PATH
 * in its environment: it compiles every module, the ones the runner loads only when first
 * used included, and runs none; no cell code is involved.
 */
export const warmRunnerCache = (python: string, runner: CachedRunner): Effect.Effect<void> =>
  Effect.suspend(() => {
    let cached = false
    try {
      cached = NodeFs.readdirSync(NodePath.join(runner.dir, PYTHON_PACKAGE_DIR)).some((name) => /^server\..+\.pyc$/.test(name))
    } catch {
      cached = false
    }
    if (cached) return Effect.void
    const boot = cachedPath(runner, ENTRY)
    return runCommand({ command: python, args: ["-u", boot, "--warm"], cwd: NodePath.dirname(boot), env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } }).pipe(
      Effect.timeoutOption(Duration.seconds(60)),
      Effect.ignore
    )
  })

/** The Python backend. */
export const python = makeBackend({
  id: "py",
  displayName: "Python",
  guidance: [
    "Python: the value of a cell's last expression is shown (end the line with `;` to hide it); print(), display() and matplotlib figures are captured.",
    "Python cells accept IPython-style magics: %pip, %cd, %pwd, %ls, %env, %time, %timeit, %who, %whos, %reset, %run, %load, %%bash, %%capture, %%writefile, !cmd and var = !cmd.",
    "input() is not supported: pass data in code."
  ],
  enabledByDefault: true,
  interpreterEnv: "VEYYON_PYTHON_INTERPRETER",
  skipCheckEnv: "VEYYON_PYTHON_SKIP_CHECK",
  olderSection: "python",
  searchPathEnv: "PYTHONPATH",
  runner: { folder: "python", entry: ENTRY },
  notebook: {
    kernelspec: { name: "python3", display_name: "Python 3 (ipykernel)", language: "python" },
    language_info: {
      name: "python",
      file_extension: ".py",
      mimetype: "text/x-python",
      codemirror_mode: { name: "ipython", version: 3 },
      pygments_lexer: "ipython3",
      nbconvert_exporter: "python"
    }
  },
  introspects: true,
  memoryLimit: "address-space",
  runtime: (settings) => Effect.gen(function*() {
    const runtime = yield* PythonRuntime
    return {
      resolve: (cwd) => Effect.map(runtime.locate(cwd, settings), (found) => ({ executable: found.executable, binDir: found.venvBin })),
      explainStartFailure: (cwd) => Effect.asVoid(runtime.resolve(cwd, settings)),
      env: (interpreter, { artifactsDir }) => runtime.kernelEnv({ venvBin: interpreter.binDir }, { artifactsDir }),
      beforeSandboxedStart: (interpreter, runner) => warmRunnerCache(interpreter.executable, runner)
    }
  }),
  launch: (interpreter, runner) => ({
    command: interpreter.executable,
    args: ["-u", cachedPath(runner, ENTRY)],
    channel: "stdio",
    prelude: runner.sources.get("prelude.py") ?? ""
  })
})
