/**
 * The interpreter kernels run: picked by the rules in `RuntimeResolution`. `resolve` then
 * runs it once to check it works, is Python 3.8+, and to learn the real executable behind
 * shims (pyenv and similar) so later spawns skip the shim's start-up cost.
 *
 * Kernels use `locate`, which runs nothing for an interpreter that is a binary (or a link
 * to one): the kernel's own start is the check, and only when it fails does the host run
 * `resolve` to say clearly what is wrong (missing, failing, too old). A script (a shim,
 * starting with `#!`) is still checked up front, to spawn the real executable behind it.
 *
 * The check runs in the kernel's cwd with the kernel's filtered env (a pyenv shim
 * picks its version from the cwd), and its answer is cached per candidate and cwd
 * for the life of the service; failed checks are not cached. With
 * `python.skipCheck` (`VEYYON_PYTHON_SKIP_CHECK=1`) nothing is run and the path
 * found is used as is.
 */
import { Cache, Context, Data, Duration, Effect, Layer, Result, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import { type EnvRecord, runnerEnv } from "../../services/isolation/EnvPolicy.ts"
import {
  describeAttempt,
  type FileProbe,
  type PythonCandidate,
  type ResolutionAttempt,
  type ResolutionRule,
  resolvePythonCandidate
} from "./RuntimeResolution.ts"
import { type BackendSettings, type BackendUnavailability, isScript, RuntimeUnavailable } from "../Backend.ts"
import { runCommand } from "../../process/RunCommand.ts"

/** The oldest Python the runner supports. */
export const MIN_PYTHON_VERSION = { major: 3, minor: 8 } as const

/** `sys.version_info[:3]`. */
export interface PythonVersion {
  readonly major: number
  readonly minor: number
  readonly micro: number
}

/** Renders a version as `3.11.7`. */
export const formatPythonVersion = (version: PythonVersion): string =>
  `${version.major}.${version.minor}.${version.micro}`

/** Whether a version is new enough for the runner. */
export const isSupportedPythonVersion = (version: PythonVersion): boolean =>
  version.major > MIN_PYTHON_VERSION.major ||
  (version.major === MIN_PYTHON_VERSION.major && version.minor >= MIN_PYTHON_VERSION.minor)

/** A resolved, checked interpreter, ready to spawn kernels with. */
export interface PythonInterpreter {
  /** What to spawn: the real executable behind any shim, or the path found when the check is skipped. */
  readonly executable: string
  /** The path the rules picked, before shim resolution. */
  readonly foundAt: string
  /** Which rule picked it. */
  readonly rule: ResolutionRule
  /** The venv's bin (or Scripts) directory, to put first on PATH. */
  readonly venvBin?: string
  /** The interpreter's version; undefined when the check was skipped. */
  readonly version: PythonVersion | undefined
  /** Whether the interpreter was actually run. */
  readonly checked: boolean
  /** Rules passed over before this one, e.g. a stale `VIRTUAL_ENV`. */
  readonly skipped: ReadonlyArray<ResolutionAttempt>
}

const FIX_INSTALL = "install Python 3.8 or newer and put python3 on PATH (or create a venv at ~/.veyyon/python-env)"
const FIX_SETTING = "set python.interpreter (or VEYYON_PYTHON_INTERPRETER) to a Python 3.8+ executable"
const FIX_CHECK = "then run `veyyon setup python --check` to see which interpreter is picked"

/** No usable Python: none found, the one found does not run, or it is older than 3.8. */
export class PythonUnavailable extends Schema.TaggedError<PythonUnavailable>()("PythonUnavailable", {
  reason: Schema.Literals(["not-found", "failed-to-run", "too-old"]),
  detail: Schema.String,
  tried: Schema.Array(Schema.String),
  fix: Schema.String
}) implements BackendUnavailability {
  override get message(): string {
    return this.asRuntimeUnavailable().message
  }

  asRuntimeUnavailable(): RuntimeUnavailable {
    const tried = this.tried.length > 0 ? `. Tried: ${this.tried.join("; ")}` : ""
    return new RuntimeUnavailable({ language: "py", detail: `Python backend not available: ${this.detail}${tried}`, fix: this.fix })
  }
}

/** What running the interpreter once reported. */
export interface PythonInspection {
  readonly executable: string
  readonly version: PythonVersion
}

/** Running the interpreter for the check did not produce an answer. */
export class InspectionFailed extends Data.TaggedError("InspectionFailed")<{ readonly problem: string }> {}

/** Runs a candidate once and reports `sys.executable` and `sys.version_info`. */
export type InterpreterInspector = (request: {
  readonly executable: string
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
}) => Effect.Effect<PythonInspection, InspectionFailed>

/** Python 2 compatible, so an old interpreter can still say how old it is. */
const INSPECT_SCRIPT =
  "import sys, json; sys.stdout.write(json.dumps({'executable': sys.executable, " +
  "'version': list(sys.version_info[:3])}) + '\\n')"

const tail = (text: string): string => {
  const lines = text.trim().split(/\r?\n/).filter((line) => line.trim().length > 0)
  const last = lines.slice(-3).join(" | ")
  return last.length > 400 ? "…" + last.slice(-400) : last
}

const InspectionOutput = Schema.fromJsonString(Schema.Struct({
  executable: Schema.NullOr(Schema.String),
  version: Schema.Tuple([Schema.Int, Schema.Int, Schema.Int])
}))

const decodeInspection = Schema.decodeUnknownResult(InspectionOutput)

/** Parses the check script's answer: the last line of stdout that decodes. */
export const parseInspection = (stdout: string, candidate: string): PythonInspection | undefined => {
  const lines = stdout.split(/\r?\n/).filter((line) => line.trim().length > 0).reverse()
  for (const line of lines) {
    const decoded = decodeInspection(line.trim())
    if (Result.isSuccess(decoded)) {
      const { executable, version } = decoded.success
      return {
        executable: executable === null || executable.length === 0 ? candidate : executable,
        version: { major: version[0], minor: version[1], micro: version[2] }
      }
    }
  }
  return undefined
}

/** The inspector that really spawns the interpreter, with a time limit. */
export const commandInspector = (timeout: Duration.Input): InterpreterInspector => (request) =>
  runCommand({ command: request.executable, args: ["-c", INSPECT_SCRIPT], cwd: request.cwd, env: request.env }).pipe(
    Effect.mapError((error) => new InspectionFailed({ problem: `it could not be started: ${error.message}` })),
    Effect.flatMap(({ exit, stdout, stderr }) => {
      if (exit.code !== 0) {
        const said = tail(stderr)
        const how = exit.code === null ? `it was killed by ${exit.signal}` : `it exited with code ${exit.code}`
        return Effect.fail(new InspectionFailed({ problem: `${how}${said ? `: ${said}` : ""}` }))
      }
      const inspection = parseInspection(stdout, request.executable)
      if (inspection === undefined) {
        return Effect.fail(
          new InspectionFailed({
            problem: `it did not report a Python version (is it a Python interpreter?)${stdout.trim() ? `; it printed: ${tail(stdout)}` : ""}`
          })
        )
      }
      return Effect.succeed(inspection)
    }),
    Effect.timeoutOrElse({
      duration: timeout,
      orElse: () =>
        Effect.fail(new InspectionFailed({ problem: `it did not answer within ${Duration.format(Duration.fromInputUnsafe(timeout))}` }))
    })
  )

/** The node:fs probe the live service uses. */
export const nodeFileProbe = (platform: NodeJS.Platform = process.platform): FileProbe => ({
  exists: (file) => fs.existsSync(file),
  isExecutable: (file) => {
    try {
      if (!fs.statSync(file).isFile()) return false
      if (platform !== "win32") fs.accessSync(file, fs.constants.X_OK)
      return true
    } catch {
      return false
    }
  }
})

/** Variables the Python runner always receives so streamed output reaches the host promptly and decodes as UTF-8. */
export const PYTHON_FIXED_ENV: Readonly<Record<string, string>> = {
  PYTHONUNBUFFERED: "1",
  PYTHONIOENCODING: "utf-8"
}

/** The service: resolve the interpreter for a cwd, and build the env kernels run with. */
export interface PythonRuntimeService {
  /** The checked interpreter for kernels started in `cwd`, under the backend's settings (its interpreter setting, whether to check). */
  readonly resolve: (cwd: string, settings: BackendSettings) => Effect.Effect<PythonInterpreter, PythonUnavailable>
  /** The interpreter for kernels started in `cwd`, run only when it is a script (a shim); `resolve` explains a kernel that then fails to start. */
  readonly locate: (cwd: string, settings: BackendSettings) => Effect.Effect<PythonInterpreter, PythonUnavailable>
  /** The environment to spawn a kernel with: filtered host env, fixed runner vars, venv bin on PATH. */
  readonly kernelEnv: (
    interpreter: { readonly venvBin?: string | undefined },
    options?: { readonly artifactsDir?: string | undefined; readonly extra?: EnvRecord | undefined }
  ) => Record<string, string>
}

/** What the service depends on. */
export interface PythonRuntimeOptions {
  /** The host environment (filtered before any child sees it). */
  readonly env: EnvRecord
  readonly homeDir: string
  readonly platform: NodeJS.Platform
  readonly probe: FileProbe
  readonly inspect: InterpreterInspector
}

const ruleLabel = (rule: ResolutionRule): string =>
  rule === "setting" ? "the python.interpreter setting" : rule === "PATH" ? "PATH" : rule

const notFound = (tried: ReadonlyArray<ResolutionAttempt>): PythonUnavailable => {
  const fromSetting = tried.length === 1 && tried[0]!.rule === "setting"
  return new PythonUnavailable({
    reason: "not-found",
    detail: fromSetting ? "the configured interpreter cannot be used" : "no Python interpreter found",
    tried: tried.map(describeAttempt),
    fix: fromSetting
      ? `${FIX_SETTING}, or unset it to search venvs and PATH; ${FIX_CHECK}`
      : `${FIX_INSTALL}, or ${FIX_SETTING}; ${FIX_CHECK}`
  })
}

const failedToRun = (candidate: PythonCandidate, problem: string): PythonUnavailable =>
  new PythonUnavailable({
    reason: "failed-to-run",
    detail: `${candidate.executable} (picked by ${ruleLabel(candidate.rule)}) does not run: ${problem}`,
    tried: [],
    fix: candidate.rule === "PATH" || candidate.rule === "setting"
      ? `repair that interpreter, ${FIX_INSTALL}, or ${FIX_SETTING}; ${FIX_CHECK}`
      : `repair or recreate that environment, or ${FIX_SETTING}; ${FIX_CHECK}`
  })

const tooOld = (candidate: PythonCandidate, version: PythonVersion): PythonUnavailable =>
  new PythonUnavailable({
    reason: "too-old",
    detail: `${candidate.executable} (picked by ${ruleLabel(candidate.rule)}) is Python ${
      formatPythonVersion(version)
    }, and Python ${MIN_PYTHON_VERSION.major}.${MIN_PYTHON_VERSION.minor} or newer is required`,
    tried: [],
    fix: `${FIX_INSTALL}, or ${FIX_SETTING}; ${FIX_CHECK}`
  })

class InspectKey extends Data.Class<{
  readonly executable: string
  readonly cwd: string
  readonly venvBin: string | undefined
}> {}

/** Builds the service from explicit dependencies (tests inject a fake probe or inspector). */
export const makePythonRuntime = (
  options: PythonRuntimeOptions
): Effect.Effect<PythonRuntimeService> =>
  Effect.gen(function*() {
    const kernelEnv: PythonRuntimeService["kernelEnv"] = (interpreter, extra = {}) =>
      runnerEnv(options.env, {
        binDir: interpreter.venvBin,
        fixed: PYTHON_FIXED_ENV,
        artifactsDir: extra.artifactsDir,
        extra: extra.extra,
        platform: options.platform
      })
    const inspections = yield* Cache.make({
      capacity: 256,
      lookup: (key: InspectKey) =>
        options.inspect({ executable: key.executable, cwd: key.cwd, env: kernelEnv({ venvBin: key.venvBin }) }),
      timeToLive: Duration.infinity
    })
    const inspect = (key: InspectKey) => Cache.get(inspections, key).pipe(Effect.tapError(() => Cache.invalidate(inspections, key)))

    const resolveWith = Effect.fnUntraced(function*(
      cwd: string,
      settings: BackendSettings,
      runIt: (candidate: PythonCandidate) => boolean
    ): Effect.fn.Return<PythonInterpreter, PythonUnavailable> {
      const candidate = yield* Effect.sync(() =>
        resolvePythonCandidate({
          interpreter: settings.interpreter,
          env: options.env,
          cwd,
          homeDir: options.homeDir,
          platform: options.platform,
          probe: options.probe
        })
      ).pipe(Effect.flatMap((found) => Effect.fromResult(Result.mapError(found, notFound))))
      const base = {
        foundAt: candidate.executable,
        rule: candidate.rule,
        ...(candidate.venvBin === undefined ? {} : { venvBin: candidate.venvBin }),
        skipped: candidate.skipped
      }
      if (settings.skipCheck || !runIt(candidate)) {
        return { ...base, executable: candidate.executable, version: undefined, checked: false }
      }
      const inspection = yield* inspect(new InspectKey({ executable: candidate.executable, cwd, venvBin: candidate.venvBin }))
        .pipe(Effect.mapError((error) => failedToRun(candidate, error.problem)))
      if (!isSupportedPythonVersion(inspection.version)) return yield* tooOld(candidate, inspection.version)
      const real = inspection.executable !== candidate.executable && options.probe.isExecutable(inspection.executable)
        ? inspection.executable
        : candidate.executable
      return { ...base, executable: real, version: inspection.version, checked: true }
    })

    return {
      resolve: (cwd, settings) => resolveWith(cwd, settings, () => true),
      locate: (cwd, settings) => resolveWith(cwd, settings, (candidate) => isScript(candidate.executable)),
      kernelEnv
    }
  })

/** How long the one-off check may take (a cold pyenv shim is slow, but not this slow). */
export const INSPECT_TIMEOUT: Duration.Input = Duration.seconds(15)

/** Resolves and checks the Python interpreter kernels run. */
export class PythonRuntime extends Context.Service<PythonRuntime, PythonRuntimeService>()("veyyon-eval/PythonRuntime") {
  /** The service with explicit dependencies. */
  static layer(options: PythonRuntimeOptions): Layer.Layer<PythonRuntime> {
    return Layer.effect(PythonRuntime, makePythonRuntime(options))
  }

  /** Always answers with `answer` (an interpreter or the error), for tests of the runtime's users. */
  static fixed(answer: PythonInterpreter | PythonUnavailable, hostEnv: EnvRecord = {}): Layer.Layer<PythonRuntime> {
    const resolve = () => (answer instanceof PythonUnavailable ? Effect.fail(answer) : Effect.succeed(answer))
    return Layer.succeed(PythonRuntime, {
      resolve,
      locate: resolve,
      kernelEnv: (interpreter, extra = {}) =>
        runnerEnv(hostEnv, { binDir: interpreter.venvBin, fixed: PYTHON_FIXED_ENV, artifactsDir: extra.artifactsDir, extra: extra.extra })
    })
  }

  /** The service over this process's env, home dir, platform, disk and child processes. */
  static readonly Live: Layer.Layer<PythonRuntime> = Layer.effect(
    PythonRuntime,
    Effect.suspend(() =>
      makePythonRuntime({
        env: process.env,
        homeDir: os.homedir(),
        platform: process.platform,
        probe: nodeFileProbe(),
        inspect: commandInspector(INSPECT_TIMEOUT)
      })
    )
  )
}
