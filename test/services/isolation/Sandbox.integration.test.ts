/**
 * The sandbox and whole-tree containment against real processes: what a sandboxed cell
 * can see and reach, interrupts inside it, memory limits, `required` without bwrap, and
 * that a setsid'd, double-forked process a cell started ends with its kernel (normal
 * shutdown and host SIGKILL) in both modes.
 */
import { spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import { evalLayer } from "../../../src/layers/EvalLive.ts"
import { EvalTool } from "../../../src/services/tool/EvalTool.ts"
import type { SettingsInput } from "../../../src/services/config/Settings.ts"
import { cliEntry } from "../../cli/support.ts"
import { isRunning, waitUntil } from "../../support/process.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"
import { tempDir } from "../../support/tempDirs.ts"

const root = path.resolve(import.meta.dirname, "../../..")
const python = findPython()
const scratch = tempDir("veyyon-sandbox-test-")
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

const bwrapProblem = (): string | undefined => {
  const probe = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"], { encoding: "utf8" })
  if (probe.error !== undefined) return `bwrap is not installed (${probe.error.message})`
  return probe.status === 0 ? undefined : `bwrap cannot create namespaces here: ${probe.stderr.trim()}`
}
const noBwrap = bwrapProblem()
const enabled = integrationEnabled() && python !== undefined
const notEnabled = skipReason(integrationOff(), python === undefined && "no python3 found")
const notSandboxed = skipReason(notEnabled, noBwrap)

let runtimes = 0
/** A runtime of its own install (its own artifacts, so no session's saved state reaches another runtime's kernels). */
const runtimeWith = (settings: SettingsInput) =>
  ManagedRuntime.make(evalLayer({
    env: false,
    settings: { artifactsDir: path.join(scratch, `artifacts-${++runtimes}`), python: { interpreter: python! }, ...settings }
  }))

const runner = (runtime: ReturnType<typeof runtimeWith>, cwd: string) => (params: unknown, sessionId = "s") =>
  runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run(params, { sessionId, cwd })))

const freshDir = (name: string) => fs.mkdtempSync(path.join(scratch, `${name}-`))

const sleepersWith = (marker: string): ReadonlyArray<number> =>
  fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).flatMap((pid) => {
    try {
      const argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")
      return argv[0]?.endsWith("sleep") === true && argv[1] === marker ? [Number(pid)] : []
    } catch {
      return []
    }
  })

const setsidCell = (marker: string) => ({
  language: "py",
  code: `import subprocess\nsubprocess.run(["sh", "-c", "setsid sleep ${marker} </dev/null >/dev/null 2>&1 &"])\nprint("started")`
})

let markerSeed = 4000 + Math.floor(Math.random() * 1000)
const nextMarker = () => String(markerSeed++)

describe.skipIf(!enabled || noBwrap !== undefined)(titled("sandboxed kernels", notSandboxed), () => {
  const home = freshDir("home")
  fs.writeFileSync(path.join(home, "secret.txt"), "host secret")
  const savedHome = process.env.HOME
  process.env.HOME = home
  afterAll(() => {
    process.env.HOME = savedHome
  })
  const cwd = freshDir("cwd")
  const runtime = runtimeWith({ sandbox: { mode: "required" } })
  afterAll(() => runtime.dispose())
  const run = runner(runtime, cwd)

  it("sees an empty HOME (but for the read-only runner cache below it), read-only system dirs and session state, a writable cwd", async () => {
    const result = await run({
      language: "py",
      code: [
        "import os, json",
        "def attempt(path):",
        "    try:",
        "        with open(path, 'w') as f: f.write('x')",
        "        return 'written'",
        "    except OSError as e:",
        "        return type(e).__name__",
        "print(json.dumps({",
        "  'home': os.environ['HOME'], 'homeList': sorted(os.path.relpath(os.path.join(d, n), os.environ['HOME']) for d, ds, fs in os.walk(os.environ['HOME']) for n in fs),",
        `  'secret': os.path.exists(${JSON.stringify(path.join(home, "secret.txt"))}),`,
        "  'usr': attempt('/usr/veyyon-test'), 'etc': attempt('/etc/veyyon-test'),",
        "  'session': attempt(os.path.join(os.environ['VEYYON_ARTIFACTS_DIR'], 'planted')),",
        "  'cwd': attempt('made-inside.txt'),",
        "}))"
      ].join("\n")
    })
    expect(result.status).toBe("ok")
    const seen = JSON.parse(result.text)
    expect(seen).toMatchObject({ home, secret: false, cwd: "written" })
    expect(seen.homeList.filter((name: string) => !name.startsWith(path.join(".cache", "veyyon", "runner") + path.sep))).toEqual([])
    expect(seen.usr).not.toBe("written")
    expect(seen.etc).not.toBe("written")
    expect(seen.session).not.toBe("written")
    expect(fs.readFileSync(path.join(cwd, "made-inside.txt"), "utf8")).toBe("x")
    expect(fs.existsSync("/usr/veyyon-test")).toBe(false)
  })

  it("has a /proc without the host's processes: the host's environ is unreachable", async () => {
    const result = await run({
      language: "py",
      code: [
        "import os",
        "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())",
        "try:",
        `    open('/proc/${process.pid}/environ', 'rb').read(); host = 'readable'`,
        "except OSError:",
        "    host = 'unreachable'",
        "print(len(pids) < 10, os.getpid() < 10, host)"
      ].join("\n")
    })
    expect(result.text).toBe("True True unreachable")
  })

  it("SIGINT reaches the Python interpreter inside: a timed-out cell is interrupted and state kept", async () => {
    await run({ language: "py", code: "kept = 41" })
    const result = await run({ language: "py", code: "import time\ntime.sleep(60)", timeout: 1 })
    expect(result).toMatchObject({ cancelled: true, timedOut: true, killed: false })
    expect(result.text).toContain("KeyboardInterrupt")
    expect((await run({ language: "py", code: "kept + 1" })).text).toBe("42")
  }, 60_000)

  it("JavaScript kernels run inside on their fd 3 channel and are interrupted too", async () => {
    await run({ language: "js", code: "globalThis.kept = 41" })
    const inside = await run({ language: "js", code: "require('fs').readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).length < 10" })
    expect(inside.text).toBe("true")
    const result = await run({ language: "js", code: "await new Promise((resolve) => setTimeout(resolve, 60000))", timeout: 1 })
    expect(result).toMatchObject({ cancelled: true, timedOut: true, killed: false })
    expect((await run({ language: "js", code: "kept + 1" })).text).toBe("42")
  }, 60_000)

  it("a runner cache only sandboxed kernels use still gets the compiled runner (written outside the sandbox)", async () => {
    const tmp = freshDir("cachehome")
    const saved = process.env.XDG_CACHE_HOME
    process.env.XDG_CACHE_HOME = tmp
    const own = runtimeWith({ sandbox: { mode: "required" } })
    try {
      expect((await runner(own, cwd)({ language: "py", code: "1 + 1" })).text).toBe("2")
      if (saved === undefined) delete process.env.XDG_CACHE_HOME
      else process.env.XDG_CACHE_HOME = saved
      const cached = fs.readdirSync(tmp, { recursive: true }).map(String)
      expect(cached.some((name) => /_veyyon_runner\/server\.[^/]+\.pyc$/.test(name))).toBe(true)
    } finally {
      if (saved === undefined) delete process.env.XDG_CACHE_HOME
      else process.env.XDG_CACHE_HOME = saved
      await own.dispose()
    }
  }, 60_000)

  it("a setsid'd, double-forked process ends when its kernel shuts down", async () => {
    const marker = nextMarker()
    const own = runtimeWith({ sandbox: { mode: "required" } })
    try {
      expect((await runner(own, cwd)(setsidCell(marker))).text).toBe("started")
      expect(await waitUntil(() => sleepersWith(marker).length === 1, 10_000)).toBe(true)
      await own.dispose()
      expect(await waitUntil(() => sleepersWith(marker).length === 0, 10_000)).toBe(true)
    } finally {
      await own.dispose()
      for (const pid of sleepersWith(marker)) process.kill(pid, "SIGKILL")
    }
  }, 60_000)
})

describe.skipIf(!enabled || noBwrap !== undefined)(titled("network policy", notSandboxed), () => {
  const server = net.createServer((socket) => socket.end("hello"))
  const listening = new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)))
  afterAll(() => server.close())
  const connect = (port: number) => ({
    language: "py",
    code: `import socket\ntry:\n    print(socket.create_connection(('127.0.0.1', ${port}), 5).recv(5).decode())\nexcept OSError as e:\n    print(type(e).__name__)`
  })

  for (const network of ["allow", "none"] as const) {
    it(`network ${network}: the host's loopback is ${network === "allow" ? "reachable" : "not reachable"}`, async () => {
      const runtime = runtimeWith({ sandbox: { mode: "required", network } })
      try {
        const text = (await runner(runtime, freshDir("net"))(connect(await listening))).text
        if (network === "allow") expect(text).toBe("hello")
        else expect(text).not.toBe("hello")
      } finally {
        await runtime.dispose()
      }
    }, 60_000)
  }
})

describe.skipIf(!enabled)(titled("kernel limits", notEnabled), () => {
  for (const mode of ["off", "required"] as const) {
    it.skipIf(mode === "required" && noBwrap !== undefined)(titled(`memoryMb (${mode}): an allocation past it raises MemoryError and the kernel lives`, mode === "required" ? noBwrap : undefined), async () => {
      const runtime = runtimeWith({ sandbox: { mode }, limits: { memoryMb: 512 } })
      const run = runner(runtime, freshDir("mem"))
      try {
        await run({ language: "py", code: "kept = 41" })
        const result = await run({ language: "py", code: "block = bytearray(2 * 1024 ** 3)" })
        expect(result.status).toBe("error")
        expect(result.error?.ename).toBe("MemoryError")
        expect((await run({ language: "py", code: "kept + 1" })).text).toBe("42")
      } finally {
        await runtime.dispose()
      }
    }, 60_000)
  }

  it("fileSizeMb: writing past it fails in the cell and the kernel lives", async () => {
    const runtime = runtimeWith({ limits: { fileSizeMb: 1 } })
    const run = runner(runtime, freshDir("fsize"))
    try {
      const result = await run({ language: "py", code: "open('big.bin', 'wb').write(b'x' * (2 * 1024 * 1024))" })
      expect(result.status).toBe("error")
      expect(result.text).toContain("File too large")
      expect((await run({ language: "py", code: "1 + 1" })).text).toBe("2")
      const js = await run({ language: "js", code: "require('fs').writeFileSync('big.js.bin', Buffer.alloc(2 * 1024 * 1024))" })
      expect(js.status).toBe("error")
      expect(js.text).toContain("EFBIG")
      expect((await run({ language: "js", code: "1 + 1" })).text).toBe("2")
    } finally {
      await runtime.dispose()
    }
  }, 60_000)

  it("pids: a cell cannot start more processes than the limit", async () => {
    const runtime = runtimeWith({ limits: { pids: 8 } })
    const run = runner(runtime, freshDir("pids"))
    try {
      const result = await run({
        language: "py",
        code: [
          "import subprocess",
          "procs, failed = [], None",
          "for _ in range(40):",
          "    try:",
          "        procs.append(subprocess.Popen(['sleep', '30']))",
          "    except OSError as e:",
          "        failed = type(e).__name__; break",
          "for p in procs: p.kill(); p.wait()",
          "print(len(procs) < 40, failed)"
        ].join("\n")
      })
      expect(result.text).toMatch(/^True (BlockingIOError|OSError|PermissionError)$/)
    } finally {
      await runtime.dispose()
    }
  }, 60_000)
})

describe.skipIf(!enabled)(titled("required without bwrap", notEnabled), () => {
  it("the CLI exits 3 with a sentence naming the fix", () => {
    const result = spawnSync(cliEntry.command, [...cliEntry.args, "eval", "1 + 1"], {
      cwd: freshDir("cli"),
      env: { ...process.env, PATH: "/nonexistent", VEYYON_SANDBOX: "required", VEYYON_PYTHON_INTERPRETER: python! },
      encoding: "utf8",
      timeout: 60_000
    })
    expect(result.status).toBe(3)
    expect(result.stderr).toContain("the sandbox is required")
    expect(result.stderr).toContain("bubblewrap")
  }, 60_000)
})

describe.skipIf(!enabled)(titled("whole-tree containment", notEnabled), () => {
  for (const mode of ["off", "required"] as const) {
    it.skipIf(mode === "required" && noBwrap !== undefined)(titled(`(${mode}) a setsid'd process ends after normal shutdown`, mode === "required" ? noBwrap : undefined), async () => {
      const marker = nextMarker()
      const runtime = runtimeWith({ sandbox: { mode } })
      try {
        expect((await runner(runtime, freshDir("tree"))(setsidCell(marker))).text).toBe("started")
        expect(await waitUntil(() => sleepersWith(marker).length === 1, 10_000)).toBe(true)
        await runtime.dispose()
        expect(await waitUntil(() => sleepersWith(marker).length === 0, 10_000)).toBe(true)
      } finally {
        await runtime.dispose()
        for (const pid of sleepersWith(marker)) process.kill(pid, "SIGKILL")
      }
    }, 60_000)

    it.skipIf(mode === "required" && noBwrap !== undefined)(titled(`(${mode}) a setsid'd process ends after the host is killed with SIGKILL`, mode === "required" ? noBwrap : undefined), async () => {
      const marker = nextMarker()
      const host = spawn(process.execPath, ["--import", "tsx", "test/fixtures/hold-setsid.ts", marker], {
        cwd: root,
        env: { ...process.env, VEYYON_SANDBOX: mode, VEYYON_PYTHON_INTERPRETER: python!, VEYYON_ARTIFACTS_DIR: path.join(scratch, "host") },
        stdio: ["ignore", "pipe", "inherit"]
      })
      try {
        await new Promise<void>((resolve, reject) => {
          let out = ""
          host.stdout!.on("data", (chunk: Buffer) => {
            out += chunk.toString()
            if (out.includes("ready")) resolve()
          })
          host.on("exit", () => reject(new Error(`host exited early: ${out}`)))
        })
        expect(await waitUntil(() => sleepersWith(marker).length === 1, 10_000)).toBe(true)
        host.kill("SIGKILL")
        expect(await waitUntil(() => sleepersWith(marker).length === 0, 20_000)).toBe(true)
      } finally {
        host.kill("SIGKILL")
        for (const pid of sleepersWith(marker)) if (isRunning(pid)) process.kill(pid, "SIGKILL")
      }
    }, 60_000)
  }
})

