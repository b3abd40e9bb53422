/**
 * Room `config`: the settings every service reads (this module), the one reader of the
 * settings object and of every variable that sets something (`ConfigSources`, through
 * Effect's `Config`), and the spellings a value may take (`Spellings`, `Flags`). It uses
 * the backends' declarations, storage's state directory and isolation's sandbox section;
 * nothing above.
 *
 * Settings for the eval backends, built from a partial object and/or `VEYYON_*` env, each
 * one a `Config` read over the variables, then the object (see `ConfigSources`).
 *
 * Precedence: environment variable, then the object, then the default. Each variable
 * overrides only its own setting; an empty or blank value counts as unset; a value
 * that cannot be read fails the layer with `InvalidSettings` rather than being guessed.
 *
 *   VEYYON_<ID> (VEYYON_PY, VEYYON_JS, ...)      eval.<id> for every registered backend
 *                                                (1/0, true/false, yes/no, on/off)
 *   a backend's interpreter variable             kernel.backends.<id>.interpreter
 *                                                (VEYYON_PYTHON_INTERPRETER, VEYYON_RUBY_INTERPRETER)
 *   a backend's skip-check variable              kernel.backends.<id>.skipCheck (boolean as above;
 *                                                VEYYON_PYTHON_SKIP_CHECK)
 *   VEYYON_KERNEL_MODE                           kernel.mode: session | per-call
 *   VEYYON_KERNEL_SPARES                         kernel.spares: spare kernels per backend (0 = off)
 *   VEYYON_PYTHON_KERNEL_MODE                    the same (its older name)
 *   VEYYON_IPC_TRACE                             kernel.traceFrames: log every runner frame
 *                                                (VEYYON_PYTHON_IPC_TRACE: its older name)
 *   VEYYON_ARTIFACTS_DIR                         artifactsDir (made absolute)
 *   VEYYON_ARTIFACTS_MAX_MB                      artifacts.maxSessionMb (positive integer)
 *   VEYYON_ARTIFACTS_MAX_AGE_HOURS               artifacts.maxAgeHours (positive integer)
 *   VEYYON_SANDBOX, VEYYON_SANDBOX_NETWORK       sandbox.mode, sandbox.network (allow | none | allowlist)
 *   VEYYON_SANDBOX_ALLOW_HOSTS                   sandbox.allowHosts (for allowlist; see SandboxSettings)
 *   VEYYON_KERNEL_MEMORY_MB                      limits.memoryMb
 *   VEYYON_SESSION_SNAPSHOTS                     session.snapshots: every-cell | idle | off
 *   VEYYON_SNAPSHOT_BUDGET_MB                    session.snapshotBudgetMb (positive integer)
 *   VEYYON_SNAPSHOT_VALUE_BUDGET_MB              session.snapshotValueBudgetMb (positive integer)
 *   VEYYON_SNAPSHOT_MAX_AGE_DAYS                 session.snapshotMaxAgeDays (positive integer)
 *
 * `kernel.mode` and `kernel.idleTtlMs` govern every backend's kernels unless
 * `kernel.backends.<id>` overrides them for one. A backend's older settings section
 * (`python`: `interpreter`, `skipCheck`, and `kernelMode`/`idleTtlMs` as the older names of
 * `kernel.mode`/`kernel.idleTtlMs`) still works; the new names win.
 *
 * The default artifacts dir is `sessions` below the per-user state directory
 * (`$XDG_STATE_HOME/veyyon`, `~/.local/state/veyyon`, see `PrivateDir`): one directory per
 * session id below it, so a session keeps its kv and artifacts across host processes.
 */
import { Config, Context, Effect, Layer, Result, Schema, SchemaIssue } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import type { BackendSettings } from "../../backends/Backend.ts"
import { type BackendId, registeredBackends } from "../../backends/index.ts"
import type { EnvRecord } from "../isolation/EnvPolicy.ts"
import { userStateDir } from "../storage/PrivateDir.ts"
import {
  checkSandbox,
  type KernelLimits,
  LimitsInput,
  limitsConfig,
  limitsOf,
  SANDBOX_VARIABLES,
  SandboxInput,
  sandboxConfig,
  type SandboxSettings
} from "../isolation/SandboxSettings.ts"
import { fromSettings, hostVariables, InvalidSettings, optionalSetting, readConfig, setting, type SettingNames } from "./ConfigSources.ts"
import { FlagText, PositiveIntText, TrimmedText, WholeNumberText, WordText } from "./Spellings.ts"

/** One eval backend language: the id of a registered backend. */
export type EvalLanguage = BackendId

/** How kernels are retained: one per session key, or a fresh one per call. */
export const KernelMode = Schema.Literals(["session", "per-call"])

/** `"session"` or `"per-call"`. */
export type KernelMode = typeof KernelMode.Type

/** Idle time-to-live of a retained kernel nobody holds (10 minutes). */
export const DEFAULT_IDLE_TTL_MS = 10 * 60 * 1000
/** Bytes of output kept in one tool result (100 KiB). */
export const DEFAULT_OUTPUT_MAX_BYTES = 100 * 1024
/** Lines of output kept in one tool result. */
export const DEFAULT_OUTPUT_MAX_LINES = 2000
/** Megabytes of artifacts one session keeps; the oldest go first past it. */
export const DEFAULT_ARTIFACTS_MAX_SESSION_MB = 256
/** Hours an artifact is kept (7 days). */
export const DEFAULT_ARTIFACTS_MAX_AGE_HOURS = 7 * 24

/** When a session's namespace is saved: after every finished cell, once the session has been idle a moment, or never. */
export const SnapshotMode = Schema.Literals(["every-cell", "idle", "off"])

/** `"every-cell"`, `"idle"` or `"off"`. */
export type SnapshotMode = typeof SnapshotMode.Type

/** Megabytes one session's snapshot may hold (per language). */
export const DEFAULT_SNAPSHOT_BUDGET_MB = 256
/** Megabytes one value of a snapshot may take. */
export const DEFAULT_SNAPSHOT_VALUE_BUDGET_MB = 256
/** Days a snapshot is kept after its last save. */
export const DEFAULT_SNAPSHOT_MAX_AGE_DAYS = 7
/** Milliseconds a session stays idle before `idle` snapshots save it. */
export const SNAPSHOT_IDLE_MS = 2000

/** The resolved settings every service reads. */
export interface SettingsValues {
  /** `eval.<id>` for every registered backend, and `pyWorkspace`. */
  readonly eval: { readonly pyWorkspace: boolean; readonly [id: string]: boolean }
  readonly kernel: {
    readonly mode: KernelMode
    readonly idleTtlMs: number
    /** Spare kernels kept started per backend; undefined: each backend's own default. */
    readonly spares?: number | undefined
    /** Log every frame exchanged with each runner (`VEYYON_IPC_TRACE`). */
    readonly traceFrames: boolean
    /** Per-backend settings and overrides, by backend id (every registered backend has an entry). */
    readonly backends: Readonly<Record<string, BackendKernelSettings>>
  }
  readonly artifactsDir: string
  readonly artifacts: {
    readonly maxSessionMb: number
    readonly maxAgeHours: number
  }
  readonly output: {
    readonly maxBytes: number
    readonly maxLines: number
  }
  readonly sandbox: SandboxSettings
  readonly limits: KernelLimits
  /** Sessions that outlive their kernels: snapshots of the namespace and their budgets. */
  readonly session: {
    readonly snapshots: SnapshotMode
    readonly snapshotBudgetMb: number
    readonly snapshotValueBudgetMb: number
    readonly snapshotMaxAgeDays: number
  }
}

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))

const NonNegativeInt = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))

const NonEmptyTrimmedString = Schema.Trimmed.check(Schema.isNonEmpty())

const optional = Schema.optionalKey

/** What one backend may set for its own kernels. */
export const BackendKernelInput = Schema.Struct({
  mode: optional(KernelMode),
  idleTtlMs: optional(NonNegativeInt),
  spares: optional(NonNegativeInt),
  interpreter: optional(NonEmptyTrimmedString),
  skipCheck: optional(Schema.Boolean)
})

/** One backend's kernel overrides (`kernel.backends.<id>`). */
export type BackendKernelSettings = typeof BackendKernelInput.Type

/** Schema of the partial settings object an embedder (or a config file) supplies. */
export const SettingsInput = Schema.Struct({
  eval: optional(Schema.StructWithRest(
    Schema.Struct({ pyWorkspace: optional(Schema.Boolean) }),
    [Schema.Record(Schema.String, Schema.Boolean)]
  )),
  python: optional(Schema.Struct({
    kernelMode: optional(KernelMode),
    interpreter: optional(NonEmptyTrimmedString),
    idleTtlMs: optional(NonNegativeInt),
    skipCheck: optional(Schema.Boolean)
  })),
  kernel: optional(Schema.Struct({
    mode: optional(KernelMode),
    idleTtlMs: optional(NonNegativeInt),
    spares: optional(NonNegativeInt),
    backends: optional(Schema.Record(Schema.String, BackendKernelInput))
  })),
  artifactsDir: optional(NonEmptyTrimmedString),
  artifacts: optional(Schema.Struct({
    maxSessionMb: optional(PositiveInt),
    maxAgeHours: optional(PositiveInt)
  })),
  output: optional(Schema.Struct({
    maxBytes: optional(PositiveInt),
    maxLines: optional(PositiveInt)
  })),
  sandbox: optional(SandboxInput),
  limits: optional(LimitsInput),
  session: optional(Schema.Struct({
    snapshots: optional(SnapshotMode),
    snapshotBudgetMb: optional(PositiveInt),
    snapshotValueBudgetMb: optional(PositiveInt),
    snapshotMaxAgeDays: optional(PositiveInt)
  }))
}).annotate({ identifier: "a settings object" })

/** A partial settings object; every field may be left out. */
export type SettingsInput = typeof SettingsInput.Type

/** Settings that could not be read; says which source and what was wrong. */
export { InvalidSettings }

/** Process facts the defaults depend on, injectable for tests. */
export interface SettingsContext {
  readonly tmpdir: string
  readonly cwd: string
  /** The user's home directory, when there is one. */
  readonly home: string | undefined
  readonly uid: number
}

/** The facts of the running process. */
export const processSettingsContext = (): SettingsContext => {
  let home: string | undefined
  try {
    home = os.homedir() || undefined
  } catch {
    home = undefined
  }
  return { tmpdir: os.tmpdir(), cwd: process.cwd(), home, uid: typeof process.getuid === "function" ? process.getuid() : 0 }
}

/** The default artifacts root: `sessions` below the per-user state directory (XDG variables read from `env`). */
export const defaultArtifactsDir = (context: SettingsContext, env: EnvRecord = {}): string =>
  path.join(userStateDir({ env, home: context.home, tmpdir: context.tmpdir, uid: context.uid }), "sessions")

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const describeSchemaError = (error: Schema.SchemaError): string =>
  formatIssues(error.issue).issues
    .map((issue) => (issue.path === undefined || issue.path.length === 0 ? issue.message : `${issue.path.map((segment) => String(typeof segment === "object" ? segment.key : segment)).join(".")}: ${issue.message}`))
    .join("; ")

const decodeSettings = Schema.decodeUnknownResult(SettingsInput, { onExcessProperty: "error", reportInput: true })

/** Validates an untyped settings object (for example parsed from a config file). */
export const decodeSettingsInput = (input: unknown): Result.Result<SettingsInput, InvalidSettings> =>
  Result.mapError(
    decodeSettings(input),
    (error) => new InvalidSettings({ source: "settings object", problem: describeSchemaError(error) })
  )

type Backends = ReturnType<typeof registeredBackends>

/** The variables and older object keys of every setting that has them, by dotted path. */
const settingNames = (backends: Backends): ReadonlyMap<string, SettingNames> => {
  const older = backends.flatMap((backend) => backend.olderSection === undefined ? [] : [backend.olderSection])
  const names = new Map<string, SettingNames>([
    ["kernel.mode", { variables: ["VEYYON_KERNEL_MODE", "VEYYON_PYTHON_KERNEL_MODE"], olderKeys: older.map((section) => [section, "kernelMode"]) }],
    ["kernel.idleTtlMs", { variables: [], olderKeys: older.map((section) => [section, "idleTtlMs"]) }],
    ["kernel.spares", { variables: ["VEYYON_KERNEL_SPARES"], olderKeys: [] }],
    ["kernel.traceFrames", { variables: ["VEYYON_IPC_TRACE", "VEYYON_PYTHON_IPC_TRACE"], olderKeys: [] }],
    ["artifactsDir", { variables: ["VEYYON_ARTIFACTS_DIR"], olderKeys: [] }],
    ["artifacts.maxSessionMb", { variables: ["VEYYON_ARTIFACTS_MAX_MB"], olderKeys: [] }],
    ["artifacts.maxAgeHours", { variables: ["VEYYON_ARTIFACTS_MAX_AGE_HOURS"], olderKeys: [] }],
    ["session.snapshots", { variables: ["VEYYON_SESSION_SNAPSHOTS"], olderKeys: [] }],
    ["session.snapshotBudgetMb", { variables: ["VEYYON_SNAPSHOT_BUDGET_MB"], olderKeys: [] }],
    ["session.snapshotValueBudgetMb", { variables: ["VEYYON_SNAPSHOT_VALUE_BUDGET_MB"], olderKeys: [] }],
    ["session.snapshotMaxAgeDays", { variables: ["VEYYON_SNAPSHOT_MAX_AGE_DAYS"], olderKeys: [] }],
    ...Object.entries(SANDBOX_VARIABLES).map(([path, variables]): [string, SettingNames] => [path, { variables, olderKeys: [] }])
  ])
  for (const backend of backends) {
    const own = `kernel.backends.${backend.id}`
    const olderKey = (key: string) => backend.olderSection === undefined ? [] : [[backend.olderSection, key]]
    names.set(`eval.${backend.id}`, { variables: [`VEYYON_${backend.id.toUpperCase()}`], olderKeys: [] })
    names.set(`${own}.interpreter`, { variables: backend.interpreterEnv === undefined ? [] : [backend.interpreterEnv], olderKeys: olderKey("interpreter") })
    names.set(`${own}.skipCheck`, { variables: backend.skipCheckEnv === undefined ? [] : [backend.skipCheckEnv], olderKeys: olderKey("skipCheck") })
    names.set(`${own}.spares`, { variables: ["VEYYON_KERNEL_SPARES"], olderKeys: [] })
  }
  return names
}

const KernelModeText = WordText(
  KernelMode.literals,
  (trimmed) => `${JSON.stringify(trimmed)} is not a kernel mode; use "session" or "per-call", or unset it.`
)

const SnapshotModeText = WordText(
  SnapshotMode.literals,
  (trimmed) => `${JSON.stringify(trimmed)} is not a snapshot mode; use "every-cell", "idle" or "off", or unset it.`
)

const definedOnly = <A extends object>(record: A): { [K in keyof A]?: Exclude<A[K], undefined> } =>
  Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined)) as { [K in keyof A]?: Exclude<A[K], undefined> }

/** One backend's own kernel settings (`kernel.backends.<id>`), the keys no source holds left out. */
const backendKernelConfig = (id: string): Config.Config<BackendKernelSettings> =>
  Config.map(
    Config.all({
      mode: optionalSetting(KernelModeText, `kernel.backends.${id}.mode`),
      idleTtlMs: optionalSetting(WholeNumberText, `kernel.backends.${id}.idleTtlMs`),
      spares: optionalSetting(WholeNumberText, `kernel.backends.${id}.spares`),
      interpreter: optionalSetting(TrimmedText, `kernel.backends.${id}.interpreter`),
      skipCheck: optionalSetting(FlagText, `kernel.backends.${id}.skipCheck`)
    }),
    definedOnly
  )

const byBackend = <A>(backends: Backends, config: (backend: Backends[number]) => Config.Config<A>): Config.Config<Record<string, A>> =>
  Config.all(Object.fromEntries(backends.map((backend) => [backend.id, config(backend)])))

/** Every setting, each from its variables, else the object, else its default (the artifacts dir and the sandbox's checks come after). */
const settingsConfig = (backends: Backends) =>
  Config.all({
    eval: byBackend(backends, (backend) => setting(FlagText, `eval.${backend.id}`).pipe(Config.withDefault(backend.enabledByDefault))),
    pyWorkspace: setting(FlagText, "eval.pyWorkspace").pipe(Config.withDefault(false)),
    kernel: Config.all({
      mode: setting(KernelModeText, "kernel.mode").pipe(Config.withDefault("session" as const)),
      idleTtlMs: setting(WholeNumberText, "kernel.idleTtlMs").pipe(Config.withDefault(DEFAULT_IDLE_TTL_MS)),
      spares: optionalSetting(WholeNumberText, "kernel.spares"),
      traceFrames: setting(FlagText, "kernel.traceFrames").pipe(Config.withDefault(false)),
      backends: byBackend(backends, (backend) => backendKernelConfig(backend.id))
    }),
    artifactsDir: optionalSetting(TrimmedText, "artifactsDir"),
    artifacts: Config.all({
      maxSessionMb: setting(PositiveIntText, "artifacts.maxSessionMb").pipe(Config.withDefault(DEFAULT_ARTIFACTS_MAX_SESSION_MB)),
      maxAgeHours: setting(PositiveIntText, "artifacts.maxAgeHours").pipe(Config.withDefault(DEFAULT_ARTIFACTS_MAX_AGE_HOURS))
    }),
    output: Config.all({
      maxBytes: setting(PositiveIntText, "output.maxBytes").pipe(Config.withDefault(DEFAULT_OUTPUT_MAX_BYTES)),
      maxLines: setting(PositiveIntText, "output.maxLines").pipe(Config.withDefault(DEFAULT_OUTPUT_MAX_LINES))
    }),
    sandbox: sandboxConfig,
    limits: limitsConfig,
    session: Config.all({
      snapshots: setting(SnapshotModeText, "session.snapshots").pipe(Config.withDefault("every-cell" as const)),
      snapshotBudgetMb: setting(PositiveIntText, "session.snapshotBudgetMb").pipe(Config.withDefault(DEFAULT_SNAPSHOT_BUDGET_MB)),
      snapshotValueBudgetMb: setting(PositiveIntText, "session.snapshotValueBudgetMb").pipe(Config.withDefault(DEFAULT_SNAPSHOT_VALUE_BUDGET_MB)),
      snapshotMaxAgeDays: setting(PositiveIntText, "session.snapshotMaxAgeDays").pipe(Config.withDefault(DEFAULT_SNAPSHOT_MAX_AGE_DAYS))
    })
  })

/**
 * Combines defaults, the object and the environment into complete settings: the object
 * is validated, then every setting is read through `settingsConfig` over its variables
 * in `env`, then the object.
 */
export const resolveSettings = (
  input: unknown,
  env: EnvRecord,
  context: SettingsContext
): Result.Result<SettingsValues, InvalidSettings> =>
  Result.gen(function*() {
    const given = yield* decodeSettingsInput(input)
    const backends = registeredBackends()
    const known = backends.map((backend) => backend.id as string)
    const unknown = [
      ...Object.keys(given.eval ?? {}).filter((id) => id !== "pyWorkspace").map((id) => `eval.${id}`),
      ...Object.keys(given.kernel?.backends ?? {}).map((id) => `kernel.backends.${id}`)
    ].filter((name) => !known.includes(name.slice(name.lastIndexOf(".") + 1)))
    if (unknown.length > 0) {
      return yield* Result.fail(new InvalidSettings({
        source: "settings object",
        problem: `${unknown.join(", ")}: no such backend; the backends are ${known.join(", ")}`
      }))
    }
    const names = settingNames(backends)
    const source = fromSettings(env, given, (path) => names.get(path))
    const read = yield* readConfig(settingsConfig(backends), source)
    const sandbox = yield* Result.mapError(
      checkSandbox(read.sandbox, source.variableAt(["sandbox", "allowHosts"]) ?? "sandbox.allowHosts"),
      (problem) => new InvalidSettings(problem)
    )
    return {
      eval: { ...read.eval, pyWorkspace: read.pyWorkspace },
      kernel: read.kernel,
      artifactsDir: read.artifactsDir === undefined
        ? defaultArtifactsDir(context, env)
        : path.resolve(context.cwd, read.artifactsDir),
      artifacts: read.artifacts,
      output: read.output,
      sandbox,
      limits: limitsOf(read.limits),
      session: read.session
    }
  })

/** The ids of the enabled backends, in registration order. */
export const enabledLanguages = (settings: SettingsValues): ReadonlyArray<EvalLanguage> =>
  registeredBackends().filter((backend) => settings.eval[backend.id] === true).map((backend) => backend.id)

/** How kernels of backend `id` are retained: its override, else `kernel.mode`. */
export const kernelModeOf = (settings: SettingsValues, id: string): KernelMode =>
  settings.kernel.backends[id]?.mode ?? settings.kernel.mode

/** The idle time-to-live of backend `id`'s kernels: its override, else `kernel.idleTtlMs`. */
export const idleTtlMsOf = (settings: SettingsValues, id: string): number =>
  settings.kernel.backends[id]?.idleTtlMs ?? settings.kernel.idleTtlMs

/**
 * How many spare kernels backend `id` keeps started: `VEYYON_KERNEL_SPARES` (for every
 * backend), else its `kernel.backends.<id>.spares`, else `kernel.spares`, else `fallback` (the backend's default).
 */
export const sparesOf = (settings: SettingsValues, id: string, fallback: number): number =>
  settings.kernel.backends[id]?.spares ?? settings.kernel.spares ?? fallback

/** Backend `id`'s own settings, as its runtime reads them. */
export const backendSettingsOf = (settings: SettingsValues, id: string): BackendSettings => ({
  interpreter: settings.kernel.backends[id]?.interpreter,
  skipCheck: settings.kernel.backends[id]?.skipCheck ?? false
})

/** The settings service: resolved once when its layer is built. */
export class Settings extends Context.Service<Settings, SettingsValues>()("veyyon-eval/Settings") {
  /** Settings from the object alone; the environment is not consulted. */
  static layer(input: SettingsInput = {}): Layer.Layer<Settings, InvalidSettings> {
    return Layer.effect(
      Settings,
      Effect.suspend(() => Effect.fromResult(resolveSettings(input, {}, processSettingsContext())))
    )
  }

  /** Settings from the object with `VEYYON_*` variables of `env` (the process env by default) on top. */
  static fromEnv(input: SettingsInput = {}, env?: EnvRecord): Layer.Layer<Settings, InvalidSettings> {
    return Layer.effect(
      Settings,
      Effect.suspend(() => Effect.fromResult(resolveSettings(input, env ?? hostVariables(), processSettingsContext())))
    )
  }

  /** Already resolved settings, e.g. for tests. */
  static value(values: SettingsValues): Layer.Layer<Settings> {
    return Layer.succeed(Settings, values)
  }
}
