/**
 * Room `isolation`: what keeps a kernel in its place: the environment policy, the sandbox
 * (bubblewrap arguments, limits and their settings, limit breaches) and the egress
 * allowlist under `egress/`. It uses the kernel's process types, settings and storage;
 * nothing above.
 *
 * The `Sandbox` service: confines a kernel's spawn. In `off` mode it only applies the
 * kernel limits; in `auto` and `required` it runs the kernel under bubblewrap (`bwrap`)
 * with new user, pid, ipc, uts and mount namespaces (and a network namespace when
 * `sandbox.network` is `none` or `allowlist`; with `allowlist` the kernel's egress proxy
 * socket bound in and the proxy variables pointing at the runner's forwarder to it), `--die-with-parent`, the system directories read-only,
 * a fresh /proc, a private /tmp, an empty private HOME, and only the paths the kernel
 * needs bound in: its cwd read-write, its interpreter, runner and session state read-only.
 *
 * Whether bwrap works here is probed once, at the first sandboxed kernel. `auto` then runs
 * kernels without the sandbox when it does not, and logs why once; `required`, and any mode
 * with `sandbox.network: allowlist`, fails every kernel start with `SandboxUnavailable`.
 *
 * Limits: `limits.memoryMb` is a Python kernel's address space (RLIMIT_AS: an allocation
 * past it raises MemoryError and the kernel lives) and a JavaScript kernel's V8 heap
 * (`--max-old-space-size`; V8 cannot run under RLIMIT_AS); `limits.fileSizeMb` is
 * RLIMIT_FSIZE, both set by `prlimit` before the kernel starts (inside the sandbox when
 * there is one); `limits.pids` is passed to the spawner, which caps the kernel's cgroup where
 * it can, and in the sandbox is also RLIMIT_NPROC set inside its user namespace, where it
 * counts only that namespace's processes (root is exempt from it: root needs the cgroup).
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { describeExit, type SpawnSpec } from "../../kernel/KernelProcess.ts"
import { runCommand } from "../../process/RunCommand.ts"
import type { KernelLimits, SandboxSettings } from "./SandboxSettings.ts"
import { bwrapArgs, type MemoryLimitKind, egressEnv, NAMESPACE_FLAGS, realHost, sandboxEnv, sandboxHome, withHeapLimit, withRlimits } from "./SandboxArgs.ts"
import { Settings } from "../config/Settings.ts"

/**
 * The kernel cannot start because the sandbox does not work here and the settings need it:
 * `sandbox.mode` is `required`, or `sandbox.network` is `allowlist` (`byAllowlist`), which
 * never runs a kernel with the host's network.
 */
export class SandboxUnavailable extends Schema.TaggedError<SandboxUnavailable>()("SandboxUnavailable", {
  reason: Schema.String,
  byAllowlist: Schema.optionalKey(Schema.Boolean)
}) {
  override get message(): string {
    return this.byAllowlist === true
      ? `The kernel was not started: sandbox.network is allowlist (VEYYON_SANDBOX_NETWORK=allowlist), which needs the sandbox, and it cannot run here: ${this.reason}. ` +
        "Install bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces, or choose another sandbox.network. " +
        "`veyyon setup sandbox --check` shows what works."
      : `The kernel was not started: the sandbox is required (sandbox.mode / VEYYON_SANDBOX=required) but cannot run here: ${this.reason}. ` +
        "Install bubblewrap (Debian: apt-get install bubblewrap) and allow user namespaces, or set VEYYON_SANDBOX=auto or off. " +
        "`veyyon setup sandbox --check` shows what works."
  }
}

/** A limit is set but the tool that applies it is missing. */
export class LimitsUnavailable extends Schema.TaggedError<LimitsUnavailable>()("LimitsUnavailable", {
  reason: Schema.String
}) {
  override get message(): string {
    return `The kernel was not started: ${this.reason}. Install util-linux (it provides prlimit), or unset the limits.`
  }
}

/** What the sandbox probe found. */
export interface SandboxProbe {
  /** The bwrap executable, when found. */
  readonly bwrap: string | undefined
  /** Whether bwrap started a process in new user, pid, ipc, uts, mount and network namespaces. */
  readonly works: boolean
  /** Why it does not work, when it does not. */
  readonly reason: string | undefined
  /** The prlimit executable, when found. */
  readonly prlimit: string | undefined
}

/** What a kernel needs to see besides the system. */
export interface SandboxRequest {
  /** How the kernel's backend takes `limits.memoryMb`. */
  readonly memoryLimit: MemoryLimitKind
  /** Host paths bound read-only (interpreter prefix, venv, runner cache, session state). */
  readonly readOnly: ReadonlyArray<string>
  /** Host paths bound read-write (the kernel's cwd). */
  readonly readWrite: ReadonlyArray<string>
  /** The kernel's egress proxy's socket directory, with `sandbox.network: allowlist`. */
  readonly egressDir?: string | undefined
}

/** How one kernel's spawns are confined. */
export interface Confinement {
  /** Whether the kernel runs in the sandbox. */
  readonly sandboxed: boolean
  /** The spawn as it must happen. */
  readonly apply: (spec: SpawnSpec) => SpawnSpec
}

/** The service. */
export interface SandboxService {
  readonly settings: SandboxSettings
  readonly limits: KernelLimits
  /** The probe, run once. */
  readonly probe: Effect.Effect<SandboxProbe>
  /**
   * How to confine the spawns of a kernel making `request`: limits always, bubblewrap in
   * `auto` (when it works) and `required`; fails when `required` or `allowlist` cannot be met.
   */
  readonly confine: (request: SandboxRequest) => Effect.Effect<Confinement, SandboxUnavailable | LimitsUnavailable>
}

/** The first executable called `name` on `PATH` (or `name` itself when it holds a slash). */
export const findExecutable = (name: string, path: string | undefined): string | undefined => {
  const candidates = name.includes("/") ? [name] : (path ?? "").split(":").filter(Boolean).map((dir) => NodePath.join(dir, name))
  return candidates.find((file) => {
    try {
      NodeFs.accessSync(file, NodeFs.constants.X_OK)
      return NodeFs.statSync(file).isFile()
    } catch {
      return false
    }
  })
}

/** How long the probe may take. */
const PROBE_TIMEOUT = Duration.seconds(30)

/** Runs bwrap once in every namespace the sandbox uses; the reason when that fails. */
export const probeBwrap = (bwrap: string): Effect.Effect<string | undefined> =>
  runCommand({
    command: bwrap,
    args: [...NAMESPACE_FLAGS, "--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/sh", "-c", "exit 0"],
    env: process.env
  }).pipe(
    Effect.map(({ exit, stderr }) =>
      exit.code === 0 ? undefined : (stderr.trim() || `bwrap ended with ${describeExit(exit)}`).split("\n")[0]),
    Effect.catch((error) => Effect.succeed(error.message)),
    Effect.timeoutOrElse({ duration: PROBE_TIMEOUT, orElse: () => Effect.succeed(`bwrap did not finish within ${Duration.format(PROBE_TIMEOUT)}`) })
  )

/** How the service finds its tools: by default `bwrap` and `prlimit` on the process's PATH. */
export interface SandboxTools {
  readonly bwrap?: string
  readonly prlimit?: string
  readonly path?: string
}

/** Builds the service over resolved settings. */
export const makeSandbox = (
  settings: SandboxSettings,
  limits: KernelLimits,
  tools: SandboxTools = {}
): Effect.Effect<SandboxService> =>
  Effect.gen(function*() {
    const path = tools.path ?? process.env.PATH
    const prlimit = findExecutable(tools.prlimit ?? "prlimit", path)
    const probe = yield* Effect.cached(Effect.suspend(() => {
      const bwrap = findExecutable(tools.bwrap ?? "bwrap", path)
      if (bwrap === undefined) {
        return Effect.succeed<SandboxProbe>({ bwrap, works: false, reason: "bwrap (bubblewrap) is not installed or not on PATH", prlimit })
      }
      return Effect.map(probeBwrap(bwrap), (reason): SandboxProbe => ({
        bwrap,
        works: reason === undefined,
        reason: reason === undefined ? undefined : `bwrap could not create its namespaces: ${reason}`,
        prlimit
      }))
    }))
    let saidUnsandboxed = false
    const sandboxed = (spec: SpawnSpec, request: SandboxRequest, bwrap: string): SpawnSpec => {
      const bound = [...request.readOnly, ...settings.readPaths, ...request.readWrite, ...settings.writePaths]
      const home = sandboxHome(spec.env.HOME, bound)
      const args = bwrapArgs({
        network: settings.network,
        cwd: spec.cwd,
        home,
        readOnly: [...request.readOnly, ...settings.readPaths],
        readWrite: [...request.readWrite, ...settings.writePaths],
        host: realHost,
        egressDir: request.egressDir
      })
      const inside = withRlimits(spec, request.memoryLimit, limits, prlimit ?? "prlimit", { nproc: true })
      const env = sandboxEnv(spec.env, home)
      return {
        ...inside,
        command: bwrap,
        args: [...args, "--", inside.command, ...inside.args],
        env: settings.network === "allowlist" && request.egressDir !== undefined ? egressEnv(env) : env,
        sandboxed: true
      }
    }
    const confine = Effect.fnUntraced(function*(request: SandboxRequest) {
      const needsPrlimit = (request.memoryLimit === "address-space" && limits.memoryMb !== undefined) || limits.fileSizeMb !== undefined ||
        limits.pids !== undefined
      if (needsPrlimit && prlimit === undefined) {
        return yield* new LimitsUnavailable({ reason: "kernel limits are set but prlimit is not on PATH" })
      }
      let bwrap: string | undefined
      if (settings.mode !== "off" || settings.network === "allowlist") {
        const found = yield* probe
        if (found.works && found.bwrap !== undefined) bwrap = found.bwrap
        else if (settings.network === "allowlist") return yield* new SandboxUnavailable({ reason: found.reason ?? "unknown", byAllowlist: true })
        else if (settings.mode === "required") return yield* new SandboxUnavailable({ reason: found.reason ?? "unknown" })
        else if (!saidUnsandboxed) {
          saidUnsandboxed = true
          yield* Effect.logWarning(`sandbox.mode is auto and the sandbox cannot run here (${found.reason}); kernels run unsandboxed.`)
        }
      }
      return {
        sandboxed: bwrap !== undefined,
        apply: (spec: SpawnSpec) => {
          const heapLimited = withHeapLimit(spec, request.memoryLimit, limits)
          return bwrap === undefined
            ? withRlimits(heapLimited, request.memoryLimit, limits, prlimit ?? "prlimit")
            : sandboxed(heapLimited, request, bwrap)
        }
      } satisfies Confinement
    })
    return { settings, limits, probe, confine } satisfies SandboxService
  })

/** Confines kernel spawns as the settings ask. */
export class Sandbox extends Context.Service<Sandbox, SandboxService>()("veyyon-eval/Sandbox") {
  /** The service over `Settings`, finding bwrap and prlimit on PATH. */
  static readonly Live: Layer.Layer<Sandbox, never, Settings> = Layer.effect(
    Sandbox,
    Effect.flatMap(Settings, (settings) => makeSandbox(settings.sandbox, settings.limits))
  )

  /** The service over `Settings` with the given tools, e.g. to test a machine without bwrap. */
  static readonly layerWith = (tools: SandboxTools): Layer.Layer<Sandbox, never, Settings> =>
    Layer.effect(Sandbox, Effect.flatMap(Settings, (settings) => makeSandbox(settings.sandbox, settings.limits, tools)))
}
