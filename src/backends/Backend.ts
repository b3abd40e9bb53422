/**
 * What one language contributes to the eval backends: its id and names, the guidance the
 * tool description carries, its runner folder and the file to spawn, how its interpreter is
 * found and checked, the environment its kernels get, and how a kernel is launched (command,
 * arguments, frame channel, prelude). Everything else (the kernel actor, the registry, the
 * tool, the CLI, settings, the runner cache) reads the registered backends.
 */
import { type Effect, Schema } from "effect"
import * as fs from "node:fs"
import type { FrameChannel } from "../kernel/KernelProcess.ts"
import type { MemoryLimitKind } from "../services/isolation/SandboxArgs.ts"
import type { CachedRunner } from "../services/storage/RunnerCache.ts"

/** The interpreter a backend resolved for a cwd. */
export interface BackendInterpreter {
  /** What to spawn. */
  readonly executable: string
  /** A directory put first on PATH and bound read-only in the sandbox (a Python venv's bin). */
  readonly binDir?: string | undefined
}

/** How one kernel process is started and primed. */
export interface KernelLaunch {
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** Where frames travel: `stdio` (Python's private dup of fd 1) or `fd3`. */
  readonly channel: FrameChannel
  /** Source sent as one silent request right after the spawn, before init (so it must not read the cwd or env at its top level); absent when the runner loads its own. */
  readonly prelude?: string
}

/** A backend's interpreter cannot be used here (missing, failing, too old, or none exists). */
export class RuntimeUnavailable extends Schema.TaggedError<RuntimeUnavailable>()("RuntimeUnavailable", {
  language: Schema.String,
  detail: Schema.String,
  fix: Schema.String
}) {
  override get message(): string {
    return `${this.detail}. To fix: ${this.fix}.`
  }
}

/**
 * A backend's own unavailability error, richer than `RuntimeUnavailable` for embedders in
 * process, which also says itself as `RuntimeUnavailable` for those that know no backend
 * (the cluster's wire).
 */
export interface BackendUnavailability {
  /** The same failure as the language-neutral error, with the same message. */
  readonly asRuntimeUnavailable: () => RuntimeUnavailable
}

/** A backend's own settings, resolved from `kernel.backends.<id>`, its variables and older spellings: what its runtime reads. */
export interface BackendSettings {
  /** The interpreter to use (a path, relative to the kernel's cwd, or a command on PATH), when set. */
  readonly interpreter?: string | undefined
  /** Use the interpreter found without running it to check it. */
  readonly skipCheck: boolean
}

/** A backend's interpreter resolution and environment, built once per registry; `E` is why it cannot resolve one. */
export interface BackendRuntime<E = RuntimeUnavailable> {
  /** The checked interpreter for kernels started in `cwd`. */
  readonly resolve: (cwd: string) => Effect.Effect<BackendInterpreter, E>
  /** The environment to spawn a kernel with (filtered host env, the backend's additions, `VEYYON_ARTIFACTS_DIR`). */
  readonly env: (interpreter: BackendInterpreter, options: { readonly artifactsDir: string }) => Record<string, string>
  /** Run when a kernel in `cwd` failed to start: fails with what is wrong with the interpreter, if anything (the start error stands otherwise). */
  readonly explainStartFailure?: (cwd: string) => Effect.Effect<void, E>
  /** Work to do before a sandboxed start, outside the sandbox (e.g. compiling a runner the sandbox sees read-only). */
  readonly beforeSandboxedStart?: (interpreter: BackendInterpreter, runner: CachedRunner) => Effect.Effect<void>
}

/** One language's plug-in; its runtime needs `R` from the context and fails with `E`. */
export interface KernelBackend<Id extends string = string, R = never, E = RuntimeUnavailable> {
  /** The `language` value of the tool, e.g. `py`; also names the `eval.<id>` flag and `VEYYON_<ID>`. */
  readonly id: Id
  /** The language's name for people, e.g. `Python`. */
  readonly displayName: string
  /** Lines the tool description carries while the backend is enabled. */
  readonly guidance: ReadonlyArray<string>
  /** Whether `eval.<id>` is on unless set. */
  readonly enabledByDefault: boolean
  /** The environment variable naming the interpreter (`kernel.backends.<id>.interpreter`), when the backend reads one there. */
  readonly interpreterEnv?: string
  /** The environment variable that skips running the interpreter to check it (`kernel.backends.<id>.skipCheck`), when the backend reads one. */
  readonly skipCheckEnv?: string
  /** The variable holding the interpreter's module search path (e.g. `PYTHONPATH`), whose relative entries depend on the kernel's cwd. */
  readonly searchPathEnv?: string
  /** The settings section an older version used for this backend's interpreter, check and kernel defaults (e.g. `python`), still read. */
  readonly olderSection?: string
  /** The runner's folder below `runner/` and the file in it to spawn; absent when no runner ships. */
  readonly runner?: { readonly folder: string; readonly entry: string }
  /** The notebook metadata of an exported session in this language (nbformat's `kernelspec` and `language_info`). */
  readonly notebook: { readonly kernelspec: object; readonly language_info: object }
  /** Whether its runner answers completion and inspection requests. */
  readonly introspects: boolean
  /** Whether `name?` and `?x` are code in the language (Ruby), so `veyyon repl` takes only forms that are not code as `obj?` inspections. */
  readonly predicateNames?: boolean
  /** Whether a line typed at `veyyon repl` starts a block, so the cell goes on until an empty line (Python has its own rules). */
  readonly opensBlock?: (line: string) => boolean
  /** Spare kernels kept started for new sessions unless `kernel.spares` says otherwise (default 0). */
  readonly defaultSpares?: number
  /** How `limits.memoryMb` applies to its kernels. */
  readonly memoryLimit: MemoryLimitKind
  /** Builds the backend's interpreter resolution and environment from its own settings. */
  readonly runtime: (settings: BackendSettings) => Effect.Effect<BackendRuntime<E>, never, R>
  /** The command that starts a kernel with `interpreter` and the cached runner; absent with `runner`. */
  readonly launch?: (interpreter: BackendInterpreter, runner: CachedRunner) => KernelLaunch
}

/** Declares a backend, keeping its id's literal type. */
export const makeBackend = <const Id extends string, R = never, E = RuntimeUnavailable>(backend: KernelBackend<Id, R, E>): KernelBackend<Id, R, E> =>
  backend

/** Whether a file (followed through links) starts with `#!`: a shim or wrapper, not the interpreter itself. */
export const isScript = (file: string): boolean => {
  let fd: number | undefined
  try {
    fd = fs.openSync(file, "r")
    const head = Buffer.alloc(2)
    return fs.readSync(fd, head, 0, 2, 0) === 2 && head[0] === 0x23 && head[1] === 0x21
  } catch {
    return false
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}
