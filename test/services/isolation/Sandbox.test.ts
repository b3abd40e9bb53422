import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Logger, Result } from "effect"
import type { SpawnSpec } from "../../../src/kernel/KernelProcess.ts"
import { makeSandbox } from "../../../src/services/isolation/Sandbox.ts"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import {
  bwrapArgs,
  EGRESS_SANDBOX_DIR,
  egressEnv,
  FALLBACK_SANDBOX_HOME,
  type HostView,
  realHost,
  sandboxEnv,
  sandboxHome,
  withHeapLimit,
  withRlimits
} from "../../../src/services/isolation/SandboxArgs.ts"
import { defaultSandboxMode, doorSandboxDefaults, REMOTE_DOOR_DEFAULTS, resolveLimits, resolveSandbox, splitAllowHosts } from "../../../src/services/isolation/SandboxSettings.ts"
import { parseAllowHosts } from "../../../src/services/isolation/egress/AllowHosts.ts"
import { testSettings } from "../../support/settings.ts"

const host: HostView = {
  kind: (path) =>
    ({ "/usr": "dir", "/bin": "usr/bin", "/etc": "dir", "/etc/shadow": "file", "/etc/ssh": "dir", "/work/p": "dir", "/work/p/.venv": "dir", "/opt/py": "dir" } as Record<string, string>)[path]
}

const spec: SpawnSpec = { command: "/usr/bin/python3", args: ["-u", "boot.py"], cwd: "/work/p", env: { HOME: "/root", TMP: "/x", PATH: "/usr/bin" } }
const noLimits = { memoryMb: undefined, pids: undefined, fileSizeMb: undefined }

describe("sandbox settings", () => {
  it("default off, allow and no limits; env overrides the object; bad values are refused", () => {
    expect(testSettings().sandbox).toEqual({ mode: "off", network: "allow", allowHosts: { rules: [] }, readPaths: [], writePaths: [] })
    expect(testSettings().limits).toEqual(noLimits)
    expect(Result.getOrThrow(resolveSandbox({ mode: "auto" }, { VEYYON_SANDBOX: " Required ", VEYYON_SANDBOX_NETWORK: "none" })))
      .toMatchObject({ mode: "required", network: "none" })
    expect(Result.getOrThrow(resolveLimits({ memoryMb: 100, pids: 5 }, { VEYYON_KERNEL_MEMORY_MB: "256" })))
      .toEqual({ memoryMb: 256, pids: 5, fileSizeMb: undefined })
    expect(Result.isFailure(resolveSandbox({}, { VEYYON_SANDBOX: "yes" }))).toBe(true)
    expect(Result.isFailure(resolveLimits({}, { VEYYON_KERNEL_MEMORY_MB: "1.5" }))).toBe(true)
  })

  it("allowlist takes its hosts from VEYYON_SANDBOX_ALLOW_HOSTS over sandbox.allowHosts, and needs the sandbox", () => {
    const fromEnv = Result.getOrThrow(resolveSandbox(
      { allowHosts: ["ignored.example"] },
      { VEYYON_SANDBOX_NETWORK: "Allowlist", VEYYON_SANDBOX_ALLOW_HOSTS: " pypi.org,*.pythonhosted.org  index.test:8080 " }
    ))
    expect(fromEnv).toMatchObject({ mode: "required", network: "allowlist" })
    expect(fromEnv.allowHosts.rules.map((rule) => rule.entry)).toEqual(["pypi.org", "*.pythonhosted.org", "index.test:8080"])
    const fromObject = Result.getOrThrow(resolveSandbox({ mode: "auto", network: "allowlist", allowHosts: ["PyPI.org"] }, {}))
    expect(fromObject).toMatchObject({ mode: "auto", network: "allowlist", allowHosts: { rules: [{ host: "pypi.org", kind: "exact" }] } })
    expect(Result.getOrThrow(resolveSandbox({ network: "none" }, {})).mode).toBe("off")
    expect(splitAllowHosts("  ")).toBeUndefined()
    expect(splitAllowHosts("a.b,,c.d")).toEqual(["a.b", "c.d"])
  })

  it("allowlist without hosts, with the sandbox off, or with an entry it cannot use is refused, saying why", () => {
    const problem = (given: Parameters<typeof resolveSandbox>[0], env: Record<string, string>) => {
      const resolved = resolveSandbox(given, env)
      return Result.isFailure(resolved) ? resolved.failure : undefined
    }
    expect(problem({ network: "allowlist" }, {})).toMatchObject({ source: "sandbox.allowHosts", problem: expect.stringContaining("no host is allowed") })
    expect(problem({}, { VEYYON_SANDBOX_NETWORK: "allowlist", VEYYON_SANDBOX_ALLOW_HOSTS: " " })?.problem).toContain("no host is allowed")
    expect(problem({ network: "allowlist", allowHosts: ["a.example"] }, { VEYYON_SANDBOX: "off" }))
      .toMatchObject({ source: "sandbox.mode", problem: expect.stringContaining("needs the sandbox") })
    expect(problem({}, { VEYYON_SANDBOX_NETWORK: "allowlist", VEYYON_SANDBOX_ALLOW_HOSTS: "ok.example,10.0.0.1" }))
      .toEqual({ source: "VEYYON_SANDBOX_ALLOW_HOSTS", problem: "\"10.0.0.1\": IP addresses cannot be listed; list a host name" })
    expect(problem({ allowHosts: ["*.com"] }, {})?.source).toBe("sandbox.allowHosts")
    expect(problem({}, { VEYYON_SANDBOX_NETWORK: "some" })?.problem).toContain("allow, none, allowlist")
  })

  it("remote doors default to auto, local ones to off", () => {
    expect(["library", "eval", "repl", "mcp"].map((door) => defaultSandboxMode(door as "eval"))).toEqual(["off", "off", "off", "off"])
    expect(defaultSandboxMode("mcp-http")).toBe("auto")
    expect(defaultSandboxMode("runner")).toBe("auto")
  })

  it("remote doors start from auto, no network, 2048 MiB and 256 pids; local doors from nothing (off, allow, no limits)", () => {
    expect(REMOTE_DOOR_DEFAULTS).toEqual({ sandbox: { mode: "auto", network: "none" }, limits: { memoryMb: 2048, pids: 256 } })
    expect(doorSandboxDefaults("mcp-http")).toBe(REMOTE_DOOR_DEFAULTS)
    expect(doorSandboxDefaults("runner")).toBe(REMOTE_DOOR_DEFAULTS)
    for (const door of ["library", "eval", "repl", "mcp"] as const) expect(doorSandboxDefaults(door)).toEqual({})
    const remote = testSettings(REMOTE_DOOR_DEFAULTS)
    expect(remote.sandbox).toMatchObject({ mode: "auto", network: "none" })
    expect(remote.limits).toEqual({ memoryMb: 2048, pids: 256, fileSizeMb: undefined })
  })

  it("VEYYON_KERNEL_PIDS and VEYYON_KERNEL_MEMORY_MB set a limit over the object's, and off lifts it", () => {
    expect(Result.getOrThrow(resolveLimits({ memoryMb: 2048, pids: 256 }, { VEYYON_KERNEL_PIDS: " 64 ", VEYYON_KERNEL_MEMORY_MB: "Off" })))
      .toEqual({ memoryMb: undefined, pids: 64, fileSizeMb: undefined })
    expect(Result.getOrThrow(resolveLimits({ memoryMb: 2048, pids: 256 }, { VEYYON_KERNEL_PIDS: "off", VEYYON_KERNEL_MEMORY_MB: "" })))
      .toEqual({ memoryMb: 2048, pids: undefined, fileSizeMb: undefined })
    const bad = resolveLimits({}, { VEYYON_KERNEL_PIDS: "-3" })
    expect(Result.isFailure(bad) && bad.failure).toEqual({
      source: "VEYYON_KERNEL_PIDS",
      problem: "\"-3\" is not a positive whole number of processes or off; fix it, or unset it."
    })
    expect(Result.isFailure(resolveLimits({}, { VEYYON_KERNEL_PIDS: "0" }))).toBe(true)
    expect(Result.isFailure(resolveLimits({}, { VEYYON_KERNEL_MEMORY_MB: "none" }))).toBe(true)
  })
})

describe("bwrap arguments", () => {
  const args = bwrapArgs({ network: "none", cwd: "/work/p", home: "/root", readOnly: ["/work/p/.venv", "/usr/lib/python3", "/missing"], readWrite: ["/work/p"], host })
  const text = args.join(" ")

  it("unshares every namespace, dies with its parent, and has its own network with none", () => {
    for (const flag of ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--unshare-net"]) expect(args).toContain(flag)
    expect(bwrapArgs({ network: "allow", cwd: "/work/p", home: "/root", readOnly: [], readWrite: [], host })).not.toContain("--unshare-net")
  })

  it("binds system dirs read-only, keeps symlinks, hides secrets, gives fresh /proc, /tmp and HOME", () => {
    expect(text).toContain("--ro-bind /usr /usr")
    expect(text).toContain("--symlink usr/bin /bin")
    expect(text).toContain("--ro-bind /dev/null /etc/shadow")
    expect(text).toContain("--tmpfs /etc/ssh")
    expect(text).toContain("--proc /proc --dev /dev --tmpfs /tmp --tmpfs /root")
  })

  it("binds the cwd read-write before a read-only path inside it, skips missing and system paths", () => {
    expect(text).toContain("--bind /work/p /work/p --ro-bind /work/p/.venv /work/p/.venv")
    expect(text).not.toContain("/missing")
    expect(text).not.toContain("/usr/lib/python3")
    expect(args.slice(-2)).toEqual(["--chdir", "/work/p"])
  })

  it("HOME is the host's path as an empty tmpfs unless a bound path holds it", () => {
    expect(sandboxHome("/root", ["/work/p"])).toBe("/root")
    expect(sandboxHome("/root", ["/root"])).toBe(FALLBACK_SANDBOX_HOME)
    expect(sandboxHome("/home/u", ["/home"])).toBe(FALLBACK_SANDBOX_HOME)
    expect(sandboxHome(undefined, [])).toBe(FALLBACK_SANDBOX_HOME)
    expect(sandboxHome("/usr/lib", [])).toBe(FALLBACK_SANDBOX_HOME)
    expect(sandboxEnv(spec.env, "/root")).toEqual({ HOME: "/root", TMPDIR: "/tmp", PATH: "/usr/bin" })
  })
})

describe("bwrap arguments, exactly", () => {
  /** A merged-/usr Debian host: /bin, /sbin, /lib and /lib64 are symlinks, no /lib32 or /libx32. */
  const debian: HostView = {
    kind: (path) =>
      ({
        "/usr": "dir", "/bin": "usr/bin", "/sbin": "usr/sbin", "/lib": "usr/lib", "/lib64": "usr/lib64", "/etc": "dir",
        "/etc/shadow": "file", "/etc/shadow-": "file", "/etc/gshadow": "file", "/etc/ssh": "dir", "/etc/sudoers": "file",
        "/etc/sudoers.d": "dir", "/usr/lib/python3": "dir", "/usrx": "dir", "/usrx/venv": "dir", "/home/u/p": "dir",
        "/home/u/p/.venv": "dir", "/srv/cache": "dir", "/etcetera": "dir"
      } as Record<string, string>)[path]
  }

  it("is this list for a kernel on a merged-/usr host, pair by pair", () => {
    expect(bwrapArgs({
      network: "none",
      cwd: "/home/u/p",
      home: "/home/u",
      readOnly: ["/home/u/p/.venv", "/usr/lib/python3", "/usrx/venv", "/srv/cache", "/etcetera", "/missing"],
      readWrite: ["/home/u/p"],
      host: debian
    })).toEqual([
      "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--unshare-net",
      "--ro-bind", "/usr", "/usr",
      "--symlink", "usr/bin", "/bin",
      "--symlink", "usr/sbin", "/sbin",
      "--symlink", "usr/lib", "/lib",
      "--symlink", "usr/lib64", "/lib64",
      "--ro-bind", "/etc", "/etc",
      "--ro-bind", "/dev/null", "/etc/shadow",
      "--ro-bind", "/dev/null", "/etc/shadow-",
      "--ro-bind", "/dev/null", "/etc/gshadow",
      "--tmpfs", "/etc/ssh",
      "--ro-bind", "/dev/null", "/etc/sudoers",
      "--tmpfs", "/etc/sudoers.d",
      "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/home/u",
      "--ro-bind", "/etcetera", "/etcetera",
      "--ro-bind", "/usrx/venv", "/usrx/venv",
      "--ro-bind", "/srv/cache", "/srv/cache",
      "--bind", "/home/u/p", "/home/u/p",
      "--ro-bind", "/home/u/p/.venv", "/home/u/p/.venv",
      "--chdir", "/home/u/p"
    ])
  })

  it("with allowlist: its own network, and the egress socket's directory read-only at its fixed place, bound last", () => {
    expect(bwrapArgs({
      network: "allowlist",
      cwd: "/home/u/p",
      home: "/home/u",
      readOnly: ["/srv/cache"],
      readWrite: ["/home/u/p"],
      host: debian,
      egressDir: "/root/.local/state/veyyon/egress/egress-Ab12"
    })).toEqual([
      "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--unshare-net",
      "--ro-bind", "/usr", "/usr",
      "--symlink", "usr/bin", "/bin",
      "--symlink", "usr/sbin", "/sbin",
      "--symlink", "usr/lib", "/lib",
      "--symlink", "usr/lib64", "/lib64",
      "--ro-bind", "/etc", "/etc",
      "--ro-bind", "/dev/null", "/etc/shadow",
      "--ro-bind", "/dev/null", "/etc/shadow-",
      "--ro-bind", "/dev/null", "/etc/gshadow",
      "--tmpfs", "/etc/ssh",
      "--ro-bind", "/dev/null", "/etc/sudoers",
      "--tmpfs", "/etc/sudoers.d",
      "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/home/u",
      "--ro-bind", "/srv/cache", "/srv/cache",
      "--bind", "/home/u/p", "/home/u/p",
      "--ro-bind", "/root/.local/state/veyyon/egress/egress-Ab12", "/run/veyyon-egress",
      "--chdir", "/home/u/p"
    ])
    expect(EGRESS_SANDBOX_DIR).toBe("/run/veyyon-egress")
    const withoutDir = bwrapArgs({ network: "allowlist", cwd: "/w", home: "/h", readOnly: [], readWrite: [], host: debian })
    expect(withoutDir).toContain("--unshare-net")
    expect(withoutDir).not.toContain(EGRESS_SANDBOX_DIR)
    const notAllowlist = bwrapArgs({ network: "none", cwd: "/w", home: "/h", readOnly: [], readWrite: [], host: debian, egressDir: "/e" })
    expect(notAllowlist).not.toContain("/e")
  })

  it("the egress environment replaces the host's proxies in every case and points every client at the forwarder", () => {
    expect(egressEnv({
      PATH: "/usr/bin", Http_Proxy: "http://corp:8080", Https_Proxy: "x", All_Proxy: "a", No_Proxy: "corp", PIP_PROXY: "p", ftp_proxy: "f", PIP_INDEX_URL: "i"
    }))
      .toEqual({
        PATH: "/usr/bin",
        PIP_INDEX_URL: "i",
        HTTP_PROXY: "http://127.0.0.1:3128",
        HTTPS_PROXY: "http://127.0.0.1:3128",
        ALL_PROXY: "http://127.0.0.1:3128",
        http_proxy: "http://127.0.0.1:3128",
        https_proxy: "http://127.0.0.1:3128",
        all_proxy: "http://127.0.0.1:3128",
        NO_PROXY: "localhost,127.0.0.1,::1",
        no_proxy: "localhost,127.0.0.1,::1",
        NODE_USE_ENV_PROXY: "1",
        NODE_OPTIONS: "--disable-warning=UNDICI-EHPA",
        VEYYON_EGRESS_SOCKET: "/run/veyyon-egress/egress.sock",
        VEYYON_EGRESS_PORT: "3128"
      })
  })

  it("a system directory that is a plain file is left out, like a missing one", () => {
    const odd: HostView = { kind: (path) => ({ "/usr": "dir", "/lib32": "file" } as Record<string, string>)[path] }
    const args = bwrapArgs({ network: "allow", cwd: "/w", home: "/h", readOnly: [], readWrite: [], host: odd })
    expect(args.slice(6, 9)).toEqual(["--ro-bind", "/usr", "/usr"])
    expect(args).not.toContain("/lib32")
  })

  it("the real host view tells directories, files, symlinks (by target) and missing paths apart", () => {
    const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "veyyon-hostview-"))
    try {
      NodeFs.writeFileSync(NodePath.join(dir, "f"), "")
      NodeFs.symlinkSync("f", NodePath.join(dir, "l"))
      expect(["", "/f", "/l", "/none"].map((name) => realHost.kind(dir + name))).toEqual(["dir", "file", "f", undefined])
    } finally {
      NodeFs.rmSync(dir, { recursive: true, force: true })
    }
  })

  it("HOME falls back to its own path for / and relative paths", () => {
    expect(FALLBACK_SANDBOX_HOME).toBe("/run/veyyon-home")
    expect(sandboxHome("/", [])).toBe(FALLBACK_SANDBOX_HOME)
    expect(sandboxHome("home/u", [])).toBe(FALLBACK_SANDBOX_HOME)
  })

  it("a V8 heap cap only for a heap-limited backend with a memory limit", () => {
    const limits = { memoryMb: 64, pids: undefined, fileSizeMb: undefined }
    expect(withHeapLimit(spec, "address-space", limits)).toBe(spec)
    expect(withHeapLimit(spec, "heap", noLimits)).toBe(spec)
    expect(withHeapLimit(spec, "heap", limits).args).toEqual(["--max-old-space-size=64", "-u", "boot.py"])
  })

  it("a HOME beside a bound path, not inside it, stays the host's path", () => {
    expect(sandboxHome("/home/user2", ["/home/u"])).toBe("/home/user2")
    expect(sandboxHome("/usrx/home", [])).toBe("/usrx/home")
    expect(sandboxHome("/home/u/", ["/home/u/"])).toBe(FALLBACK_SANDBOX_HOME)
  })
})

describe("limits", () => {
  it("Python gets RLIMIT_AS and RLIMIT_FSIZE from prlimit; Node gets a heap flag instead of RLIMIT_AS", () => {
    const limits = { memoryMb: 512, pids: 64, fileSizeMb: 10 }
    expect(withRlimits(spec, "address-space", limits, "/usr/bin/prlimit")).toEqual({
      ...spec,
      command: "/usr/bin/prlimit",
      args: [`--as=${512 * 1024 * 1024}`, `--fsize=${10 * 1024 * 1024}`, "--", "/usr/bin/python3", "-u", "boot.py"],
      pidsMax: 64
    })
    const js = { ...spec, command: "/usr/bin/node", args: ["runner.mjs"] }
    expect(withHeapLimit(js, "heap", limits).args).toEqual(["--max-old-space-size=512", "runner.mjs"])
    expect(withRlimits(js, "heap", { ...limits, fileSizeMb: undefined }, "prlimit")).toEqual({ ...js, pidsMax: 64 })
    expect(withRlimits(spec, "address-space", noLimits, "prlimit")).toBe(spec)
  })

  it("inside the sandbox's user namespace the pids cap is also RLIMIT_NPROC (there it counts that namespace alone)", () => {
    const limits = { memoryMb: undefined, pids: 64, fileSizeMb: undefined }
    expect(withRlimits(spec, "address-space", limits, "/usr/bin/prlimit", { nproc: true })).toEqual({
      ...spec,
      command: "/usr/bin/prlimit",
      args: ["--nproc=64", "--", "/usr/bin/python3", "-u", "boot.py"],
      pidsMax: 64
    })
    expect(withRlimits(spec, "address-space", limits, "/usr/bin/prlimit")).toEqual({ ...spec, pidsMax: 64 })
    expect(withRlimits(spec, "address-space", noLimits, "/usr/bin/prlimit", { nproc: true })).toBe(spec)
  })

  it.effect("a sandboxed spawn runs bwrap, then prlimit inside it, then the kernel", () =>
    Effect.gen(function*() {
      const sandbox = yield* makeSandbox(
        { mode: "required", network: "none", allowHosts: { rules: [] }, readPaths: [], writePaths: [] },
        { memoryMb: 512, pids: 64, fileSizeMb: undefined },
        { bwrap: "/bin/true", prlimit: "/bin/true" }
      )
      const probed = yield* sandbox.probe
      expect(probed.works).toBe(true)
      const confined = (yield* sandbox.confine({ memoryLimit: "address-space", readOnly: [], readWrite: ["/work/p"] })).apply(spec)
      expect(confined.command).toBe("/bin/true")
      const inner = confined.args.slice(confined.args.indexOf("--") + 1)
      expect(inner).toEqual(["/bin/true", `--as=${512 * 1024 * 1024}`, "--nproc=64", "--", "/usr/bin/python3", "-u", "boot.py"])
      expect(confined).toMatchObject({ sandboxed: true, pidsMax: 64 })
    }))
})

describe("sandbox modes without bwrap", () => {
  const settings = (mode: "off" | "auto" | "required") => ({ mode, network: "allow" as const, allowHosts: { rules: [] }, readPaths: [], writePaths: [] })
  const request = { memoryLimit: "address-space" as const, readOnly: [], readWrite: ["/work/p"] }

  it.effect("required fails with SandboxUnavailable; auto and off spawn unsandboxed", () =>
    Effect.gen(function*() {
      const tools = { bwrap: "/nonexistent/bwrap" }
      const required = yield* Effect.flatMap(makeSandbox(settings("required"), noLimits, tools), (s) => s.confine(request)).pipe(Effect.exit)
      expect(Exit.isFailure(required)).toBe(true)
      expect(JSON.stringify(required)).toContain("SandboxUnavailable")
      for (const mode of ["auto", "off"] as const) {
        const confinement = yield* Effect.flatMap(makeSandbox(settings(mode), noLimits, tools), (s) => s.confine(request))
        expect(confinement.sandboxed).toBe(false)
        expect(confinement.apply(spec)).toBe(spec)
      }
    }))

  it.effect("allowlist refuses to run without the sandbox in every mode, naming the network setting", () =>
    Effect.gen(function*() {
      const allowHosts = Result.getOrThrow(parseAllowHosts(["pypi.org"]))
      for (const mode of ["auto", "required", "off"] as const) {
        const sandbox = yield* makeSandbox({ ...settings(mode), network: "allowlist", allowHosts }, noLimits, { bwrap: "/nonexistent/bwrap" })
        const exit = yield* Effect.exit(sandbox.confine(request))
        expect(Exit.isFailure(exit) && exit.cause.reasons[0]?._tag === "Fail" && exit.cause.reasons[0].error).toMatchObject({
          _tag: "SandboxUnavailable",
          byAllowlist: true,
          message: expect.stringContaining("sandbox.network is allowlist (VEYYON_SANDBOX_NETWORK=allowlist), which needs the sandbox")
        })
      }
    }))

  it.effect("a sandboxed allowlist kernel gets the egress binding and environment; none and allow do not", () =>
    Effect.gen(function*() {
      const allowHosts = Result.getOrThrow(parseAllowHosts(["pypi.org"]))
      const sandbox = yield* makeSandbox({ ...settings("required"), network: "allowlist", allowHosts }, noLimits, { bwrap: "/bin/true", prlimit: "/bin/true" })
      const confined = (yield* sandbox.confine({ ...request, egressDir: "/state/egress-x" })).apply(spec)
      expect(confined.args.join(" ")).toContain("--ro-bind /state/egress-x /run/veyyon-egress")
      expect(confined.env).toMatchObject({ VEYYON_EGRESS_SOCKET: "/run/veyyon-egress/egress.sock", HTTPS_PROXY: "http://127.0.0.1:3128" })
      const none = yield* makeSandbox({ ...settings("required"), network: "none" }, noLimits, { bwrap: "/bin/true", prlimit: "/bin/true" })
      const closed = (yield* none.confine({ ...request, egressDir: "/state/egress-x" })).apply(spec)
      expect(closed.args).toContain("--unshare-net")
      expect(closed.args.join(" ")).not.toContain("/run/veyyon-egress")
      expect(closed.env.VEYYON_EGRESS_SOCKET).toBeUndefined()
      expect(closed.env.HTTPS_PROXY).toBeUndefined()
    }))

  it.effect("auto says once that it runs kernels unsandboxed", () =>
    Effect.gen(function*() {
      const said: Array<string> = []
      const logger = Logger.make(({ message }) => said.push(String(message)))
      const sandbox = yield* makeSandbox(settings("auto"), noLimits, { bwrap: "/nonexistent/bwrap" })
      yield* sandbox.confine(request).pipe(Effect.andThen(sandbox.confine(request)), Effect.provide(Logger.layer([logger])))
      expect(said).toHaveLength(1)
      expect(said[0]).toContain("kernels run unsandboxed")
    }))
})
