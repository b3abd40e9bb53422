import { NodeServices } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Schema } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import {
  defaultRunnerCacheRoot,
  findPackageRoot,
  cachedPath,
  filesHash,
  isExcludedRunnerPath,
  listRunnerFiles,
  makeRunnerCache,
  RunnerCache,
  RunnerCacheWriteFailed,
  RunnerSourceMissing
} from "../../../src/services/storage/RunnerCache.ts"
import { registeredBackends } from "../../../src/backends/index.ts"
import { PYTHON_PACKAGE_DIR } from "../../../src/backends/python/PythonBackend.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { integrationOff, titled } from "../../support/skip.ts"

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
const MODULE = "VALUE = 1\n"

/** A runner root with a `python/` folder (boot.py unless `boot` is null) and a nested module, and a `js/` folder. */
const sources = (runner: string | undefined, prelude: string | undefined, boot: string | null = BOOT): string => {
  const dir = tempDir()
  fs.mkdirSync(path.join(dir, "python", "pkg"), { recursive: true })
  fs.mkdirSync(path.join(dir, "js"))
  if (runner !== undefined) fs.writeFileSync(path.join(dir, "python", "runner.py"), runner)
  if (prelude !== undefined) fs.writeFileSync(path.join(dir, "python", "prelude.py"), prelude)
  if (boot !== null) fs.writeFileSync(path.join(dir, "python", "boot.py"), boot)
  fs.writeFileSync(path.join(dir, "python", "pkg", "module.py"), MODULE)
  fs.writeFileSync(path.join(dir, "js", "runner.mjs"), "import './prelude.mjs'\n")
  fs.writeFileSync(path.join(dir, "js", "prelude.mjs"), "export const kv = 1\n")
  return dir
}

const cacheFor = (sourceDir: string, cacheRoot: string) =>
  makeRunnerCache({ sourceDir, cacheRoot }).pipe(Effect.provide(NodeServices.layer))

const PYTHON_FILES = [["boot.py", BOOT], ["pkg/module.py", MODULE], ["prelude.py", PRELUDE], ["runner.py", RUNNER]] as const

describe("filesHash", () => {
  it("is 16 hex chars and depends on every file's name and content", () => {
    const hash = filesHash(PYTHON_FILES)
    expect(hash).toMatch(/^[0-9a-f]{16}$/)
    expect(filesHash(PYTHON_FILES)).toBe(hash)
    expect(filesHash(PYTHON_FILES.map(([name, source]) => [name, name === "prelude.py" ? "" : source]))).not.toBe(hash)
    expect(filesHash(PYTHON_FILES.map(([name, source]) => [name === "pkg/module.py" ? "pkg/other.py" : name, source]))).not.toBe(hash)
    expect(filesHash(PYTHON_FILES.slice(1))).not.toBe(hash)
  })

  it.prop("does not confuse where one source ends and the other begins", {
    a: Schema.String,
    b: Schema.String,
    cut: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))
  }, ({ a, b, cut }) => {
    const joined = a + b
    const at = cut % (joined.length + 1)
    if (at !== a.length) expect(filesHash([["a", joined.slice(0, at)], ["b", joined.slice(at)]])).not.toBe(filesHash([["a", a], ["b", b]]))
  })
})

describe("listRunnerFiles", () => {
  it("lists regular files recursively, sorted, leaving out tests/, __pycache__/, *.pyc, hidden entries and symbolic links", () => {
    const dir = tempDir()
    for (const sub of ["pkg/deep", "tests", "__pycache__", "pkg/__pycache__", ".pytest_cache/v"]) fs.mkdirSync(path.join(dir, sub), { recursive: true })
    for (const file of ["runner.py", "pkg/a.py", "pkg/deep/b.py", "tests/test_x.py", "__pycache__/x.pyc", "pkg/__pycache__/a.pyc", "stale.cpython-311.pyc", ".pytest_cache/v/x", "pkg/.hidden.py"]) {
      fs.writeFileSync(path.join(dir, file), "x")
    }
    fs.symlinkSync("/etc/passwd", path.join(dir, "link.py"))
    expect(listRunnerFiles(dir)).toEqual(["pkg/a.py", "pkg/deep/b.py", "runner.py"])
    expect(isExcludedRunnerPath("pkg/tests/x.py")).toBe(true)
    expect(isExcludedRunnerPath("tests.py")).toBe(false)
  })
})

describe("RunnerCache", () => {
  it.effect("copies every file of the folder under <root>/<hash>/ keeping relative paths, privately", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cache = yield* cacheFor(sources(RUNNER, PRELUDE), root)
      const files = yield* cache.ensure("python")
      const hash = filesHash(PYTHON_FILES)
      expect(files).toEqual({ folder: "python", dir: path.join(root, hash), sources: new Map(PYTHON_FILES), hash, wrote: true })
      expect(fs.readFileSync(cachedPath(files, "boot.py"), "utf8")).toBe(BOOT)
      expect(fs.readFileSync(cachedPath(files, "pkg/module.py"), "utf8")).toBe(MODULE)
      expect(fs.readdirSync(files.dir).sort()).toEqual(["boot.py", "pkg", "prelude.py", "runner.py"])
      if (process.platform !== "win32") {
        expect(fs.statSync(files.dir).mode & 0o777).toBe(0o700)
        expect(fs.statSync(path.join(files.dir, "pkg")).mode & 0o777).toBe(0o700)
        expect(fs.statSync(cachedPath(files, "pkg/module.py")).mode & 0o777).toBe(0o600)
      }
    }))

  it.effect("reuses the cached copy without writing again", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const first = yield* (yield* cacheFor(source, root)).ensure("python")
      const stats = (dir: string) =>
        PYTHON_FILES.map(([name]) => {
          const stat = fs.statSync(path.join(dir, name))
          return [name, stat.mtimeMs, stat.ino]
        })
      const before = stats(first.dir)
      const again = yield* (yield* cacheFor(source, root)).ensure("python")
      expect(again.wrote).toBe(false)
      expect(again.dir).toBe(first.dir)
      expect(stats(again.dir)).toEqual(before)
    }))

  it.effect("memoizes a folder: a later call reads no file while nothing changed, and reads again once something did", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      let reads = 0
      const counting = Layer.effect(
        FileSystem.FileSystem,
        Effect.map(FileSystem.FileSystem, (fs): FileSystem.FileSystem => ({
          ...fs,
          readFileString: (file, encoding) => Effect.suspend(() => {
            reads++
            return fs.readFileString(file, encoding)
          })
        }))
      ).pipe(Layer.provide(NodeServices.layer))
      const cache = yield* makeRunnerCache({ sourceDir: source, cacheRoot: root }).pipe(Effect.provide(counting))
      const first = yield* cache.ensure("python")
      expect(reads).toBeGreaterThan(0)
      reads = 0
      for (let i = 0; i < 3; i++) expect(yield* cache.ensure("python")).toEqual({ ...first, wrote: false })
      expect(reads).toBe(0)
      fs.writeFileSync(cachedPath(first, "pkg/module.py"), "import os\n")
      const repaired = yield* cache.ensure("python")
      expect(reads).toBeGreaterThan(0)
      expect(repaired.wrote).toBe(true)
      expect(fs.readFileSync(cachedPath(first, "pkg/module.py"), "utf8")).toBe(MODULE)
    }))

  it.effect("fails with an actionable error when the folder is missing or empty", () =>
    Effect.gen(function*() {
      const source = sources(RUNNER, PRELUDE)
      const error = yield* Effect.flip((yield* cacheFor(source, tempDir())).ensure("ruby"))
      expect(error).toBeInstanceOf(RunnerSourceMissing)
      expect(error.message).toContain(path.join(source, "ruby"))
      expect(error.message).toContain("reinstall")
      fs.mkdirSync(path.join(source, "ruby"))
      const empty = yield* Effect.flip((yield* cacheFor(source, tempDir())).ensure("ruby"))
      expect(empty.message).toContain("holds no files")
    }))

  it.effect("an edited, added or removed file gets a new directory; the old copy stays intact", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const cache = yield* cacheFor(source, root)
      const first = yield* cache.ensure("python")
      fs.writeFileSync(path.join(source, "python", "boot.py"), BOOT + "# v2\n")
      const second = yield* cache.ensure("python")
      expect(second.dir).not.toBe(first.dir)
      expect(second.wrote).toBe(true)
      expect(fs.readFileSync(cachedPath(second, "boot.py"), "utf8")).toBe(BOOT + "# v2\n")
      expect(fs.readFileSync(cachedPath(first, "boot.py"), "utf8")).toBe(BOOT)
      fs.writeFileSync(path.join(source, "python", "pkg", "extra.py"), "")
      const third = yield* cache.ensure("python")
      expect(third.dir).not.toBe(second.dir)
      fs.rmSync(path.join(source, "python", "pkg", "extra.py"))
      expect((yield* cache.ensure("python")).dir).toBe(second.dir)
    }))

  it.effect("leaves the code caches the kernels write beside the scripts alone", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER, PRELUDE)
      const first = yield* (yield* cacheFor(source, root)).ensure("python")
      const pyc = path.join(first.dir, "runner.cpython-311.pyc")
      fs.writeFileSync(pyc, "cached")
      const again = yield* (yield* cacheFor(source, root)).ensure("python")
      expect(again.wrote).toBe(false)
      expect(fs.readFileSync(pyc, "utf8")).toBe("cached")
    }))

  it.effect("replaces a cached file whose content does not match its hash", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const cache = yield* cacheFor(sources(RUNNER, PRELUDE), root)
      const first = yield* cache.ensure("python")
      for (const name of ["runner.py", "boot.py", "pkg/module.py"]) fs.writeFileSync(cachedPath(first, name), "import os; os.system('evil')\n")
      const second = yield* cache.ensure("python")
      expect(second.wrote).toBe(true)
      for (const [name, source] of PYTHON_FILES) expect(fs.readFileSync(cachedPath(second, name), "utf8")).toBe(source)
    }))

  it.effect("caches each folder in a directory of its own", () =>
    Effect.gen(function*() {
      const cache = yield* cacheFor(sources(RUNNER, PRELUDE), tempDir())
      const py = yield* cache.ensure("python")
      const js = yield* cache.ensure("js")
      expect(js.dir).not.toBe(py.dir)
      expect(fs.readdirSync(js.dir).sort()).toEqual(["prelude.mjs", "runner.mjs"])
      expect((yield* cache.ensure("js")).wrote).toBe(false)
    }))

  it.live("is safe when many hosts race on the same hash", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const source = sources(RUNNER.repeat(2000), PRELUDE.repeat(2000), BOOT.repeat(2000))
      const hosts = yield* Effect.all(Array.from({ length: 16 }, () => cacheFor(source, root)))
      const results = yield* Effect.all(hosts.map((host) => host.ensure("python")), { concurrency: "unbounded" })
      expect(new Set(results.map((r) => r.dir)).size).toBe(1)
      expect(results.some((r) => r.wrote)).toBe(true)
      const dir = results[0]!.dir
      expect(fs.readdirSync(dir).sort()).toEqual(["boot.py", "pkg", "prelude.py", "runner.py"])
      expect(fs.readFileSync(path.join(dir, "boot.py"), "utf8")).toBe(BOOT.repeat(2000))
      expect(fs.readFileSync(path.join(dir, "runner.py"), "utf8")).toBe(RUNNER.repeat(2000))
      expect(fs.readFileSync(path.join(dir, "prelude.py"), "utf8")).toBe(PRELUDE.repeat(2000))
      const later = yield* hosts[0]!.ensure("python")
      expect(later.wrote).toBe(false)
    }))

  it.effect("reports a cache root that cannot be written", () =>
    Effect.gen(function*() {
      const blocker = path.join(tempDir(), "a-file")
      fs.writeFileSync(blocker, "")
      const error = yield* Effect.flip((yield* cacheFor(sources(RUNNER, PRELUDE), path.join(blocker, "cache"))).ensure("python"))
      expect(error).toBeInstanceOf(RunnerCacheWriteFailed)
      expect(error.message).toContain("not a directory")
    }))
})

describe("RunnerCache.Live", () => {
  const here = path.dirname(fileURLToPath(import.meta.url))
  const packageRoot = path.resolve(here, "..", "..", "..")

  it.effect("finds the package root by walking up from a module", () =>
    Effect.gen(function*() {
      expect(yield* findPackageRoot(here)).toBe(packageRoot)
      const error = yield* Effect.flip(findPackageRoot(os.tmpdir()))
      expect(error.message).toContain("veyyon-eval package.json")
    }).pipe(Effect.provide(NodeServices.layer)))

  it.effect("caches every registered backend's runner folder from the package, file for file", () =>
    Effect.gen(function*() {
      const cache = yield* RunnerCache
      for (const backend of registeredBackends()) {
        if (backend.runner === undefined) continue
        const folder = path.join(packageRoot, "runner", backend.runner.folder)
        const cached = yield* cache.ensure(backend.runner.folder)
        expect(path.dirname(cached.dir)).toBe(defaultRunnerCacheRoot())
        expect(cached.sources.has(backend.runner.entry)).toBe(true)
        expect([...cached.sources.keys()]).toEqual(listRunnerFiles(folder))
        for (const name of cached.sources.keys()) {
          expect(fs.readFileSync(cachedPath(cached, name), "utf8")).toBe(fs.readFileSync(path.join(folder, name), "utf8"))
        }
      }
    }).pipe(Effect.provide(RunnerCache.Live), Effect.provide(NodeServices.layer)))
})

describe.skipIf(!integrationEnabled())(titled("RunnerCache with a real interpreter", integrationOff()), () => {
  const packageRunner = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "runner")
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

  /** The runner's modules it loads only when first used (a magic, a completion, a snapshot, a restore). */
  const loadedWhenUsed = ["__main__.py", "introspect.py", "magics.py", "restore.py", "snapshot.py"]

  it.effect("the spawned boot.py serves cells and leaves each runner module's and the prelude's compiled code beside it; --warm compiles the rest", () =>
    Effect.gen(function*() {
      const files = yield* (yield* cacheFor(packageRunner, tempDir())).ensure("python")
      const boot = cachedPath(files, "boot.py")
      const prelude = files.sources.get("prelude.py") ?? ""
      const packageDir = path.join(files.dir, PYTHON_PACKAGE_DIR)
      const modules = fs.readdirSync(path.join(packageRunner, "python", PYTHON_PACKAGE_DIR)).filter((name) => name.endsWith(".py")).sort()
      expect(fs.readdirSync(packageDir).sort()).toEqual(modules)
      expect(start(boot, prelude)).toBe("2")
      const compiled = [
        ...fs.readdirSync(files.dir).filter((name) => name.endsWith(".pyc")),
        ...fs.readdirSync(packageDir).filter((name) => name.endsWith(".pyc")).map((name) => path.join(PYTHON_PACKAGE_DIR, name))
      ].sort()
      const tag = compiled.find((name) => name.startsWith("prelude."))!.slice("prelude.".length)
      const cacheOf = (name: string) => path.join(PYTHON_PACKAGE_DIR, name.replace(/\.py$/, `.${tag}`))
      expect(compiled).toEqual([...modules.filter((name) => !loadedWhenUsed.includes(name)).map(cacheOf), `prelude.${tag}`].sort())
      const stamps = compiled.map((name) => fs.statSync(path.join(files.dir, name)).ino)
      expect(start(boot, prelude)).toBe("2")
      expect(compiled.map((name) => fs.statSync(path.join(files.dir, name)).ino)).toEqual(stamps)
      const warm = spawnSync(findPython()!, ["-u", boot, "--warm"], { encoding: "utf8", timeout: 60_000 })
      expect([warm.status, warm.stdout, warm.stderr]).toEqual([0, "", ""])
      expect(fs.readdirSync(packageDir).filter((name) => name.endsWith(".pyc")).sort()).toEqual(modules.map(cacheOf).map((name) => path.basename(name)).sort())
      expect(compiled.map((name) => fs.statSync(path.join(files.dir, name)).ino)).toEqual(stamps)
      if (process.platform !== "win32") {
        for (const dir of [files.dir, packageDir]) {
          expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
          for (const name of fs.readdirSync(dir)) {
            if (name !== PYTHON_PACKAGE_DIR) expect(fs.statSync(path.join(dir, name)).mode & 0o777).toBe(0o600)
          }
        }
      }
    }))

  it.effect("the Node runner's modules are cached beside runner.mjs", () =>
    Effect.gen(function*() {
      const files = yield* (yield* cacheFor(packageRunner, tempDir())).ensure("js")
      const modules = fs.readdirSync(path.join(packageRunner, "js")).filter((name) => name.endsWith(".mjs")).sort()
      expect(modules).toEqual(expect.arrayContaining(["runner.mjs", "prelude.mjs", "protocol.mjs", "execution.mjs"]))
      expect(fs.readdirSync(files.dir).sort()).toEqual(modules)
    }))

  it.effect.skipIf(process.platform === "win32")("boot.py refuses a cache directory others can write, and loads no planted code from it", () =>
    Effect.gen(function*() {
      const files = yield* (yield* cacheFor(packageRunner, tempDir())).ensure("python")
      const boot = cachedPath(files, "boot.py")
      const prelude = files.sources.get("prelude.py") ?? ""
      expect(start(boot, prelude)).toBe("2")
      fs.chmodSync(files.dir, 0o777)
      const run = spawnSync(findPython()!, ["-u", boot], { encoding: "utf8", input: "" })
      expect(run.status).not.toBe(0)
      expect(run.stderr).toContain(`refusing to load code from ${files.dir}: it is writable by group or others (mode 0777)`)
    }))
})

describe("RunnerCache.fixed", () => {
  it.effect("answers with the given files or error", () =>
    Effect.gen(function*() {
      const files = { folder: "python", dir: "/c/h", sources: new Map([["boot.py", ""]]), hash: "h", wrote: false }
      const missing = new RunnerSourceMissing({ path: "runner.py", reason: "gone" })
      const layer = RunnerCache.fixed({ python: files, ruby: missing })
      const ensure = (folder: string) => Effect.flatMap(RunnerCache, (c) => c.ensure(folder)).pipe(Effect.provide(layer))
      expect(yield* ensure("python")).toEqual(files)
      expect(yield* Effect.flip(ensure("ruby"))).toBe(missing)
      expect((yield* Effect.flip(ensure("js"))).message).toContain("runner/js/")
    }))
})
