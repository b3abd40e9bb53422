import { NodeContext } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import {
  defaultRunnerCacheRoot,
  findPackageRoot,
  jsRunnerHash,
  makeRunnerCache,
  RunnerCache,
  RunnerCacheWriteFailed,
  runnerHash,
  RunnerSourceMissing
} from "../../src/services/RunnerCache.ts"
import { findPython, integrationEnabled } from "../support/python.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-runner-cache-test-")))
  roots.push(dir)
  return dir
}

const RUNNER = "import sys\nprint('runner')\n"
const PRELUDE = "def helper():\n    return 'é'\n"
const BOOT = "exec(open('runner.py').read())\n"

/** A source directory; boot.py is written unless `boot` is null. */
const sources = (runner: string | undefined, prelude: string | undefined, boot: string | null = BOOT): string => {
  const dir = tempDir()
  fs.mkdirSync(path.join(dir, "python"))
  fs.mkdirSync(path.join(dir, "js"))
  if (runner !== undefined) fs.writeFileSync(path.join(dir, "python", "runner.py"), runner)
  if (prelude !== undefined) fs.writeFileSync(path.join(dir, "python", "prelude.py"), prelude)
  if (boot !== null) fs.writeFileSync(path.join(dir, "python", "boot.py"), boot)
  return dir
}

const cacheFor = (sourceDir: string, cacheRoot: string) =>
  makeRunnerCache({ sourceDir, cacheRoot }).pipe(Effect.provide(NodeContext.layer))

describe("runnerHash", () => {
  it("is 16 hex chars and depends on all three sources", () => {
    const hash = runnerHash(RUNNER, PRELUDE, BOOT)
    expect(hash).toMatch(/^[0-9a-f]{16}$/)
    expect(runnerHash(RUNNER, PRELUDE, BOOT)).toBe(hash)
    expect(runnerHash(RUNNER, "", BOOT)).not.toBe(hash)
    expect(runnerHash(RUNNER + " ", PRELUDE, BOOT)).not.toBe(hash)
    expect(runnerHash(RUNNER, PRELUDE, BOOT + " ")).not.toBe(hash)
  })

  it.prop("does not confuse where one source ends and the other begins", {
    a: fc.string(),
    b: fc.string(),
    cut: fc.nat()
  }, ({ a, b, cut }) => {
    const joined = a + b
    const at = cut % (joined.length + 1)
    if (at !== a.length) expect(runnerHash(joined.slice(0, at), joined.slice(at), BOOT)).not.toBe(runnerHash(a, b, BOOT))
  })
})

describe("RunnerCache", () => {
  it.effect("writes boot.py, runner.py and prelude.py under <root>/<hash>/, and boot.py is the script to spawn", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cache = yield* cacheFor(sources(RUNNER, PRELUDE), root)
      const files = yield* cache.ensure
      const hash = runnerHash(RUNNER, PRELUDE, BOOT)
      expect(files).toEqual({
        dir: path.join(root, hash),
        runnerPath: path.join(root, hash, "boot.py"),
        preludePath: path.join(root, hash, "prelude.py"),
        preludeSource: PRELUDE,
        hash,
        wrote: true
      })
      expect(fs.readFileSync(files.runnerPath, "utf8")).toBe(BOOT)
      expect(fs.readFileSync(path.join(files.dir, "runner.py"), "utf8")).toBe(RUNNER)
      expect(fs.readFileSync(files.preludePath, "utf8")).toBe(PRELUDE)
      expect(fs.readdirSync(files.dir).sort()).toEqual(["boot.py", "prelude.py", "runner.py"])
    }))

  it.effect("reuses the cached copy without writing again", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const first = yield* (yield* cacheFor(source, root)).ensure
      const stats = (dir: string) =>
        ["boot.py", "runner.py", "prelude.py"].map((name) => {
          const stat = fs.statSync(path.join(dir, name))
          return [name, stat.mtimeMs, stat.ino]
        })
      const before = stats(first.dir)
      const again = yield* (yield* cacheFor(source, root)).ensure
      expect(again.wrote).toBe(false)
      expect(again.runnerPath).toBe(first.runnerPath)
      expect(stats(again.dir)).toEqual(before)
    }))

  it.effect("treats a missing prelude.py as empty", () =>
    Effect.gen(function*() {
      const files = yield* (yield* cacheFor(sources(RUNNER, undefined), tempDir())).ensure
      expect(files.preludeSource).toBe("")
      expect(files.hash).toBe(runnerHash(RUNNER, "", BOOT))
      expect(fs.readFileSync(files.preludePath, "utf8")).toBe("")
    }))

  it.effect("fails with an actionable error when runner.py is missing", () =>
    Effect.gen(function*() {
      const source = sources(undefined, PRELUDE)
      const error = yield* Effect.flip((yield* cacheFor(source, tempDir())).ensure)
      expect(error).toBeInstanceOf(RunnerSourceMissing)
      expect(error.message).toContain(path.join(source, "python", "runner.py"))
      expect(error.message).toContain("reinstall")
    }))

  it.effect("fails with an actionable error when boot.py is missing", () =>
    Effect.gen(function*() {
      const source = sources(RUNNER, PRELUDE, null)
      const error = yield* Effect.flip((yield* cacheFor(source, tempDir())).ensure)
      expect(error).toBeInstanceOf(RunnerSourceMissing)
      expect(error.message).toContain(path.join(source, "python", "boot.py"))
      expect(error.message).toContain("runner/python/boot.py")
    }))

  it.effect("an edited boot.py gets a new directory too", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const cache = yield* cacheFor(source, root)
      const first = yield* cache.ensure
      fs.writeFileSync(path.join(source, "python", "boot.py"), BOOT + "# v2\n")
      const second = yield* cache.ensure
      expect(second.dir).not.toBe(first.dir)
      expect(fs.readFileSync(second.runnerPath, "utf8")).toBe(BOOT + "# v2\n")
      expect(fs.readFileSync(first.runnerPath, "utf8")).toBe(BOOT)
    }))

  it.effect("leaves the code caches the kernels write beside the scripts alone", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const first = yield* (yield* cacheFor(source, root)).ensure
      const pyc = path.join(first.dir, "runner.cpython-311.pyc")
      fs.writeFileSync(pyc, "cached")
      const again = yield* (yield* cacheFor(source, root)).ensure
      expect(again.wrote).toBe(false)
      expect(fs.readFileSync(pyc, "utf8")).toBe("cached")
    }))

  it.effect("reads the sources on every call, so an edited runner gets a new directory", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const cache = yield* cacheFor(source, root)
      const first = yield* cache.ensure
      fs.writeFileSync(path.join(source, "python", "runner.py"), RUNNER + "# v2\n")
      const second = yield* cache.ensure
      expect(second.hash).not.toBe(first.hash)
      expect(second.wrote).toBe(true)
      expect(fs.readFileSync(path.join(second.dir, "runner.py"), "utf8")).toBe(RUNNER + "# v2\n")
      expect(fs.readFileSync(path.join(first.dir, "runner.py"), "utf8")).toBe(RUNNER)
    }))

  it.effect("replaces a cached file whose content does not match its hash", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cache = yield* cacheFor(sources(RUNNER, PRELUDE), root)
      const first = yield* cache.ensure
      for (const name of ["runner.py", "boot.py"]) fs.writeFileSync(path.join(first.dir, name), "import os; os.system('evil')\n")
      const second = yield* cache.ensure
      expect(second.wrote).toBe(true)
      expect(fs.readFileSync(path.join(second.dir, "runner.py"), "utf8")).toBe(RUNNER)
      expect(fs.readFileSync(second.runnerPath, "utf8")).toBe(BOOT)
    }))

  it.live("is safe when many hosts race on the same hash", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER.repeat(2000), PRELUDE.repeat(2000), BOOT.repeat(2000))
      const hosts = yield* Effect.all(Array.from({ length: 16 }, () => cacheFor(source, root)))
      const results = yield* Effect.all(hosts.map((host) => host.ensure), { concurrency: "unbounded" })
      expect(new Set(results.map((r) => r.runnerPath)).size).toBe(1)
      expect(results.some((r) => r.wrote)).toBe(true)
      const dir = results[0]!.dir
      expect(fs.readdirSync(dir).sort()).toEqual(["boot.py", "prelude.py", "runner.py"])
      expect(fs.readFileSync(path.join(dir, "boot.py"), "utf8")).toBe(BOOT.repeat(2000))
      expect(fs.readFileSync(path.join(dir, "runner.py"), "utf8")).toBe(RUNNER.repeat(2000))
      expect(fs.readFileSync(path.join(dir, "prelude.py"), "utf8")).toBe(PRELUDE.repeat(2000))
      const later = yield* hosts[0]!.ensure
      expect(later.wrote).toBe(false)
    }))

  it.effect("reports a cache root that cannot be written", () =>
    Effect.gen(function*() {
      const blocker = path.join(tempDir(), "a-file")
      fs.writeFileSync(blocker, "")
      const error = yield* Effect.flip((yield* cacheFor(sources(RUNNER, PRELUDE), path.join(blocker, "cache"))).ensure)
      expect(error).toBeInstanceOf(RunnerCacheWriteFailed)
      expect(error.message).toContain("not a directory")
    }))
})

describe("RunnerCache.ensureJs", () => {
  const JS_RUNNER = "import './prelude.mjs'\n"
  const JS_PRELUDE = "export const kv = 1\n"
  const withJs = (runner: string | undefined, prelude: string | undefined): string => {
    const dir = sources(RUNNER, PRELUDE)
    if (runner !== undefined) fs.writeFileSync(path.join(dir, "js", "runner.mjs"), runner)
    if (prelude !== undefined) fs.writeFileSync(path.join(dir, "js", "prelude.mjs"), prelude)
    return dir
  }

  it.effect("writes runner.mjs and prelude.mjs together under their own hash, beside the Python pair", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cache = yield* cacheFor(withJs(JS_RUNNER, JS_PRELUDE), root)
      const js = yield* cache.ensureJs
      const hash = jsRunnerHash(JS_RUNNER, JS_PRELUDE)
      expect(js).toEqual({
        dir: path.join(root, hash),
        runnerPath: path.join(root, hash, "runner.mjs"),
        preludePath: path.join(root, hash, "prelude.mjs"),
        hash,
        wrote: true
      })
      expect(fs.readdirSync(js.dir).sort()).toEqual(["prelude.mjs", "runner.mjs"])
      expect(fs.readFileSync(js.runnerPath, "utf8")).toBe(JS_RUNNER)
      expect(hash).not.toBe(runnerHash(RUNNER, PRELUDE, BOOT))
      const py = yield* cache.ensure
      expect(py.dir).not.toBe(js.dir)
      expect((yield* cache.ensureJs).wrote).toBe(false)
    }))

  it.effect("a missing Node runner fails only ensureJs, naming the file to reinstall", () =>
    Effect.gen(function*() {
      const source = withJs(undefined, JS_PRELUDE)
      const cache = yield* cacheFor(source, tempDir())
      const error = yield* Effect.flip(cache.ensureJs)
      expect(error).toBeInstanceOf(RunnerSourceMissing)
      expect(error.message).toContain(path.join(source, "js", "runner.mjs"))
      expect(error.message).toContain("runner/js/runner.mjs")
      expect((yield* cache.ensure).wrote).toBe(true)
      const noPrelude = yield* Effect.flip((yield* cacheFor(withJs(JS_RUNNER, undefined), tempDir())).ensureJs)
      expect(noPrelude.message).toContain("prelude.mjs")
    }))
})

describe("RunnerCache.Live", () => {
  const here = path.dirname(fileURLToPath(import.meta.url))
  const packageRoot = path.resolve(here, "..", "..")

  it.effect("finds the package root by walking up from a module", () =>
    Effect.gen(function*() {
      expect(yield* findPackageRoot(here)).toBe(packageRoot)
      const error = yield* Effect.flip(findPackageRoot(os.tmpdir()))
      expect(error.message).toContain("veyyon-eval package.json")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.effect("caches the package's own runner/ sources, or says runner.py is missing", () =>
    Effect.gen(function*() {
      const cache = yield* RunnerCache
      const result = yield* Effect.either(cache.ensure)
      const runnerFile = path.join(packageRoot, "runner", "python", "runner.py")
      if (result._tag === "Right") {
        expect(path.dirname(result.right.dir)).toBe(defaultRunnerCacheRoot())
        expect(result.right.runnerPath).toBe(path.join(result.right.dir, "boot.py"))
        expect(fs.readFileSync(result.right.runnerPath, "utf8")).toBe(fs.readFileSync(path.join(packageRoot, "runner", "python", "boot.py"), "utf8"))
        expect(fs.readFileSync(path.join(result.right.dir, "runner.py"), "utf8")).toBe(fs.readFileSync(runnerFile, "utf8"))
        const js = yield* cache.ensureJs
        expect(fs.readFileSync(js.runnerPath, "utf8")).toBe(fs.readFileSync(path.join(packageRoot, "runner", "js", "runner.mjs"), "utf8"))
        expect(fs.readFileSync(js.preludePath, "utf8")).toBe(fs.readFileSync(path.join(packageRoot, "runner", "js", "prelude.mjs"), "utf8"))
      } else {
        expect(fs.existsSync(runnerFile)).toBe(false)
        expect(result.left._tag).toBe("RunnerSourceMissing")
      }
    }).pipe(Effect.provide(RunnerCache.Live), Effect.provide(NodeContext.layer)))
})

describe.skipIf(!integrationEnabled())("RunnerCache with a real interpreter", () => {
  const packageRunner = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "runner")
  const start = (runnerPath: string, preludeSource: string) => {
    const requests = [
      { id: "init", code: "", silent: true, storeHistory: false },
      { id: "prelude", code: preludeSource, silent: true, storeHistory: false },
      { id: "cell", code: "1 + 1", silent: false, storeHistory: true }
    ]
    const run = spawnSync(findPython()!, ["-u", runnerPath], {
      input: requests.map((r) => JSON.stringify(r) + "\n").join(""),
      encoding: "utf8",
      timeout: 60_000
    })
    expect(run.status, run.stderr).toBe(0)
    const frames = run.stdout.trim().split("\n").map((line) => JSON.parse(line) as { type: string; id: string; bundle?: Record<string, unknown> })
    expect(frames.filter((f) => f.type === "error")).toEqual([])
    return frames.find((f) => f.type === "result" && f.id === "cell")?.bundle?.["text/plain"]
  }

  it.effect("the spawned boot.py serves cells and leaves the runner's and the prelude's compiled code beside it", () =>
    Effect.gen(function*() {
      const files = yield* (yield* cacheFor(packageRunner, tempDir())).ensure
      expect(start(files.runnerPath, files.preludeSource)).toBe("2")
      const compiled = fs.readdirSync(files.dir).filter((name) => name.endsWith(".pyc")).sort()
      expect(compiled).toHaveLength(2)
      expect(compiled[0]).toMatch(/^prelude\.[\w-]+\.pyc$/)
      expect(compiled[1]).toBe(compiled[0]!.replace(/^prelude/, "runner"))
      const stamps = compiled.map((name) => fs.statSync(path.join(files.dir, name)).ino)
      expect(start(files.runnerPath, files.preludeSource)).toBe("2")
      expect(compiled.map((name) => fs.statSync(path.join(files.dir, name)).ino)).toEqual(stamps)
      if (process.platform !== "win32") {
        expect(fs.statSync(files.dir).mode & 0o777).toBe(0o700)
        for (const name of fs.readdirSync(files.dir)) expect(fs.statSync(path.join(files.dir, name)).mode & 0o777).toBe(0o600)
      }
    }))

  it.effect.skipIf(process.platform === "win32")("boot.py refuses a cache directory others can write, and loads no planted code from it", () =>
    Effect.gen(function*() {
      const files = yield* (yield* cacheFor(packageRunner, tempDir())).ensure
      expect(start(files.runnerPath, files.preludeSource)).toBe("2")
      fs.chmodSync(files.dir, 0o777)
      const run = spawnSync(findPython()!, ["-u", files.runnerPath], { encoding: "utf8", input: "" })
      expect(run.status).not.toBe(0)
      expect(run.stderr).toContain(`refusing to load code from ${files.dir}: it is writable by group or others (mode 0777)`)
    }))
})

describe("RunnerCache.fixed", () => {
  it.effect("answers with the given files or error", () =>
    Effect.gen(function*() {
      const files = { dir: "/c/h", runnerPath: "/c/h/runner.py", preludePath: "/c/h/prelude.py", preludeSource: "", hash: "h", wrote: false }
      expect(yield* Effect.flatMap(RunnerCache, (c) => c.ensure).pipe(Effect.provide(RunnerCache.fixed(files)))).toEqual(files)
      const missing = new RunnerSourceMissing({ path: "runner.py", reason: "gone" })
      const error = yield* Effect.flip(Effect.flatMap(RunnerCache, (c) => c.ensure).pipe(Effect.provide(RunnerCache.fixed(missing))))
      expect(error).toBe(missing)
      const noJs = yield* Effect.flip(Effect.flatMap(RunnerCache, (c) => c.ensureJs).pipe(Effect.provide(RunnerCache.fixed(files))))
      expect(noJs.message).toContain("runner/js/runner.mjs")
    }))
})
