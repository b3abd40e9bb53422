import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { type Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type EnvRecord } from "../../../src/services/isolation/EnvPolicy.ts"
import {
  commandInspector,
  formatPythonVersion,
  isSupportedPythonVersion,
  PYTHON_FIXED_ENV,
  makePythonRuntime,
  nodeFileProbe,
  parseInspection,
  PythonRuntime,
  PythonUnavailable
} from "../../../src/backends/python/PythonRuntime.ts"
import { backendSettingsOf, Settings, type SettingsInput } from "../../../src/services/config/Settings.ts"
import { isScript } from "../../../src/backends/Backend.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-runtime-test-"))
  roots.push(dir)
  return fs.realpathSync(dir)
}

interface FakePython {
  /** What the fake reports as `sys.executable`; defaults to its own path. */
  readonly reports?: string | null
  readonly version?: readonly [number, number, number]
  /** File that gets one line appended per run. */
  readonly counter?: string
  /** File the fake writes its environment to. */
  readonly envDump?: string
  /** Replaces the normal answer. */
  readonly body?: string
}

/** Writes a shell script that answers the inspection the way a real interpreter would. */
const writeFakePython = (file: string, fake: FakePython = {}): string => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const reports = fake.reports === undefined ? JSON.stringify(file) : JSON.stringify(fake.reports)
  const version = (fake.version ?? [3, 11, 7]).join(", ")
  const lines = ["#!/bin/sh"]
  if (fake.counter !== undefined) lines.push(`echo run >> '${fake.counter}'`)
  if (fake.envDump !== undefined) lines.push(`env > '${fake.envDump}'`)
  lines.push(fake.body ?? `echo '{"executable": ${reports}, "version": [${version}]}'`)
  fs.writeFileSync(file, lines.join("\n") + "\n", { mode: 0o755 })
  return file
}

/** Absolute, because the fakes run with the filtered env, often without a PATH. */
const SLEEP = ["/bin/sleep", "/usr/bin/sleep"].find((file) => fs.existsSync(file)) ?? "sleep"

const runs = (counter: string): number =>
  fs.existsSync(counter) ? fs.readFileSync(counter, "utf8").split("\n").filter(Boolean).length : 0

interface Setup {
  readonly env?: EnvRecord
  readonly home?: string
  readonly settings?: SettingsInput
  readonly timeout?: Duration.Input
}

const runtime = (setup: Setup = {}) =>
  Effect.gen(function*() {
    const own = backendSettingsOf(yield* Settings, "py")
    const rt = yield* makePythonRuntime({
      env: setup.env ?? {},
      homeDir: setup.home ?? tempDir(),
      platform: process.platform,
      probe: nodeFileProbe(),
      inspect: commandInspector(setup.timeout ?? "10 seconds")
    })
    return { resolve: (cwd: string) => rt.resolve(cwd, own), locate: (cwd: string) => rt.locate(cwd, own), kernelEnv: rt.kernelEnv }
  }).pipe(Effect.provide([Settings.layer(setup.settings ?? {}), NodeServices.layer]))

const unavailable = (error: unknown): PythonUnavailable => {
  expect(error).toBeInstanceOf(PythonUnavailable)
  return error as PythonUnavailable
}

describe("version rules", () => {
  it("accepts 3.8 and newer only", () => {
    expect(isSupportedPythonVersion({ major: 3, minor: 8, micro: 0 })).toBe(true)
    expect(isSupportedPythonVersion({ major: 3, minor: 13, micro: 1 })).toBe(true)
    expect(isSupportedPythonVersion({ major: 4, minor: 0, micro: 0 })).toBe(true)
    expect(isSupportedPythonVersion({ major: 3, minor: 7, micro: 17 })).toBe(false)
    expect(isSupportedPythonVersion({ major: 2, minor: 7, micro: 18 })).toBe(false)
    expect(formatPythonVersion({ major: 3, minor: 12, micro: 4 })).toBe("3.12.4")
  })

  it("parses the last line that decodes and falls back to the candidate for an empty sys.executable", () => {
    expect(parseInspection('noise\n{"executable": "/r/python", "version": [3, 9, 1]}\n', "/c")).toEqual({
      executable: "/r/python",
      version: { major: 3, minor: 9, micro: 1 }
    })
    expect(parseInspection('{"executable": "", "version": [3, 9, 1]}', "/c")?.executable).toBe("/c")
    expect(parseInspection('{"executable": null, "version": [3, 9, 1]}', "/c")?.executable).toBe("/c")
    expect(parseInspection("Python 3.9.1", "/c")).toBeUndefined()
    expect(parseInspection('{"executable": "/r", "version": [3]}', "/c")).toBeUndefined()
  })
})

describe("the Python runner's fixed variables", () => {
  it("make its streams unbuffered and UTF-8", () => {
    expect(PYTHON_FIXED_ENV).toEqual({ PYTHONUNBUFFERED: "1", PYTHONIOENCODING: "utf-8" })
  })
})

describe.skipIf(process.platform === "win32")("PythonRuntime with fake interpreters", () => {
  it.effect("picks <cwd>/.venv, runs it once and reports the rule, version and bin dir", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const python = writeFakePython(path.join(cwd, ".venv", "bin", "python"), { version: [3, 12, 4] })
      const rt = yield* runtime({ env: { PATH: "/nonexistent" } })
      const found = yield* rt.resolve(cwd)
      expect(found).toEqual({
        executable: python,
        foundAt: python,
        rule: ".venv",
        venvBin: path.join(cwd, ".venv", "bin"),
        version: { major: 3, minor: 12, micro: 4 },
        checked: true,
        skipped: [
          { rule: "VIRTUAL_ENV", target: undefined, outcome: "unset" },
          { rule: "CONDA_PREFIX", target: undefined, outcome: "unset" }
        ]
      })
    }))

  it.effect("resolves a shim on PATH to the real executable once, then reuses the answer", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cwd = tempDir()
      const counter = path.join(root, "shim-runs")
      const real = writeFakePython(path.join(root, "versions", "3.11.7", "bin", "python3.11"))
      writeFakePython(path.join(root, "shims", "python3"), { reports: real, counter })
      const rt = yield* runtime({ env: { PATH: path.join(root, "shims") } })
      const first = yield* rt.resolve(cwd)
      const second = yield* rt.resolve(cwd)
      expect(first.rule).toBe("PATH")
      expect(first.foundAt).toBe(path.join(root, "shims", "python3"))
      expect(first.executable).toBe(real)
      expect(second).toEqual(first)
      expect(runs(counter)).toBe(1)
    }))

  it.effect("asks a shim again in another cwd, since shims pick versions per directory", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const counter = path.join(root, "shim-runs")
      writeFakePython(path.join(root, "shims", "python3"), { counter })
      const rt = yield* runtime({ env: { PATH: path.join(root, "shims") } })
      yield* rt.resolve(tempDir())
      yield* rt.resolve(tempDir())
      expect(runs(counter)).toBe(2)
    }))

  it.effect("runs the check once when many callers resolve at the same time", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const counter = path.join(root, "runs")
      writeFakePython(path.join(root, "bin", "python3"), { counter, body: `${SLEEP} 0.3; echo '{"executable": null, "version": [3, 10, 0]}'` })
      const rt = yield* runtime({ env: { PATH: path.join(root, "bin") } })
      const results = yield* Effect.all(Array.from({ length: 8 }, () => rt.resolve(root)), { concurrency: "unbounded" })
      expect(new Set(results.map((r) => r.executable)).size).toBe(1)
      expect(runs(counter)).toBe(1)
    }))

  it.effect("keeps the found path when the reported executable does not exist", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const python = writeFakePython(path.join(cwd, "venv", "bin", "python"), { reports: "/no/such/python" })
      const rt = yield* runtime()
      expect((yield* rt.resolve(cwd)).executable).toBe(python)
    }))

  it.effect("passes over a VIRTUAL_ENV without a python and records it", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const staleVenv = tempDir()
      writeFakePython(path.join(cwd, ".venv", "bin", "python"))
      const rt = yield* runtime({ env: { VIRTUAL_ENV: staleVenv } })
      const found = yield* rt.resolve(cwd)
      expect(found.rule).toBe(".venv")
      expect(found.skipped[0]).toEqual({
        rule: "VIRTUAL_ENV",
        target: path.join(staleVenv, "bin", "python"),
        outcome: "missing"
      })
    }))

  it.effect("prefers VIRTUAL_ENV, then CONDA_PREFIX, over the cwd venvs", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const active = tempDir()
      const conda = tempDir()
      writeFakePython(path.join(cwd, ".venv", "bin", "python"))
      writeFakePython(path.join(conda, "bin", "python"))
      const viaConda = yield* (yield* runtime({ env: { CONDA_PREFIX: conda } })).resolve(cwd)
      expect(viaConda.rule).toBe("CONDA_PREFIX")
      writeFakePython(path.join(active, "bin", "python"))
      const viaVenv = yield* (yield* runtime({ env: { VIRTUAL_ENV: active, CONDA_PREFIX: conda } })).resolve(cwd)
      expect(viaVenv).toMatchObject({ rule: "VIRTUAL_ENV", venvBin: path.join(active, "bin") })
    }))

  it.effect("uses the managed venv under the home dir before PATH", () =>
    Effect.gen(function*() {
      const home = tempDir()
      const bin = tempDir()
      writeFakePython(path.join(bin, "python3"))
      const managed = writeFakePython(path.join(home, ".veyyon", "python-env", "bin", "python"))
      const found = yield* (yield* runtime({ home, env: { PATH: bin } })).resolve(tempDir())
      expect(found).toMatchObject({ rule: "managed", executable: managed })
    }))

  it.effect("passes over a non-executable python file", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const file = writeFakePython(path.join(cwd, ".venv", "bin", "python"))
      fs.chmodSync(file, 0o644)
      const error = unavailable(yield* Effect.flip((yield* runtime()).resolve(cwd)))
      expect(error.reason).toBe("not-found")
      expect(error.message).toContain(`<cwd>/.venv: ${file} is not an executable file`)
    }))

  it.effect("says what was tried and how to fix it when nothing is found and PATH is unset", () =>
    Effect.gen(function*() {
      const error = unavailable(yield* Effect.flip((yield* runtime({ env: {} })).resolve(tempDir())))
      expect(error.reason).toBe("not-found")
      expect(error.message).toMatch(/^Python backend not available: no Python interpreter found\. Tried: /)
      expect(error.message).toContain("VIRTUAL_ENV: not set")
      expect(error.message).toContain("PATH: not set")
      expect(error.message).toContain("install Python 3.8 or newer")
      expect(error.message).toContain("python.interpreter")
      expect(error.message).toContain("veyyon setup python --check")
    }))

  it.effect("does not fall back when the python.interpreter setting is wrong", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      writeFakePython(path.join(cwd, ".venv", "bin", "python"))
      const missing = path.join(cwd, "nope", "python")
      const rt = yield* runtime({ settings: { python: { interpreter: missing } } })
      const error = unavailable(yield* Effect.flip(rt.resolve(cwd)))
      expect(error.reason).toBe("not-found")
      expect(error.message).toContain(`python.interpreter setting: ${missing} does not exist`)
      expect(error.message).toContain("unset it to search venvs and PATH")
    }))

  it.effect("uses the setting over everything when it is right", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      writeFakePython(path.join(cwd, ".venv", "bin", "python"))
      const chosen = writeFakePython(path.join(tempDir(), "python"))
      const rt = yield* runtime({ settings: { python: { interpreter: chosen } } })
      expect(yield* rt.resolve(cwd)).toMatchObject({ rule: "setting", executable: chosen, skipped: [] })
    }))

  it.effect("rejects Python older than 3.8, naming the version", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const python = writeFakePython(path.join(cwd, ".venv", "bin", "python"), { version: [3, 7, 9] })
      const error = unavailable(yield* Effect.flip((yield* runtime()).resolve(cwd)))
      expect(error.reason).toBe("too-old")
      expect(error.message).toContain(`${python} (picked by .venv) is Python 3.7.9`)
      expect(error.message).toContain("3.8 or newer is required")
    }))

  it.effect("rejects Python 2 on PATH", () =>
    Effect.gen(function*() {
      const bin = tempDir()
      writeFakePython(path.join(bin, "python"), { version: [2, 7, 18] })
      const error = unavailable(yield* Effect.flip((yield* runtime({ env: { PATH: bin } })).resolve(tempDir())))
      expect(error.reason).toBe("too-old")
      expect(error.message).toContain("Python 2.7.18")
    }))

  it.effect("reports an interpreter that exits with an error, with its stderr", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      writeFakePython(path.join(cwd, ".venv", "bin", "python"), {
        body: "echo 'dyld: Library not loaded: libpython3.11' >&2; exit 1"
      })
      const error = unavailable(yield* Effect.flip((yield* runtime()).resolve(cwd)))
      expect(error.reason).toBe("failed-to-run")
      expect(error.message).toContain("exited with code 1: dyld: Library not loaded: libpython3.11")
      expect(error.message).toContain("repair or recreate that environment")
      expect(error.message).toContain("veyyon setup python --check")
    }))

  it.effect("reports a program that is not a Python", () =>
    Effect.gen(function*() {
      const bin = tempDir()
      writeFakePython(path.join(bin, "python3"), { body: "echo hello" })
      const error = unavailable(yield* Effect.flip((yield* runtime({ env: { PATH: bin } })).resolve(tempDir())))
      expect(error.message).toContain("did not report a Python version")
      expect(error.message).toContain("hello")
    }))

  it.effect("reports a file that cannot be started", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const file = path.join(cwd, ".venv", "bin", "python")
      fs.mkdirSync(path.dirname(file), { recursive: true })
      fs.writeFileSync(file, "#!/no/such/interpreter\n", { mode: 0o755 })
      const error = unavailable(yield* Effect.flip((yield* runtime()).resolve(cwd)))
      expect(error.reason).toBe("failed-to-run")
      expect(error.message).toContain("could not be started")
    }))

  it.live("gives up on an interpreter that does not answer", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      writeFakePython(path.join(cwd, ".venv", "bin", "python"), { body: `exec ${SLEEP} 30` })
      const rt = yield* runtime({ timeout: "300 millis" })
      const error = unavailable(yield* Effect.flip(rt.resolve(cwd)))
      expect(error.message).toContain("did not answer within")
    }))

  it.effect("does not cache a failed check, so a repaired interpreter is picked up", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const file = path.join(cwd, ".venv", "bin", "python")
      writeFakePython(file, { body: "exit 3" })
      const rt = yield* runtime()
      expect(unavailable(yield* Effect.flip(rt.resolve(cwd))).reason).toBe("failed-to-run")
      writeFakePython(file)
      expect((yield* rt.resolve(cwd)).checked).toBe(true)
    }))

  it.effect("locate runs nothing for an interpreter that is not a script, and leaves the check to resolve", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const counter = path.join(tempDir(), "runs")
      const python = path.join(cwd, ".venv", "bin", "python")
      writeFakePython(python, { counter })
      fs.writeFileSync(python, fs.readFileSync(python, "utf8").replace(/^#!.*\n/, ""), { mode: 0o755 })
      expect(isScript(python)).toBe(false)
      const rt = yield* runtime()
      const found = yield* rt.locate(cwd)
      expect(found).toMatchObject({ rule: ".venv", executable: python, foundAt: python, checked: false, version: undefined })
      expect(runs(counter)).toBe(0)
    }))

  it.effect("locate still checks a script (a shim) once, to spawn the real executable behind it", () =>
    Effect.gen(function*() {
      const bin = tempDir()
      const counter = path.join(tempDir(), "runs")
      const real = writeFakePython(path.join(tempDir(), "python3.11"))
      writeFakePython(path.join(bin, "python3"), { reports: real, counter, version: [3, 11, 2] })
      expect(isScript(path.join(bin, "python3"))).toBe(true)
      const rt = yield* runtime({ env: { PATH: bin } })
      const cwd = tempDir()
      expect(yield* rt.locate(cwd)).toMatchObject({ executable: real, checked: true, version: { major: 3, minor: 11, micro: 2 } })
      expect(yield* rt.resolve(cwd)).toMatchObject({ executable: real, checked: true })
      expect(runs(counter)).toBe(1)
    }))

  it.effect("skips the run check with python.skipCheck and uses the path as found", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const counter = path.join(root, "runs")
      const shim = writeFakePython(path.join(root, "shims", "python3"), { counter, body: "exit 1" })
      const rt = yield* runtime({ env: { PATH: path.join(root, "shims") }, settings: { python: { skipCheck: true } } })
      expect(yield* rt.resolve(root)).toMatchObject({ executable: shim, foundAt: shim, checked: false, version: undefined })
      expect(runs(counter)).toBe(0)
    }))

  it.effect("runs the check with the kernel's filtered env", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      const dump = path.join(tempDir(), "env")
      writeFakePython(path.join(cwd, ".venv", "bin", "python"), { envDump: dump })
      const rt = yield* runtime({ env: { PATH: "/usr/bin:/bin", OPENAI_API_KEY: "sk-test", HOME: "/h", FOO: "bar" } })
      yield* rt.resolve(cwd)
      const seen = Object.fromEntries(
        fs.readFileSync(dump, "utf8").split("\n").filter(Boolean).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)])
      )
      expect(seen["OPENAI_API_KEY"]).toBeUndefined()
      expect(seen["FOO"]).toBeUndefined()
      expect(seen["HOME"]).toBe("/h")
      expect(seen["PYTHONUNBUFFERED"]).toBe("1")
      expect(seen["PATH"]).toBe(`${path.join(cwd, ".venv", "bin")}:/usr/bin:/bin`)
    }))

  it.effect("builds kernel envs with the venv bin first and the artifacts dir", () =>
    Effect.gen(function*() {
      const rt = yield* runtime({ env: { PATH: "/usr/bin", GITHUB_TOKEN: "ghp" } })
      const env = rt.kernelEnv({ venvBin: "/p/.venv/bin" }, { artifactsDir: "/a/s1", extra: { MY: "1" } })
      expect(env).toEqual({
        PATH: "/p/.venv/bin:/usr/bin",
        PYTHONUNBUFFERED: "1",
        PYTHONIOENCODING: "utf-8",
        VEYYON_ARTIFACTS_DIR: "/a/s1",
        MY: "1"
      })
    }))
})

describe("PythonRuntime.fixed", () => {
  const interpreter = {
    executable: "/usr/bin/python3",
    foundAt: "/usr/bin/python3",
    rule: "PATH" as const,
    version: { major: 3, minor: 12, micro: 0 },
    checked: true,
    skipped: []
  }

  it.effect("answers with the given interpreter and filters the given host env", () =>
    Effect.gen(function*() {
      const rt = yield* PythonRuntime
      expect(yield* rt.resolve("/anywhere", { skipCheck: false })).toEqual(interpreter)
      expect(rt.kernelEnv({ venvBin: "/v/bin" })).toMatchObject({ PATH: "/v/bin:/bin", PYTHONUNBUFFERED: "1" })
      expect(rt.kernelEnv({})).not.toHaveProperty("ANTHROPIC_API_KEY")
    }).pipe(Effect.provide(PythonRuntime.fixed(interpreter, { PATH: "/bin", ANTHROPIC_API_KEY: "k" }))))

  it.effect("fails with the given error", () =>
    Effect.gen(function*() {
      const error = new PythonUnavailable({ reason: "not-found", detail: "none", tried: [], fix: "install one" })
      const failed = yield* Effect.flip(Effect.flatMap(PythonRuntime, (rt) => rt.resolve("/", { skipCheck: false })).pipe(
        Effect.provide(PythonRuntime.fixed(error))
      ))
      expect(failed).toBe(error)
    }))
})
