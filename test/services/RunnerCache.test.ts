import { NodeContext } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import {
  findPackageRoot,
  jsRunnerHash,
  makeRunnerCache,
  RunnerCache,
  RunnerCacheWriteFailed,
  runnerHash,
  RunnerSourceMissing
} from "../../src/services/RunnerCache.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-runner-cache-test-")))
  roots.push(dir)
  return dir
}

const sources = (runner: string | undefined, prelude: string | undefined): string => {
  const dir = tempDir()
  if (runner !== undefined) fs.writeFileSync(path.join(dir, "runner.py"), runner)
  if (prelude !== undefined) fs.writeFileSync(path.join(dir, "prelude.py"), prelude)
  return dir
}

const cacheFor = (sourceDir: string, cacheRoot: string) =>
  makeRunnerCache({ sourceDir, cacheRoot }).pipe(Effect.provide(NodeContext.layer))

const RUNNER = "import sys\nprint('runner')\n"
const PRELUDE = "def helper():\n    return 'é'\n"

describe("runnerHash", () => {
  it("is 16 hex chars and depends on both sources", () => {
    const hash = runnerHash(RUNNER, PRELUDE)
    expect(hash).toMatch(/^[0-9a-f]{16}$/)
    expect(runnerHash(RUNNER, PRELUDE)).toBe(hash)
    expect(runnerHash(RUNNER, "")).not.toBe(hash)
    expect(runnerHash(RUNNER + " ", PRELUDE)).not.toBe(hash)
  })

  it.prop("does not confuse where one source ends and the other begins", {
    a: fc.string(),
    b: fc.string(),
    cut: fc.nat()
  }, ({ a, b, cut }) => {
    const joined = a + b
    const at = cut % (joined.length + 1)
    if (at !== a.length) expect(runnerHash(joined.slice(0, at), joined.slice(at))).not.toBe(runnerHash(a, b))
  })
})

describe("RunnerCache", () => {
  it.effect("writes runner.py and prelude.py under <root>/<hash>/", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cache = yield* cacheFor(sources(RUNNER, PRELUDE), root)
      const files = yield* cache.ensure
      const hash = runnerHash(RUNNER, PRELUDE)
      expect(files).toEqual({
        dir: path.join(root, hash),
        runnerPath: path.join(root, hash, "runner.py"),
        preludePath: path.join(root, hash, "prelude.py"),
        preludeSource: PRELUDE,
        hash,
        wrote: true
      })
      expect(fs.readFileSync(files.runnerPath, "utf8")).toBe(RUNNER)
      expect(fs.readFileSync(files.preludePath, "utf8")).toBe(PRELUDE)
      expect(fs.readdirSync(files.dir).sort()).toEqual(["prelude.py", "runner.py"])
    }))

  it.effect("reuses the cached copy without writing again", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const first = yield* (yield* cacheFor(source, root)).ensure
      const before = fs.statSync(first.runnerPath).mtimeMs
      const beforeIno = fs.statSync(first.runnerPath).ino
      const again = yield* (yield* cacheFor(source, root)).ensure
      expect(again.wrote).toBe(false)
      expect(again.runnerPath).toBe(first.runnerPath)
      expect(fs.statSync(again.runnerPath).mtimeMs).toBe(before)
      expect(fs.statSync(again.runnerPath).ino).toBe(beforeIno)
    }))

  it.effect("treats a missing prelude.py as empty", () =>
    Effect.gen(function*() {
      const files = yield* (yield* cacheFor(sources(RUNNER, undefined), tempDir())).ensure
      expect(files.preludeSource).toBe("")
      expect(files.hash).toBe(runnerHash(RUNNER, ""))
      expect(fs.readFileSync(files.preludePath, "utf8")).toBe("")
    }))

  it.effect("fails with an actionable error when runner.py is missing", () =>
    Effect.gen(function*() {
      const source = sources(undefined, PRELUDE)
      const error = yield* Effect.flip((yield* cacheFor(source, tempDir())).ensure)
      expect(error).toBeInstanceOf(RunnerSourceMissing)
      expect(error.message).toContain(path.join(source, "runner.py"))
      expect(error.message).toContain("reinstall")
    }))

  it.effect("reads the sources on every call, so an edited runner gets a new directory", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const cache = yield* cacheFor(source, root)
      const first = yield* cache.ensure
      fs.writeFileSync(path.join(source, "runner.py"), RUNNER + "# v2\n")
      const second = yield* cache.ensure
      expect(second.hash).not.toBe(first.hash)
      expect(second.wrote).toBe(true)
      expect(fs.readFileSync(second.runnerPath, "utf8")).toBe(RUNNER + "# v2\n")
      expect(fs.readFileSync(first.runnerPath, "utf8")).toBe(RUNNER)
    }))

  it.effect("replaces a cached file whose content does not match its hash", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cache = yield* cacheFor(sources(RUNNER, PRELUDE), root)
      const first = yield* cache.ensure
      fs.writeFileSync(first.runnerPath, "import os; os.system('evil')\n")
      const second = yield* cache.ensure
      expect(second.wrote).toBe(true)
      expect(fs.readFileSync(second.runnerPath, "utf8")).toBe(RUNNER)
    }))

  it.live("is safe when many hosts race on the same hash", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER.repeat(2000), PRELUDE.repeat(2000))
      const hosts = yield* Effect.all(Array.from({ length: 16 }, () => cacheFor(source, root)))
      const results = yield* Effect.all(hosts.map((host) => host.ensure), { concurrency: "unbounded" })
      expect(new Set(results.map((r) => r.runnerPath)).size).toBe(1)
      expect(results.some((r) => r.wrote)).toBe(true)
      const dir = results[0]!.dir
      expect(fs.readdirSync(dir).sort()).toEqual(["prelude.py", "runner.py"])
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
      expect(error.message).toContain("TMPDIR")
    }))
})

describe("RunnerCache.ensureJs", () => {
  const JS_RUNNER = "import './prelude.mjs'\n"
  const JS_PRELUDE = "export const kv = 1\n"
  const withJs = (runner: string | undefined, prelude: string | undefined): string => {
    const dir = sources(RUNNER, PRELUDE)
    if (runner !== undefined) fs.writeFileSync(path.join(dir, "runner.mjs"), runner)
    if (prelude !== undefined) fs.writeFileSync(path.join(dir, "prelude.mjs"), prelude)
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
      expect(hash).not.toBe(runnerHash(RUNNER, PRELUDE))
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
      expect(error.message).toContain(path.join(source, "runner.mjs"))
      expect(error.message).toContain("runner/runner.mjs")
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
      const runnerFile = path.join(packageRoot, "runner", "runner.py")
      if (result._tag === "Right") {
        expect(path.dirname(result.right.dir)).toBe(path.join(os.tmpdir(), "veyyon-python-runner"))
        expect(fs.readFileSync(result.right.runnerPath, "utf8")).toBe(fs.readFileSync(runnerFile, "utf8"))
        const js = yield* cache.ensureJs
        expect(fs.readFileSync(js.runnerPath, "utf8")).toBe(fs.readFileSync(path.join(packageRoot, "runner", "runner.mjs"), "utf8"))
        expect(fs.readFileSync(js.preludePath, "utf8")).toBe(fs.readFileSync(path.join(packageRoot, "runner", "prelude.mjs"), "utf8"))
      } else {
        expect(fs.existsSync(runnerFile)).toBe(false)
        expect(result.left._tag).toBe("RunnerSourceMissing")
      }
    }).pipe(Effect.provide(RunnerCache.Live), Effect.provide(NodeContext.layer)))
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
      expect(noJs.message).toContain("runner/runner.mjs")
    }))
})
