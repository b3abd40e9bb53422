/**
 * Room `registry`: who runs kernels: this registry, its supervision of deaths, held leases
 * between cells and spare kernels. It uses the kernel, the backends, settings, storage,
 * isolation and output's artifact dirs; not the tool.
 *
 * Owns the kernels, keyed by backend, session, working directory and interpreter: each
 * registered backend (see `src/backends/`) resolves its own interpreter and says how its
 * kernels are launched, so a JavaScript kernel needs no Python and a Ruby kernel no Node
 * beyond this process. In a backend's `session`
 * mode kernels are reference-counted and retained (shut down after an idle time-to-live
 * nobody holds them); a kernel that dies is evicted the moment it dies (`KernelSupervisor`)
 * and replaced at the next cell, and a kernel that
 * dies during a cell is replaced and the cell retried once (the outcome says `retried`, with
 * a notice that side effects may have happened twice; a second death ends the cell with a
 * `KernelDied` error output and `kernelExit`, not a failure). In `per-call` mode every
 * request gets a fresh kernel that is shut down after it. The mode and the idle time-to-live
 * are `kernel.mode` and `kernel.idleTtlMs`, or the backend's own override.
 *
 * A cell that runs into one of its kernel's limits (`limits.memoryMb`, `limits.pids`) gets
 * an error naming the limit and its setting (see `LimitBreach`); after a full process table
 * the kernel is replaced, and a kernel that died of its memory limit is not run again.
 *
 * Kernels' `kv` calls are answered by the `KvStore` in context (the file store on the
 * session's directory when there is none); every other bridge call goes to the embedder's
 * `AgentBridge`.
 *
 * Unless `session.snapshots` is `off`, a session's state outlives its kernels: after each
 * cell the kernel is asked for a snapshot, kept by the `SnapshotStore` in context (the file
 * store below the artifacts directory when there is none), and a fresh kernel of a session
 * with one gets it restored before its first cell, whose outcome then carries the notice.
 * `reset: true` forgets it; `forget` forgets a whole session; the kernels ending keep it.
 *
 * A session's key (the real cwd and the interpreter resolved for it) is worked out at its
 * first cell and kept while its kernel lives, so a cell costs no filesystem probes; a
 * `reset: true`, a reset, or the kernel ending (idle, death) makes the next cell resolve
 * again, e.g. to pick up a `.venv` created meanwhile.
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Context, Data, Duration, Effect, Equal, Layer, Option, RcMap, Schema, type Scope, type Stream } from "effect"
import { type Completion, type Inspection, IntrospectionFailed } from "../../kernel/Introspection.ts"
import { type KernelClosed, type KernelDied, KernelStartError } from "../../kernel/KernelError.ts"
import { type CellOutcome, KernelOutput } from "../../kernel/KernelOutput.ts"
import { describeExit, KernelSpawner } from "../../kernel/KernelProcess.ts"
import { KernelTimings } from "../../kernel/KernelTimings.ts"
import * as Kernel from "../../kernel/Kernel.ts"
import { type BackendInterpreter, type BackendRuntime, isScript, type KernelBackend } from "../../backends/Backend.ts"
import { RuntimeUnavailable } from "../../backends/Backend.ts"
import { type BackendId, type BackendRuntimeError, type BackendsContext, defaultBackendId, registeredBackends } from "../../backends/index.ts"
import { AgentBridge, bridgeForSession } from "../../kernel/AgentBridge.ts"
import { sessionArtifactsDir } from "../output/ArtifactStore.ts"
import { KvStore, makeKvStore, withKvWrites } from "../storage/KvStore.ts"
import { type BreachedLimit, breachNotice, breachOfDeath, explainBreach, limitSentence } from "../isolation/LimitBreach.ts"
import * as KernelSupervisor from "./KernelSupervisor.ts"
import * as RcMapHolds from "./RcMapHolds.ts"
import { ensurePrivateDir } from "../storage/PrivateDir.ts"
import { RunnerCache, type RunnerCacheError, RunnerSourceMissing } from "../storage/RunnerCache.ts"
import { type LimitsUnavailable, makeSandbox, Sandbox, type SandboxUnavailable } from "../isolation/Sandbox.ts"
import { backendSettingsOf, idleTtlMsOf, kernelModeOf, Settings, sparesOf } from "../config/Settings.ts"
import * as SparePool from "./SparePool.ts"
import { EgressResolver, systemResolver } from "../isolation/egress/EgressResolver.ts"
import { makeFileSnapshotStore, snapshotsRoot } from "../snapshots/FileSnapshotStore.ts"
import { makeSessionSnapshots, type SessionSnapshots, type SnapshotPlace } from "../snapshots/SessionSnapshots.ts"
import { SnapshotStore } from "../snapshots/SnapshotStore.ts"
import { startKernelEgress } from "../isolation/egress/KernelEgress.ts"

/** Identifies one retained kernel. */
export class KernelKey extends Data.Class<{
  readonly language: BackendId
  readonly sessionId: string
  readonly cwd: string
  readonly interpreter: string
  readonly binDir: string | undefined
}> {
  /** A readable form for logs and spans. */
  get label(): string {
    return `${this.sessionId}|${this.cwd}|${this.interpreter}`
  }

  /** Whether this key's kernel belongs to `sessionId` (and, when given, `cwd` and `language`). */
  matches(sessionId: string, cwd?: string, language?: BackendId): boolean {
    return this.sessionId === sessionId && (cwd === undefined || this.cwd === cwd) && (language === undefined || this.language === language)
  }
}

/** The working directory does not exist or is not a directory. */
export class InvalidCwd extends Schema.TaggedError<InvalidCwd>()("InvalidCwd", { cwd: Schema.String, problem: Schema.String }) {
  override get message(): string {
    return `cannot run a cell in ${this.cwd}: ${this.problem}. Pass an existing directory as cwd.`
  }
}

/** What a registry request can fail with. */
export type RegistryError =
  | InvalidCwd
  | BackendRuntimeError
  | RunnerCacheError
  | KernelStartError
  | SandboxUnavailable
  | LimitsUnavailable
  | KernelDied
  | KernelClosed

/** One cell for the registry: where, for whom, and what. */
export interface RegistryRequest extends Kernel.ExecuteRequest {
  /** Default `py`. */
  readonly language?: BackendId
  readonly sessionId: string
  readonly cwd: string
  /** Replace this session's kernel for `cwd` before running. */
  readonly reset?: boolean
}

/** Whose kernel a completion or inspection asks: the one cells of this session, cwd and language run in. */
export interface KernelPlace {
  /** Default `py`. */
  readonly language?: BackendId
  readonly sessionId: string
  readonly cwd: string
}

/** The status op the registry emits when it replaces a kernel that died mid-cell and retries. */
export const RESTART_STATUS_OP = "kernel-restart"

/** The registry service. */
export interface KernelRegistryService {
  /** Runs one cell in the kernel for the request's session, cwd and interpreter, handing its outputs to `onOutput`. */
  readonly run: (request: RegistryRequest, onOutput: Kernel.OutputHandler) => Effect.Effect<CellOutcome, RegistryError>
  /** `run` as a stream of outputs ending with `Done`. */
  readonly execute: (request: RegistryRequest) => Stream.Stream<KernelOutput, RegistryError>
  /** Completions at `cursor` (UTF-16 offset, default the end) of `code`, from the place's kernel (started if need be). */
  readonly complete: (
    place: KernelPlace,
    code: string,
    cursor?: number
  ) => Effect.Effect<Completion, RegistryError | IntrospectionFailed>
  /** IPython's `obj?` (detail 1: `obj??`) for the name at `cursor`, from the place's kernel. */
  readonly inspect: (
    place: KernelPlace,
    code: string,
    cursor?: number,
    detailLevel?: 0 | 1
  ) => Effect.Effect<Inspection, RegistryError | IntrospectionFailed>
  /** Shuts down every kernel of a session (optionally only those for `cwd`, and of `language`); the next cell starts fresh. */
  readonly reset: (sessionId: string, cwd?: string, language?: BackendId) => Effect.Effect<void>
  /** Shuts down a session's kernels and forgets its saved state (its snapshots), as `reset: true` does for one language. */
  readonly forget: (sessionId: string) => Effect.Effect<void>
  /** Shuts down every kernel now (once the snapshots under way are saved). */
  readonly shutdownAll: Effect.Effect<void>
  /** The keys of the kernels alive or starting. */
  readonly keys: Effect.Effect<ReadonlyArray<KernelKey>>
  /** The process ids of the spare kernels ready now (no session's; for diagnostics and tests). */
  readonly sparePids: Effect.Effect<ReadonlyArray<number>>
  /** The process ids of a session's started kernels, with their languages (for diagnostics: the viewer's memory figure). */
  readonly sessionPids: (sessionId: string) => Effect.Effect<ReadonlyArray<{ readonly language: BackendId; readonly pid: number }>>
  /**
   * Starts filling the spare pool a new session at `place` would take from, so even the
   * first session's first cell finds a spare; returns at once. Nothing happens when that
   * backend keeps no spares; a failure (no interpreter, say) is left for the first cell to report.
   */
  readonly prepareSpares: (place: Omit<KernelPlace, "sessionId">) => Effect.Effect<void>
}

/** The installation an interpreter runs from (`<prefix>/bin/<exe>`), for binding it into a sandbox. */
export const interpreterPrefix = (executable: string): string => {
  try {
    return NodePath.dirname(NodePath.dirname(NodeFs.realpathSync(executable)))
  } catch {
    return NodePath.dirname(NodePath.dirname(executable))
  }
}

/** Resolves a cwd to its real path, checking that it is a directory. */
export const normalizeCwd = (cwd: string): Effect.Effect<string, InvalidCwd> =>
  Effect.try({
    try: () => {
      const real = NodeFs.realpathSync(NodePath.resolve(cwd))
      if (!NodeFs.statSync(real).isDirectory()) throw new Error("it is not a directory")
      return real
    },
    catch: (error) =>
      new InvalidCwd({
        cwd,
        problem: (error as NodeJS.ErrnoException).code === "ENOENT"
          ? "it does not exist"
          : (error as Error).message
      })
  })

/** The notice of a cell that ran twice because its kernel died during the first attempt. */
export const retriedNotice = (died: KernelDied, snapshots = false): string =>
  `the kernel died during this cell (${describeExit(died.exit)}) and the cell ran again in a fresh kernel: ` +
  `its side effects (files written, requests sent) may have happened twice, and earlier state is gone${snapshots ? " except what the session's snapshot restored" : ""}. ` +
  `Output before the kernel-restart line is from the first attempt.`

const joinNotices = (first: string, second: string | undefined): string =>
  second === undefined ? first : `${first}\n${second}`

const STDERR_LINES_KEPT = 20

/** The error output of a kernel death: the exit (and the limit it ran into, when known), and its last stderr lines as the traceback. */
const diedError = (died: KernelDied, limit?: string): KernelOutput =>
  KernelOutput.Error({
    ename: "KernelDied",
    evalue: `the kernel exited unexpectedly (${describeExit(died.exit)})${limit === undefined ? "" : `: ${limit}`}`,
    traceback: [
      ...died.stderr.trimEnd().split("\n").filter((line) => line.length > 0).slice(-STDERR_LINES_KEPT),
      ...(limit === undefined ? [] : [limit])
    ]
  })

const diedTwiceOutcome = (first: KernelDied, second: KernelDied): CellOutcome => ({
  status: "error",
  executionCount: 0,
  cancelled: false,
  timedOut: false,
  killed: false,
  retried: true,
  kernelExit: second.exit,
  notice: `the kernel died during this cell twice (${describeExit(first.exit)}, then ${describeExit(second.exit)}); ` +
    `the cell ran twice, so its side effects may have happened twice. The next call starts a fresh kernel.`
})

/** The registered backends' search-path variables, whose relative or empty entries an interpreter resolves against its start directory. */
const searchPathVars = (): ReadonlyArray<string> => registeredBackends().flatMap((backend) => backend.searchPathEnv ?? [])

/** Whether a spawn env has a search path that depends on the directory the process starts in (such kernels get no spares). */
export const hasCwdRelativeSearchPath = (env: Readonly<Record<string, string>>, names: ReadonlyArray<string> = searchPathVars()): boolean =>
  names.some((name) => {
    const value = env[name]
    return value !== undefined && value.split(NodePath.delimiter).some((entry) => !NodePath.isAbsolute(entry))
  })

/** The entries of a backend's kernel env that depend on the session (they differ between two artifacts dirs). */
const sessionEnvNames = (runtime: BackendRuntime<BackendRuntimeError>, interpreter: BackendInterpreter): ReadonlyArray<string> => {
  const one = runtime.env(interpreter, { artifactsDir: "/veyyon-session-a" })
  const two = runtime.env(interpreter, { artifactsDir: "/veyyon-session-b" })
  return [...new Set([...Object.keys(one), ...Object.keys(two)])].filter((name) => one[name] !== two[name])
}

/** What a spare's taker needs to bind it: the env entries it was spawned without. */
interface SpareMeta {
  readonly sessionEnv: ReadonlyArray<string>
}

/**
 * A kernel's environment split in two: what it is spawned with (nothing of the session's)
 * and what the init request applies (the session's entries and `PWD`). Fresh kernels and
 * spares are bound alike, so a cell sees the same `os.environ` and `/proc/self/environ`
 * whichever it runs in.
 */
export const splitKernelEnv = (
  env: Readonly<Record<string, string>>,
  sessionEnv: ReadonlyArray<string>,
  cwd: string
): { readonly spawnEnv: Record<string, string>; readonly initEnv: Record<string, string> } => {
  const spawnEnv = { ...env }
  const initEnv: Record<string, string> = {}
  for (const name of sessionEnv) {
    if (spawnEnv[name] !== undefined) initEnv[name] = spawnEnv[name]
    delete spawnEnv[name]
  }
  initEnv.PWD = cwd
  return { spawnEnv, initEnv }
}

/** The session snapshots of the registry: none when `session.snapshots` is `off`, or when their store cannot be opened (said in a warning). */
const sessionSnapshotsOf = (settings: Settings["Service"]): Effect.Effect<SessionSnapshots | undefined, never, Scope.Scope> =>
  Effect.gen(function*() {
    const mode = settings.session.snapshots
    if (mode === "off") return undefined
    const given = yield* Effect.serviceOption(SnapshotStore)
    const store = Option.isSome(given)
      ? given.value
      : yield* makeFileSnapshotStore(snapshotsRoot(settings.artifactsDir), settings.session.snapshotMaxAgeDays * 24 * 60 * 60 * 1000).pipe(
        Effect.catch((error) => Effect.as(Effect.logWarning(`session snapshots are off: ${error.message}`), undefined))
      )
    if (store === undefined) return undefined
    return yield* makeSessionSnapshots(store, {
      mode,
      budgetMb: settings.session.snapshotBudgetMb,
      valueBudgetMb: settings.session.snapshotValueBudgetMb
    })
  })

const makeRegistry = Effect.gen(function*() {
  const settings = yield* Settings
  const runners = yield* RunnerCache
  const spawner = yield* KernelSpawner
  const bridge = yield* AgentBridge
  const timings = yield* KernelTimings
  const kv = yield* Effect.map(Effect.serviceOption(KvStore), Option.getOrElse(makeKvStore))
  const sandbox = yield* Effect.flatMap(
    Effect.serviceOption(Sandbox),
    Option.match({ onNone: () => makeSandbox(settings.sandbox, settings.limits), onSome: Effect.succeed })
  )
  const resolver = Option.getOrElse(yield* Effect.serviceOption(EgressResolver), () => systemResolver)
  const snapshots = yield* sessionSnapshotsOf(settings)

  const backends = new Map<string, { readonly backend: KernelBackend<string, BackendsContext, BackendRuntimeError>; readonly runtime: BackendRuntime<BackendRuntimeError> }>()
  for (const backend of registeredBackends()) {
    backends.set(backend.id, { backend, runtime: yield* backend.runtime(backendSettingsOf(settings, backend.id)) })
  }
  const backendFor = (id: string) => {
    const found = backends.get(id)
    return found === undefined
      ? Effect.fail(new RuntimeUnavailable({ language: id, detail: `no backend ${JSON.stringify(id)} is registered`, fix: `use one of ${[...backends.keys()].join(", ")}` }))
      : Effect.succeed(found)
  }

  const knownKeys = new Map<string, KernelKey>()
  const startedKernels = new WeakMap<KernelKey, Kernel.Kernel>()
  const forgetKey = (key: KernelKey) =>
    Effect.sync(() => {
      for (const [request, known] of knownKeys) if (Equal.equals(known, key)) knownKeys.delete(request)
    })

  const spares = yield* SparePool.make<SpareMeta>()
  const refillDue = new Map<string, SparePool.PoolSpec<SpareMeta>>()
  const trace = settings.kernel.traceFrames

  const sessionEnvByInterpreter = new Map<string, ReadonlyArray<string>>()
  const sessionEnvOf = (language: string, runtime: BackendRuntime<BackendRuntimeError>, interpreter: BackendInterpreter) => {
    const id = `${language}\u0000${interpreter.executable}\u0000${interpreter.binDir ?? ""}`
    let names = sessionEnvByInterpreter.get(id)
    if (names === undefined) sessionEnvByInterpreter.set(id, names = sessionEnvNames(runtime, interpreter))
    return names
  }

  const poolIdOf = (key: KernelKey) => `${key.language}\u0000${key.interpreter}\u0000${key.binDir ?? ""}`

  const sparesFor = (key: KernelKey): number => {
    const found = backends.get(key.language)
    return found === undefined || perCall(key.language) ? 0 : sparesOf(settings, key.language, found.backend.defaultSpares ?? 0)
  }

  /** Spawns a spare for `key`'s pool, unsandboxed only (the sandbox binds the cwd at start); undefined when its kernels cannot have spares. */
  const spawnSpare = Effect.fnUntraced(function*(key: KernelKey): Effect.fn.Return<SparePool.SpawnedSpare<SpareMeta> | undefined, RegistryError, Scope.Scope> {
    const { backend, runtime } = yield* backendFor(key.language)
    if (backend.runner === undefined || backend.launch === undefined || isScript(key.interpreter)) return undefined
    const runner = yield* runners.ensure(backend.runner.folder)
    const interpreter: BackendInterpreter = { executable: key.interpreter, binDir: key.binDir }
    const confinement = yield* sandbox.confine({
      memoryLimit: backend.memoryLimit,
      readOnly: [interpreterPrefix(key.interpreter), ...(key.binDir === undefined ? [] : [NodePath.dirname(key.binDir)]), runner.dir],
      readWrite: []
    })
    if (confinement.sandboxed) return undefined
    const sessionEnv = sessionEnvOf(key.language, runtime, interpreter)
    const env = splitKernelEnv({ ...runtime.env(interpreter, { artifactsDir: settings.artifactsDir }), ...kv.kernelEnv }, sessionEnv, runner.dir).spawnEnv
    if (hasCwdRelativeSearchPath(env)) return undefined
    const launch = backend.launch(interpreter, runner)
    const pending = yield* Kernel.spawn({
      command: launch.command,
      args: launch.args,
      channel: launch.channel,
      ...(launch.prelude === undefined ? {} : { prelude: launch.prelude }),
      cwd: runner.dir,
      env,
      key: `spare|${key.interpreter}`,
      skipCheck: true,
      trace
    }).pipe(
      Effect.provideService(KernelSpawner, { spawn: (spec) => spawner.spawn(confinement.apply(spec)) }),
      Effect.provideService(KernelTimings, timings)
    )
    return { pending, meta: { sessionEnv } }
  })

  /** Notes that `key`'s pool should be topped up after the current cell. */
  const wantSpares = (key: KernelKey) =>
    Effect.sync(() => {
      const size = sparesFor(key)
      const id = poolIdOf(key)
      if (size > 0 && !spares.disabled(id)) refillDue.set(id, { id, size, spawn: spawnSpare(key) })
    })

  const refill = Effect.suspend(() => {
    const due = [...refillDue.values()]
    refillDue.clear()
    return Effect.forEach(due, spares.fill, { discard: true })
  })

  /** `key`'s kernel from a spare of its pool, bound to the key's cwd and the session's env and bridge; undefined when none is ready or it fails to bind. */
  const kernelFromSpare = Effect.fnUntraced(function*(key: KernelKey, runtime: BackendRuntime<BackendRuntimeError>, artifactsDir: string, kernelBridge: AgentBridge["Service"]) {
    const taken = yield* spares.take(poolIdOf(key))
    if (Option.isNone(taken)) return undefined
    const { pending, meta, release } = taken.value
    yield* Effect.addFinalizer(() => release)
    const { initEnv } = splitKernelEnv(runtime.env({ executable: key.interpreter, binDir: key.binDir }, { artifactsDir }), meta.sessionEnv, key.cwd)
    return yield* pending.start({ cwd: key.cwd, initEnv, key: key.label }).pipe(
      Effect.provideService(AgentBridge, kernelBridge),
      Effect.catch((error) =>
        Effect.andThen(release, Effect.logDebug(`a spare kernel failed to start, starting a fresh one: ${error.message}`)).pipe(Effect.as(undefined)))
    )
  })

  /** Notes `kernel` as `key`'s started kernel, for the warm path's liveness check. */
  const started = (key: KernelKey, kernel: Kernel.Kernel): Kernel.Kernel => {
    startedKernels.set(key, kernel)
    return kernel
  }

  const startKernel = Effect.fnUntraced(function*(key: KernelKey, fromPool = false): Effect.fn.Return<Kernel.Kernel, RegistryError, Scope.Scope> {
    yield* Effect.addFinalizer(() => forgetKey(key))
    const artifactsDir = yield* ensurePrivateDir(sessionArtifactsDir(settings.artifactsDir, key.sessionId)).pipe(
      Effect.mapError((refused) => new KernelStartError({ reason: refused.message, stderr: "" }))
    )
    const kernelBridge = withKvWrites(bridgeForSession(bridge, key.sessionId), kv, kv.spaceOf(key.sessionId, artifactsDir))
    const { backend, runtime } = yield* backendFor(key.language)
    if (fromPool && sparesFor(key) > 0) {
      yield* wantSpares(key)
      const spare = yield* kernelFromSpare(key, runtime, artifactsDir, kernelBridge)
      if (spare !== undefined) return started(key, spare)
    }
    if (backend.runner === undefined || backend.launch === undefined) {
      return yield* new RuntimeUnavailable({ language: backend.id, detail: `the ${backend.displayName} backend ships no runner`, fix: "use another language" })
    }
    const runner = yield* runners.ensure(backend.runner.folder)
    if (!runner.sources.has(backend.runner.entry)) {
      return yield* new RunnerSourceMissing({ path: `runner/${backend.runner.folder}/${backend.runner.entry}`, reason: "the package's runner folder does not hold it" })
    }
    const interpreter: BackendInterpreter = { executable: key.interpreter, binDir: key.binDir }
    const egress = settings.sandbox.network === "allowlist" ? yield* startKernelEgress(settings.sandbox.allowHosts, resolver) : undefined
    const confinement = yield* sandbox.confine({
      memoryLimit: backend.memoryLimit,
      readOnly: [interpreterPrefix(key.interpreter), ...(key.binDir === undefined ? [] : [NodePath.dirname(key.binDir)]), runner.dir, artifactsDir],
      readWrite: [key.cwd],
      egressDir: egress?.socketDir
    })
    if (confinement.sandboxed && runtime.beforeSandboxedStart !== undefined) yield* runtime.beforeSandboxedStart(interpreter, runner)
    const launch = backend.launch(interpreter, runner)
    const { spawnEnv, initEnv } = splitKernelEnv(
      { ...runtime.env(interpreter, { artifactsDir }), ...kv.kernelEnv },
      sessionEnvOf(key.language, runtime, interpreter),
      key.cwd
    )
    const start = Kernel.make({
      command: launch.command,
      args: launch.args,
      channel: launch.channel,
      ...(launch.prelude === undefined ? {} : { prelude: launch.prelude }),
      cwd: key.cwd,
      env: spawnEnv,
      initEnv,
      key: key.label,
      skipCheck: true,
      trace,
      ...(egress === undefined ? {} : { notes: egress.notes })
    })
    const kernel = yield* start.pipe(
      Effect.provideService(KernelSpawner, { spawn: (spec) => spawner.spawn(confinement.apply(spec)) }),
      Effect.provideService(AgentBridge, kernelBridge),
      Effect.catchTag("KernelStartError", (failed) =>
        runtime.explainStartFailure === undefined
          ? Effect.fail(failed)
          : Effect.andThen(runtime.explainStartFailure(key.cwd), Effect.fail(failed)))
    )
    return started(key, kernel)
  }, Effect.provideService(KernelTimings, timings))

  const supervisor: KernelSupervisor.KernelSupervisor<KernelKey> = yield* KernelSupervisor.make<KernelKey>({
    invalidate: (key) => held.drop(key),
    label: (key) => key.label
  })
  const idleTtlMs = (key: KernelKey) => idleTtlMsOf(settings, key.language)
  const restoreNotices = new Map<string, string>()
  const placeOf = (key: KernelKey): SnapshotPlace => ({ sessionId: key.sessionId, language: key.language })
  const noticeId = (key: KernelKey) => `${key.language}\u0000${key.sessionId}`

  /** A fresh kernel for `key` with the session's snapshot restored, or an empty one when the restore failed as a whole. */
  const startRestored = (key: KernelKey): Effect.Effect<Kernel.Kernel, RegistryError, Scope.Scope> =>
    snapshots === undefined
      ? startKernel(key, true)
      : Effect.gen(function*() {
        const kernel = yield* startKernel(key, true)
        const { notice, replace } = yield* snapshots.restoreInto(placeOf(key), kernel)
        if (notice !== undefined) restoreNotices.set(noticeId(key), notice)
        if (!replace) return kernel
        yield* kernel.shutdown
        return yield* startKernel(key, false)
      })

  const kernels = yield* RcMap.make({
    lookup: (key: KernelKey) => Effect.tap(startRestored(key), (kernel) => supervisor.watch(key, kernel)),
    idleTimeToLive: (key: KernelKey) => Duration.millis(idleTtlMs(key))
  })
  const kernelKeys: Effect.Effect<ReadonlyArray<KernelKey>> = Effect.map(RcMap.keys(kernels), (keys) => Array.from(keys))
  const held = yield* RcMapHolds.make(kernels, {
    idleTtlMs,
    usable: (kernel) => kernel.isAlive
  })
  if (snapshots !== undefined) yield* Effect.addFinalizer(() => snapshots.drain)

  const resolveKey = Effect.fnUntraced(function*(request: RegistryRequest) {
    const cwd = yield* normalizeCwd(request.cwd)
    const language = request.language ?? defaultBackendId()
    const { runtime } = yield* backendFor(language)
    const interpreter = yield* runtime.resolve(cwd)
    return new KernelKey({ language, sessionId: request.sessionId, cwd, interpreter: interpreter.executable, binDir: interpreter.binDir })
  })

  const perCall = (language: string | undefined) => kernelModeOf(settings, language ?? defaultBackendId()) === "per-call"

  const keyFor = (request: RegistryRequest): Effect.Effect<KernelKey, InvalidCwd | BackendRuntimeError> =>
    Effect.suspend(() => {
      if (perCall(request.language)) return resolveKey(request)
      const id = `${request.language ?? defaultBackendId()}\u0000${request.sessionId}\u0000${request.cwd}`
      const fresh = () => Effect.tap(resolveKey(request), (key) => Effect.sync(() => knownKeys.set(id, key)))
      const known = request.reset === true ? undefined : knownKeys.get(id)
      if (known === undefined) return fresh()
      const kernel = startedKernels.get(known)
      return kernel === undefined ? Effect.succeed(known) : Effect.flatMap(kernel.isAlive, (alive) => (alive ? Effect.succeed(known) : fresh()))
    })

  /** The outcome with the notice of a restore made for this cell's kernel, if one is waiting. */
  const withRestoreNotice = (key: KernelKey, outcome: CellOutcome): CellOutcome => {
    if (restoreNotices.size === 0) return outcome
    const id = noticeId(key)
    const notice = restoreNotices.get(id)
    if (notice === undefined) return outcome
    restoreNotices.delete(id)
    return { ...outcome, notice: joinNotices(notice, outcome.notice) }
  }

  const attempt = snapshots === undefined
    ? (key: KernelKey, request: RegistryRequest, onOutput: Kernel.OutputHandler) => held.use(key, (kernel) => kernel.run(request, onOutput))
    : (key: KernelKey, request: RegistryRequest, onOutput: Kernel.OutputHandler) =>
      held.use(key, (kernel) => {
        const place = placeOf(key)
        snapshots.cellStarting(place)
        return Effect.tap(
          kernel.run(request, onOutput),
          (outcome) =>
            outcome.killed || request.silent === true
              ? Effect.void
              : snapshots.afterCell(place, kernel, { executionCount: outcome.executionCount, code: request.code })
        )
      })

  /**
   * Runs a cell watching for a breach of the kernel's limits: a breaching error output
   * names the limit and its setting; after a breach of `limits.pids` (the tree is full of
   * the cell's processes) the kernel is replaced and the outcome says so.
   */
  const watchLimits = (
    run: (onOutput: Kernel.OutputHandler) => Effect.Effect<CellOutcome, RegistryError>,
    replace: Effect.Effect<void>,
    onOutput: Kernel.OutputHandler
  ): Effect.Effect<CellOutcome, RegistryError> =>
    Effect.suspend(() => {
      let breach: BreachedLimit | undefined
      const watched: Kernel.OutputHandler = Object.assign((output: KernelOutput) => {
        const explained = explainBreach(output, settings.limits)
        breach ??= explained.breach
        return onOutput(explained.output)
      }, onOutput.now === undefined ? {} : { now: onOutput.now })
      return Effect.flatMap(run(watched), (outcome) => {
        if (breach === undefined) return Effect.succeed(outcome)
        const replaced = breach === "pids"
        const notice = breachNotice(breach, settings.limits, replaced)
        return Effect.as(replaced ? replace : Effect.void, { ...outcome, notice: joinNotices(notice, outcome.notice) })
      })
    })

  /** A kernel that died of its memory limit is replaced without running the cell again: it would die the same way. */
  const diedOfLimit = (died: KernelDied, replace: Effect.Effect<void>, onOutput: Kernel.OutputHandler, limit: BreachedLimit) =>
    Effect.andThen(
      replace,
      Effect.as(onOutput(diedError(died, limitSentence(limit, settings.limits))), {
        status: "error",
        executionCount: 0,
        cancelled: false,
        timedOut: false,
        killed: false,
        kernelExit: died.exit,
        notice: breachNotice(limit, settings.limits, true)
      } satisfies CellOutcome)
    )

  const retryOnceAfterDeath = (
    run: (onOutput: Kernel.OutputHandler) => Effect.Effect<CellOutcome, RegistryError>,
    replace: Effect.Effect<void>,
    onOutput: Kernel.OutputHandler
  ): Effect.Effect<CellOutcome, RegistryError> =>
    Effect.catchTag(watchLimits(run, replace, onOutput), "KernelDied", (first) => {
      const limit = breachOfDeath(first.stderr, settings.limits)
      if (limit !== undefined) return diedOfLimit(first, replace, onOutput, limit)
      return replace.pipe(
        Effect.andThen(onOutput(KernelOutput.Status({
          op: RESTART_STATUS_OP,
          fields: { reason: first.message, exit: describeExit(first.exit) }
        }))),
        Effect.andThen(watchLimits(run, replace, onOutput)),
        Effect.map((outcome): CellOutcome => ({ ...outcome, retried: true, notice: joinNotices(retriedNotice(first, snapshots !== undefined), outcome.notice) })),
        Effect.catchTag("KernelDied", (second) => {
          const limit = breachOfDeath(second.stderr, settings.limits)
          return Effect.andThen(
            replace,
            Effect.as(onOutput(diedError(second, limit && limitSentence(limit, settings.limits))), diedTwiceOutcome(first, second))
          )
        })
      )
    })

  const sessionRun = (key: KernelKey, request: RegistryRequest, onOutput: Kernel.OutputHandler) =>
    Effect.map(
      retryOnceAfterDeath((handler) => attempt(key, request, handler), supervisor.evict(key), onOutput),
      (outcome) => request.silent === true ? outcome : withRestoreNotice(key, outcome)
    )

  const perCallRun = (key: KernelKey, request: RegistryRequest, onOutput: Kernel.OutputHandler) =>
    retryOnceAfterDeath(
      (handler) => Effect.scoped(Effect.flatMap(startKernel(key), (kernel) => kernel.run(request, handler))),
      Effect.void,
      onOutput
    )

  const evictSession = Effect.fnUntraced(function*(sessionId: string, cwd?: string, language?: BackendId) {
    const real = cwd === undefined ? undefined : yield* Effect.orElseSucceed(normalizeCwd(cwd), () => cwd)
    for (const key of yield* kernelKeys) {
      if (key.matches(sessionId, real, language)) yield* supervisor.evict(key)
    }
  })

  const reset = (sessionId: string, cwd?: string, language?: BackendId) =>
    snapshots === undefined ? evictSession(sessionId, cwd, language) : Effect.andThen(snapshots.flush(sessionId), evictSession(sessionId, cwd, language))

  const prepareSpares = (place: Omit<KernelPlace, "sessionId">) =>
    resolveKey({ ...place, sessionId: "", code: "" }).pipe(
      Effect.flatMap((key) => Effect.andThen(wantSpares(key), refill)),
      Effect.catch((error) => Effect.logDebug(`no spare kernels prepared: ${error.message}`))
    )

  // Forgotten first: a save still waiting is dropped instead of made, only to be deleted.
  const forget = (sessionId: string) =>
    snapshots === undefined ? evictSession(sessionId) : Effect.andThen(snapshots.forget(sessionId), evictSession(sessionId))

  const shutdownAll = Effect.gen(function*() {
    if (snapshots !== undefined) yield* snapshots.drain
    refillDue.clear()
    yield* spares.shutdown
    for (const key of yield* kernelKeys) yield* supervisor.evict(key)
  })

  const run = (request: RegistryRequest, onOutput: Kernel.OutputHandler): Effect.Effect<CellOutcome, RegistryError> => {
    return Effect.flatMap(keyFor(request), (key) => {
      if (perCall(key.language)) return perCallRun(key, request, onOutput)
      const cell = request.reset === true
        ? supervisor.evict(key).pipe(
          Effect.andThen(snapshots === undefined ? Effect.void : snapshots.forget(key.sessionId, key.language)),
          Effect.andThen(sessionRun(key, request, onOutput))
        )
        : sessionRun(key, request, onOutput)
      return startedKernels.has(key) && request.reset !== true ? cell : Effect.onExit(cell, () => (refillDue.size === 0 ? Effect.void : refill))
    })
  }

  const withKernel = <A>(
    place: KernelPlace,
    use: (kernel: Kernel.Kernel) => Effect.Effect<A, KernelClosed | IntrospectionFailed>
  ): Effect.Effect<A, RegistryError | IntrospectionFailed> =>
    perCall(place.language)
      ? Effect.fail(new IntrospectionFailed({ reason: "in per-call kernel mode no kernel is kept between calls to ask" }))
      : Effect.flatMap(keyFor({ ...place, code: "" }), (key) => held.use(key, use))

  return {
    run,
    complete: (place, code, cursor) => withKernel(place, (kernel) => kernel.complete(code, cursor)),
    inspect: (place, code, cursor, detailLevel) => withKernel(place, (kernel) => kernel.inspect(code, cursor, detailLevel)),
    execute: (request) => Kernel.streamOf((onOutput) => run(request, onOutput)),
    reset,
    forget,
    shutdownAll,
    keys: kernelKeys,
    sparePids: spares.pids,
    sessionPids: (sessionId) =>
      Effect.map(kernelKeys, (keys) =>
        keys.flatMap((key) => {
          const kernel = key.sessionId === sessionId ? startedKernels.get(key) : undefined
          return kernel === undefined ? [] : [{ language: key.language, pid: kernel.pid }]
        })),
    prepareSpares
  } satisfies KernelRegistryService
})

/** Owns kernels by key; closing the layer's scope shuts every kernel down. */
export class KernelRegistry extends Context.Service<KernelRegistry, KernelRegistryService>()("veyyon-eval/KernelRegistry") {
  /** The registry over the settings, runtime, runner cache, spawner and bridge in context; kv from the `KvStore` in context, else the file store. */
  static readonly layer: Layer.Layer<
    KernelRegistry,
    never,
    Settings | BackendsContext | RunnerCache | KernelSpawner | AgentBridge
  > = Layer.effect(KernelRegistry, makeRegistry)
}
