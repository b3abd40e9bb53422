import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { EnvRecord } from "../../../src/services/isolation/EnvPolicy.ts"
import { envInterpreter } from "../../../src/backends/python/RuntimeResolution.ts"
import {
  commandInspector,
  INSPECT_TIMEOUT,
  makePythonRuntime,
  nodeFileProbe,
  PythonRuntime
} from "../../../src/backends/python/PythonRuntime.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"

const python = integrationEnabled() ? findPython() : undefined

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-runtime-it-")))
  roots.push(dir)
  return dir
}

/** The host env minus anything that would select an interpreter before the rule under test. */
const hostEnv = (extra: EnvRecord = {}): EnvRecord => {
  const { VIRTUAL_ENV: _v, CONDA_PREFIX: _c, ...rest } = process.env
  return { ...rest, ...extra }
}

const runtime = (env: EnvRecord, home: string) =>
  Effect.gen(function*() {
    return yield* makePythonRuntime({
      env,
      homeDir: home,
      platform: process.platform,
      probe: nodeFileProbe(),
      inspect: commandInspector(INSPECT_TIMEOUT)
    })
  }).pipe(Effect.provide(NodeServices.layer))

describe.skipIf(python === undefined)("PythonRuntime with a real Python", () => {
  it.live("picks a real `python -m venv` in <cwd>/.venv and runs it", () =>
    Effect.gen(function*() {
      const cwd = tempDir()
      execFileSync(python!, ["-m", "venv", "--without-pip", path.join(cwd, ".venv")], { stdio: "ignore" })
      const { bin, executable } = envInterpreter(path.join(cwd, ".venv"), process.platform, "venv")
      const rt = yield* runtime(hostEnv(), tempDir())
      const found = yield* rt.resolve(cwd, { skipCheck: false })
      expect(found.rule).toBe(".venv")
      expect(found.foundAt).toBe(executable)
      expect(found.venvBin).toBe(bin)
      expect(found.checked).toBe(true)
      expect(found.version!.major).toBe(3)
      expect(found.version!.minor).toBeGreaterThanOrEqual(8)
      // a venv reports its own interpreter as sys.executable, so it is spawned as a venv
      expect(path.dirname(found.executable)).toBe(bin)
      const prefix = execFileSync(found.executable, ["-c", "import sys; print(sys.prefix)"], {
        encoding: "utf8",
        env: rt.kernelEnv(found)
      }).trim()
      expect(fs.realpathSync(prefix)).toBe(path.join(cwd, ".venv"))
    }), 120_000)

  it.live("resolves the interpreter on PATH to the real executable behind any shim", () =>
    Effect.gen(function*() {
      const rt = yield* runtime(hostEnv(), tempDir())
      const found = yield* rt.resolve(tempDir(), { skipCheck: false })
      expect(found.rule).toBe("PATH")
      expect(found.checked).toBe(true)
      const real = execFileSync(found.executable, ["-c", "import sys; print(sys.executable)"], {
        encoding: "utf8",
        env: rt.kernelEnv(found)
      }).trim()
      expect(real).toBe(found.executable)
      if (process.env["VEYYON_TEST_PYTHON"] === undefined) expect(found.executable).toBe(python)
    }), 60_000)

  it.live("keeps provider keys out of the interpreter's environment", () =>
    Effect.gen(function*() {
      const rt = yield* runtime(hostEnv({ OPENAI_API_KEY: "sk-should-not-leak", VEYYON_MARK: "1" }), tempDir())
      const found = yield* rt.resolve(tempDir(), { skipCheck: false })
      const seen = execFileSync(
        found.executable,
        ["-c", "import os, json; print(json.dumps(sorted(os.environ)))"],
        { encoding: "utf8", env: rt.kernelEnv(found, { artifactsDir: "/tmp/a" }) }
      )
      const names: Array<string> = JSON.parse(seen)
      expect(names).not.toContain("OPENAI_API_KEY")
      expect(names).toContain("VEYYON_MARK")
      expect(names).toContain("VEYYON_ARTIFACTS_DIR")
      expect(names).toContain("PYTHONUNBUFFERED")
    }), 60_000)

  it.live("the Live layer resolves on this machine", () =>
    Effect.gen(function*() {
      const rt = yield* PythonRuntime
      const found = yield* rt.resolve(process.cwd(), { skipCheck: false })
      expect(found.checked).toBe(true)
    }).pipe(Effect.provide(PythonRuntime.Live.pipe(Layer.provide(NodeServices.layer)))), 60_000)
})
