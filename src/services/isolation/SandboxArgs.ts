/**
 * The sandboxed spawn as pure functions of the host's facts: bubblewrap's arguments (the
 * system read-only, secrets hidden, fresh /proc, /tmp and HOME, the kernel's own paths
 * bound), the kernel's HOME and environment inside, and the resource limits `prlimit` and
 * V8 apply. `Sandbox` decides when they apply.
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import type { SpawnSpec } from "../../kernel/KernelProcess.ts"
import { EGRESS_SOCKET_NAME } from "./egress/EgressProxy.ts"
import type { KernelLimits, SandboxSettings } from "./SandboxSettings.ts"

/** How a kernel's memory limit (`limits.memoryMb`) is applied: an address-space rlimit, a V8 heap cap, or not at all. */
export type MemoryLimitKind = "address-space" | "heap" | "none"

/** System directories visible read-only inside the sandbox (those that exist; symlinks stay symlinks). */
export const SYSTEM_DIRS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"] as const

/** Files and directories under /etc hidden inside the sandbox. */
export const HIDDEN_SYSTEM_PATHS = ["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh", "/etc/sudoers", "/etc/sudoers.d"] as const

/** HOME inside the sandbox when the host's HOME path cannot be used for it. */
export const FALLBACK_SANDBOX_HOME = "/run/veyyon-home"

/** Where the egress proxy's socket directory appears inside the sandbox (`network: allowlist`). */
export const EGRESS_SANDBOX_DIR = "/run/veyyon-egress"

/** The loopback port the runner's forwarder listens on inside the sandbox's own network namespace. */
export const EGRESS_FORWARDER_PORT = 3128

/** Destinations clients reach without the proxy: the sandbox's own loopback. */
export const EGRESS_NO_PROXY = "localhost,127.0.0.1,::1"

/** Proxy variables of the host that a kernel under `allowlist` never sees (any case): the egress proxy replaces them. */
export const HOST_PROXY_ENV_NAMES: ReadonlyArray<string> = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY", "PIP_PROXY"]

/** The namespaces and lifetime flags every sandboxed process gets. */
export const NAMESPACE_FLAGS = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent"]

const isWithin = (path: string, dir: string): boolean => path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`)

const underSystemDir = (path: string): boolean => SYSTEM_DIRS.some((dir) => isWithin(path, dir))

/** Facts of the host the bwrap arguments depend on, injectable for tests. */
export interface HostView {
  /** The symlink target of `path`, `"dir"`, `"file"`, or undefined when it does not exist. */
  readonly kind: (path: string) => string | "dir" | "file" | undefined
}

/** The host as it is. */
export const realHost: HostView = {
  kind: (path) => {
    try {
      const stat = NodeFs.lstatSync(path)
      if (stat.isSymbolicLink()) return NodeFs.readlinkSync(path)
      return stat.isDirectory() ? "dir" : "file"
    } catch {
      return undefined
    }
  }
}

/** HOME inside the sandbox: an empty tmpfs at the host's HOME path, unless a bound path holds it. */
export const sandboxHome = (hostHome: string | undefined, bound: ReadonlyArray<string>): string =>
  hostHome !== undefined && hostHome.startsWith("/") && hostHome !== "/" && !underSystemDir(hostHome) &&
    !bound.some((path) => isWithin(hostHome, path))
    ? NodePath.resolve(hostHome)
    : FALLBACK_SANDBOX_HOME

/**
 * The bwrap arguments (before the command) for a kernel with `cwd`, `home` and the request's
 * paths; with `network` none or allowlist its own network namespace, and for allowlist the
 * egress proxy's socket directory (`egressDir`) read-only at `EGRESS_SANDBOX_DIR`, bound last
 * so no other path covers it.
 */
export const bwrapArgs = (options: {
  readonly network: SandboxSettings["network"]
  readonly cwd: string
  readonly home: string
  readonly readOnly: ReadonlyArray<string>
  readonly readWrite: ReadonlyArray<string>
  readonly host: HostView
  readonly egressDir?: string | undefined
}): ReadonlyArray<string> => {
  const args = [...NAMESPACE_FLAGS, ...(options.network === "allow" ? [] : ["--unshare-net"])]
  for (const dir of SYSTEM_DIRS) {
    const kind = options.host.kind(dir)
    if (kind === "dir") args.push("--ro-bind", dir, dir)
    else if (kind !== undefined && kind !== "file") args.push("--symlink", kind, dir)
  }
  for (const path of HIDDEN_SYSTEM_PATHS) {
    const kind = options.host.kind(path)
    if (kind === "dir") args.push("--tmpfs", path)
    else if (kind !== undefined) args.push("--ro-bind", "/dev/null", path)
  }
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", options.home)
  const binds = [
    ...options.readOnly.filter((path) => !underSystemDir(path)).map((path) => ["--ro-bind", path] as const),
    ...options.readWrite.map((path) => ["--bind", path] as const)
  ].filter(([, path]) => options.host.kind(path) !== undefined)
  binds.sort((a, b) => a[1].split("/").length - b[1].split("/").length)
  for (const [flag, path] of binds) args.push(flag, path, path)
  if (options.network === "allowlist" && options.egressDir !== undefined) args.push("--ro-bind", options.egressDir, EGRESS_SANDBOX_DIR)
  args.push("--chdir", options.cwd)
  return args
}

/** The environment a sandboxed kernel gets: the host's filtered one with HOME and TMPDIR inside. */
export const sandboxEnv = (env: Readonly<Record<string, string>>, home: string): Record<string, string> => {
  const { TMP: _tmp, TEMP: _temp, ...rest } = env
  return { ...rest, HOME: home, TMPDIR: "/tmp" }
}

/**
 * `env` for a kernel whose way out is the egress proxy: the host's proxy variables dropped
 * (whatever their case), the runner's forwarder named (`VEYYON_EGRESS_SOCKET`,
 * `VEYYON_EGRESS_PORT`), and every client pointed at it in both spellings (`HTTP_PROXY`,
 * `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` for the sandbox's loopback), Node's own
 * clients included (`NODE_USE_ENV_PROXY`, without undici's experimental-feature warning on
 * every Node process's stderr).
 */
export const egressEnv = (env: Readonly<Record<string, string>>): Record<string, string> => {
  const kept: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) if (!HOST_PROXY_ENV_NAMES.includes(name.toUpperCase())) kept[name] = value
  const proxy = `http://127.0.0.1:${EGRESS_FORWARDER_PORT}`
  for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]) kept[name] = kept[name.toLowerCase()] = proxy
  kept.NO_PROXY = kept.no_proxy = EGRESS_NO_PROXY
  kept.NODE_USE_ENV_PROXY = "1"
  kept.NODE_OPTIONS = "--disable-warning=UNDICI-EHPA"
  kept.VEYYON_EGRESS_SOCKET = `${EGRESS_SANDBOX_DIR}/${EGRESS_SOCKET_NAME}`
  kept.VEYYON_EGRESS_PORT = String(EGRESS_FORWARDER_PORT)
  return kept
}

const MIB = 1024 * 1024

/** A spec whose backend takes a V8 heap cap, capped at `limits.memoryMb` (applied before sandboxing). */
export const withHeapLimit = (spec: SpawnSpec, memoryLimit: MemoryLimitKind, limits: KernelLimits): SpawnSpec =>
  memoryLimit === "heap" && limits.memoryMb !== undefined
    ? { ...spec, args: [`--max-old-space-size=${limits.memoryMb}`, ...spec.args] }
    : spec

/**
 * `spec` started by `prlimit` with the resource limits its kernel gets, and its pids cap for
 * the spawner (which caps the kernel's cgroup where it can). With `nproc` the pids cap is
 * also RLIMIT_NPROC: only for a command that runs inside the sandbox's own user namespace,
 * where that limit counts the processes of the namespace alone (Linux 5.14+); outside one
 * it counts every process of the user.
 */
export const withRlimits = (
  spec: SpawnSpec,
  memoryLimit: MemoryLimitKind,
  limits: KernelLimits,
  prlimit: string,
  options: { readonly nproc?: boolean } = {}
): SpawnSpec => {
  const rlimits = [
    ...(memoryLimit === "address-space" && limits.memoryMb !== undefined ? [`--as=${limits.memoryMb * MIB}`] : []),
    ...(limits.fileSizeMb !== undefined ? [`--fsize=${limits.fileSizeMb * MIB}`] : []),
    ...(options.nproc === true && limits.pids !== undefined ? [`--nproc=${limits.pids}`] : [])
  ]
  const limited = rlimits.length === 0 ? spec : { ...spec, command: prlimit, args: [...rlimits, "--", spec.command, ...spec.args] }
  return limits.pids === undefined ? limited : { ...limited, pidsMax: limits.pids }
}

