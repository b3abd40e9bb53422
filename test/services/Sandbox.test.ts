import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Exit, Logger } from "effect"
import type { SpawnSpec } from "../../src/kernel/KernelProcess.ts"
import {
  bwrapArgs,
  FALLBACK_SANDBOX_HOME,
  type HostView,
  makeSandbox,
  sandboxEnv,
  sandboxHome,
  withHeapLimit,
  withRlimits
} from "../../src/services/Sandbox.ts"
import { defaultSandboxMode, resolveLimits, resolveSandbox } from "../../src/services/SandboxSettings.ts"
import { testSettings } from "../support/settings.ts"

const host: HostView = {
  kind: (path) =>
    ({ "/usr": "dir", "/bin": "usr/bin", "/etc": "dir", "/etc/shadow": "file", "/etc/ssh": "dir", "/work/p": "dir", "/work/p/.venv": "dir", "/opt/py": "dir" } as Record<string, string>)[path]
}

const spec: SpawnSpec = { command: "/usr/bin/python3", args: ["-u", "boot.py"], cwd: "/work/p", env: { HOME: "/root", TMP: "/x", PATH: "/usr/bin" } }
const noLimits = { memoryMb: undefined, pids: undefined, fileSizeMb: undefined }

describe("sandbox settings", () => {
  it("default off, allow and no limits; env overrides the object; bad values are refused", () => {
    expect(testSettings().sandbox).toEqual({ mode: "off", network: "allow", readPaths: [], writePaths: [] })
    expect(testSettings().limits).toEqual(noLimits)
    expect(Either.getOrThrow(resolveSandbox({ mode: "auto" }, { VEYYON_SANDBOX: " Required ", VEYYON_SANDBOX_NETWORK: "none" })))
      .toMatchObject({ mode: "required", network: "none" })
    expect(Either.getOrThrow(resolveLimits({ memoryMb: 100, pids: 5 }, { VEYYON_KERNEL_MEMORY_MB: "256" })))
      .toEqual({ memoryMb: 256, pids: 5, fileSizeMb: undefined })
    expect(Either.isLeft(resolveSandbox({}, { VEYYON_SANDBOX: "yes" }))).toBe(true)
    expect(Either.isLeft(resolveLimits({}, { VEYYON_KERNEL_MEMORY_MB: "1.5" }))).toBe(true)
  })

  it("remote doors default to auto, local ones to off", () => {
    expect(["library", "eval", "repl", "mcp"].map((door) => defaultSandboxMode(door as "eval"))).toEqual(["off", "off", "off", "off"])
    expect(defaultSandboxMode("mcp-http")).toBe("auto")
    expect(defaultSandboxMode("runner")).toBe("auto")
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
})

describe("sandbox modes without bwrap", () => {
  const settings = (mode: "off" | "auto" | "required") => ({ mode, network: "allow" as const, readPaths: [], writePaths: [] })
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

  it.effect("auto says once that it runs kernels unsandboxed", () =>
    Effect.gen(function*() {
      const said: Array<string> = []
      const logger = Logger.make(({ message }) => said.push(String(message)))
      const sandbox = yield* makeSandbox(settings("auto"), noLimits, { bwrap: "/nonexistent/bwrap" })
      yield* sandbox.confine(request).pipe(Effect.zipRight(sandbox.confine(request)), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      expect(said).toHaveLength(1)
      expect(said[0]).toContain("kernels run unsandboxed")
    }))
})
