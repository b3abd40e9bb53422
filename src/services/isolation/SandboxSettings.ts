/**
 * The `sandbox.*` and `limits.*` settings: their schema, their environment variables and
 * the default sandbox mode of each front door.
 *
 *   VEYYON_SANDBOX            sandbox.mode: off | auto | required
 *   VEYYON_SANDBOX_NETWORK    sandbox.network: allow | none | allowlist
 *   VEYYON_SANDBOX_ALLOW_HOSTS sandbox.allowHosts: host names, `*.suffix` patterns, optional
 *                             `:port`, separated by commas or white space
 *   VEYYON_KERNEL_MEMORY_MB   limits.memoryMb (a positive integer, or `off`)
 *   VEYYON_KERNEL_PIDS        limits.pids (a positive integer, or `off`)
 *
 * The doors serving remote callers (`mcp --http`, `runner`) start from `REMOTE_DOOR_DEFAULTS`:
 * sandbox `auto`, network `none`, and a memory and a pids limit; the local doors from none of it.
 */
import { Config, Result, Schema } from "effect"
import { fromSettings, type InvalidSettings, optionalSetting, readConfig, type SettingNames } from "../config/ConfigSources.ts"
import { isUnsetEnvValue } from "../config/Flags.ts"
import { LimitText, ListText, PositiveIntText, WordText } from "../config/Spellings.ts"
import { type AllowList, parseAllowHosts } from "./egress/AllowHosts.ts"
import type { EnvRecord } from "./EnvPolicy.ts"

/** `off`: no sandbox; `auto`: sandbox when it works here, else run without and say so once; `required`: never without. */
export const SandboxMode = Schema.Literals(["off", "auto", "required"])

/** One sandbox mode. */
export type SandboxMode = typeof SandboxMode.Type

/**
 * `allow`: the host's network; `none`: an own network namespace, not even the host's loopback;
 * `allowlist`: an own network namespace whose only way out is the host's egress proxy, which
 * reaches the hosts `sandbox.allowHosts` lists and nothing else.
 */
export const SandboxNetwork = Schema.Literals(["allow", "none", "allowlist"])

/** One network policy. */
export type SandboxNetwork = typeof SandboxNetwork.Type

/** The places kernels are started from; each has its own default sandbox mode. */
export type FrontDoor = "library" | "eval" | "repl" | "mcp" | "mcp-http" | "runner"

/** Whether a front door serves remote callers (whose cells are confined by default). */
export const isRemoteDoor = (door: FrontDoor): boolean => door === "mcp-http" || door === "runner"

/** The default sandbox mode of a front door: `auto` for the doors serving remote callers, else `off`. */
export const defaultSandboxMode = (door: FrontDoor): SandboxMode => isRemoteDoor(door) ? "auto" : "off"

/** The memory limit of a remote door's kernels unless `VEYYON_KERNEL_MEMORY_MB` says otherwise, in MiB. */
export const REMOTE_DOOR_MEMORY_MB = 2048

/** The process (and thread) limit of a remote door's kernel trees unless `VEYYON_KERNEL_PIDS` says otherwise. */
export const REMOTE_DOOR_PIDS = 256

/** The sandbox and limits a remote door starts from (the environment still overrides each). */
export const REMOTE_DOOR_DEFAULTS = {
  sandbox: { mode: "auto", network: "none" },
  limits: { memoryMb: REMOTE_DOOR_MEMORY_MB, pids: REMOTE_DOOR_PIDS }
} as const satisfies { readonly sandbox: typeof SandboxInput.Type; readonly limits: typeof LimitsInput.Type }

/** The `sandbox` and `limits` settings a front door starts from: the remote defaults, or nothing (off, allow, no limits). */
export const doorSandboxDefaults = (
  door: FrontDoor
): { readonly sandbox?: typeof SandboxInput.Type; readonly limits?: typeof LimitsInput.Type } =>
  isRemoteDoor(door) ? REMOTE_DOOR_DEFAULTS : {}

/** The setting and variable that set each limit, for messages. */
export const LIMIT_SETTINGS = {
  memoryMb: "limits.memoryMb / VEYYON_KERNEL_MEMORY_MB",
  pids: "limits.pids / VEYYON_KERNEL_PIDS",
  fileSizeMb: "limits.fileSizeMb"
} as const satisfies Record<keyof KernelLimits, string>

/** Resolved sandbox settings. */
export interface SandboxSettings {
  readonly mode: SandboxMode
  readonly network: SandboxNetwork
  /** The hosts the egress proxy may reach (`network: allowlist`; empty otherwise). */
  readonly allowHosts: AllowList
  /** Extra host paths visible read-only inside the sandbox. */
  readonly readPaths: ReadonlyArray<string>
  /** Extra host paths visible read-write inside the sandbox. */
  readonly writePaths: ReadonlyArray<string>
}

/** Resolved per-kernel limits; `undefined` means no limit. */
export interface KernelLimits {
  /** Address space of a Python kernel (RLIMIT_AS), or the V8 heap of a JavaScript kernel, in MiB. */
  readonly memoryMb: number | undefined
  /** Processes and threads of a kernel's whole tree. */
  readonly pids: number | undefined
  /** The largest file a kernel may write, in MiB. */
  readonly fileSizeMb: number | undefined
}

const PositiveInt = Schema.Int.check(Schema.isGreaterThan(0))
const optional = Schema.optionalKey
const AbsolutePath = Schema.String.check(Schema.makeFilter((value) => value.startsWith("/") || "must be an absolute path"))

/** Schema of the `sandbox` part of a settings object. */
export const SandboxInput = Schema.Struct({
  mode: optional(SandboxMode),
  network: optional(SandboxNetwork),
  allowHosts: optional(Schema.Array(Schema.String)),
  readPaths: optional(Schema.Array(AbsolutePath)),
  writePaths: optional(Schema.Array(AbsolutePath))
})

/** Schema of the `limits` part of a settings object. */
export const LimitsInput = Schema.Struct({
  memoryMb: optional(PositiveInt),
  pids: optional(PositiveInt),
  fileSizeMb: optional(PositiveInt)
})

/** A setting that cannot be used: where it came from (a variable or a setting's name) and why. */
export interface EnvProblem {
  readonly source: string
  readonly problem: string
}

/** The variables of the `sandbox` and `limits` settings, by setting path. */
export const SANDBOX_VARIABLES: Readonly<Record<string, ReadonlyArray<string>>> = {
  "sandbox.mode": ["VEYYON_SANDBOX"],
  "sandbox.network": ["VEYYON_SANDBOX_NETWORK"],
  "sandbox.allowHosts": ["VEYYON_SANDBOX_ALLOW_HOSTS"],
  "limits.memoryMb": ["VEYYON_KERNEL_MEMORY_MB"],
  "limits.pids": ["VEYYON_KERNEL_PIDS"]
}

/** The `sandbox` settings as their sources hold them, before the checks between them. */
export const sandboxConfig = Config.all({
  mode: optionalSetting(WordText(SandboxMode.literals), "sandbox.mode"),
  network: optionalSetting(WordText(SandboxNetwork.literals), "sandbox.network"),
  allowHosts: optionalSetting(ListText, "sandbox.allowHosts"),
  readPaths: optionalSetting(ListText, "sandbox.readPaths"),
  writePaths: optionalSetting(ListText, "sandbox.writePaths")
})

/** The `limits` settings as their sources hold them (`off` from a variable: no limit, over the object's). */
export const limitsConfig = Config.all({
  memoryMb: optionalSetting(LimitText("MiB"), "limits.memoryMb"),
  pids: optionalSetting(LimitText("processes"), "limits.pids"),
  fileSizeMb: optionalSetting(PositiveIntText, "limits.fileSizeMb")
})

/** The entries of `VEYYON_SANDBOX_ALLOW_HOSTS` (split at commas and white space), or undefined when it is unset. */
export const splitAllowHosts = (raw: string | undefined): ReadonlyArray<string> | undefined =>
  raw === undefined || isUnsetEnvValue(raw) ? undefined : Schema.decodeSync(ListText)(raw)

/** The allowlist of `entries`, or the problem naming every entry that cannot be used. */
const allowListOf = (entries: ReadonlyArray<string>, source: string): Result.Result<AllowList, EnvProblem> =>
  Result.mapError(parseAllowHosts(entries), (problems) => ({
    source,
    problem: problems.map(({ entry, problem }) => `${JSON.stringify(entry)}: ${problem}`).join("; ")
  }))

/**
 * The sandbox settings from what `sandboxConfig` read (`allowHostsSource`: the variable or
 * setting the hosts came from). `network: allowlist` needs hosts to allow and the sandbox:
 * with no mode given it makes the mode `required`, and with mode `off` it is a settings
 * error (`auto` refuses to run unsandboxed too).
 */
export const checkSandbox = (
  read: typeof sandboxConfig extends Config.Config<infer A> ? A : never,
  allowHostsSource: string
): Result.Result<SandboxSettings, EnvProblem> =>
  Result.gen(function*() {
    const { mode } = read
    const network = read.network ?? "allow"
    const allowHosts = yield* allowListOf(read.allowHosts ?? [], allowHostsSource)
    if (network === "allowlist") {
      if (allowHosts.rules.length === 0) {
        return yield* Result.fail({
          source: allowHostsSource,
          problem: "sandbox.network is allowlist but no host is allowed; list hosts in sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS), e.g. pypi.org,files.pythonhosted.org, or use network none"
        })
      }
      if (mode === "off") {
        return yield* Result.fail({
          source: "sandbox.mode",
          problem: "sandbox.network allowlist needs the sandbox, but sandbox.mode (VEYYON_SANDBOX) is off; set it to required or auto, or leave it unset"
        })
      }
    }
    return {
      mode: mode ?? (network === "allowlist" ? "required" : "off"),
      network,
      allowHosts,
      readPaths: read.readPaths ?? [],
      writePaths: read.writePaths ?? []
    }
  })

/** The limits from what `limitsConfig` read: `off` is no limit; none by default. */
export const limitsOf = (read: typeof limitsConfig extends Config.Config<infer A> ? A : never): KernelLimits => ({
  memoryMb: read.memoryMb === "off" ? undefined : read.memoryMb,
  pids: read.pids === "off" ? undefined : read.pids,
  fileSizeMb: read.fileSizeMb
})

const sandboxNames = (path: string): SettingNames | undefined => {
  const variables = SANDBOX_VARIABLES[path]
  return variables === undefined ? undefined : { variables, olderKeys: [] }
}

const problemOf = (error: InvalidSettings): EnvProblem => ({ source: error.source, problem: error.problem })

/** The sandbox settings from the object with the environment on top (see `checkSandbox`). */
export const resolveSandbox = (
  given: typeof SandboxInput.Type | undefined,
  env: EnvRecord
): Result.Result<SandboxSettings, EnvProblem> => {
  const source = fromSettings(env, { sandbox: given }, sandboxNames)
  return Result.flatMap(
    Result.mapError(readConfig(sandboxConfig, source), problemOf),
    (read) => checkSandbox(read, source.variableAt(["sandbox", "allowHosts"]) ?? "sandbox.allowHosts")
  )
}

/** The limits from the object with the environment on top (`off` there lifts one); none by default. */
export const resolveLimits = (
  given: typeof LimitsInput.Type | undefined,
  env: EnvRecord
): Result.Result<KernelLimits, EnvProblem> =>
  Result.mapBoth(readConfig(limitsConfig, fromSettings(env, { limits: given }, sandboxNames)), { onFailure: problemOf, onSuccess: limitsOf })
