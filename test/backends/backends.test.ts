/**
 * The registered backends as data: ids, runner folders present in the package, launches,
 * environments, and Ruby's interpreter rules.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { RuntimeUnavailable } from "../../src/backends/Backend.ts"
import { backendOf, registeredBackends } from "../../src/backends/index.ts"
import { findRubyCandidate, isSupportedRubyVersion, opensRubyBlock } from "../../src/backends/ruby.ts"
import { julia as juliaBackend } from "../../src/backends/julia.ts"
import { isCompleteCell } from "../../src/cli/replInput.ts"
import { evalDescription, evalParametersSchema } from "../../src/services/tool/EvalTool.ts"
import { PythonRuntime } from "../../src/backends/python/PythonRuntime.ts"
import { type CachedRunner, listRunnerFiles } from "../../src/services/storage/RunnerCache.ts"
import { Settings } from "../../src/services/config/Settings.ts"
import { testSettings } from "../support/settings.ts"

const root = path.resolve(import.meta.dirname, "../..")
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-backends-test-"))
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }))

const runnerOf = (folder: string, sources: Record<string, string>): CachedRunner => ({
  folder,
  dir: `/cache/${folder}`,
  sources: new Map(Object.entries(sources)),
  hash: "h",
  wrote: false
})

describe("registered backends", () => {
  it("have unique lower-case ids, py, js, rb and jl in that order", () => {
    const ids = registeredBackends().map((backend) => backend.id)
    expect(ids).toEqual(["py", "js", "rb", "jl"])
    expect(backendOf("rb")?.displayName).toBe("Ruby")
    expect(backendOf("cobol")).toBeUndefined()
  })

  it("each runner folder ships in the package with the file its kernels spawn; Julia ships none", () => {
    for (const backend of registeredBackends()) {
      if (backend.runner === undefined) continue
      expect(listRunnerFiles(path.join(root, "runner", backend.runner.folder))).toContain(backend.runner.entry)
    }
    expect(backendOf("jl")?.runner).toBeUndefined()
    expect(backendOf("jl")?.launch).toBeUndefined()
  })

  it("launch: Python on its private stdout with the prelude sent, Node on fd 3 importing its own, Ruby on fd 3 with the prelude sent", () => {
    expect(backendOf("py")!.launch!({ executable: "/py" }, runnerOf("python", { "boot.py": "", "prelude.py": "P" }))).toEqual({
      command: "/py",
      args: ["-u", "/cache/python/boot.py"],
      channel: "stdio",
      prelude: "P"
    })
    expect(backendOf("js")!.launch!({ executable: "/node" }, runnerOf("js", { "runner.mjs": "" }))).toEqual({
      command: "/node",
      args: ["/cache/js/runner.mjs"],
      channel: "fd3"
    })
    expect(backendOf("rb")!.launch!({ executable: "/ruby" }, runnerOf("ruby", { "runner.rb": "", "prelude.rb": "R" }))).toEqual({
      command: "/ruby",
      args: ["/cache/ruby/runner.rb"],
      channel: "fd3",
      prelude: "R"
    })
  })

  it.effect("each backend builds its own environment: the policy's filter, its own fixed variables, the artifacts dir", () =>
    Effect.gen(function*() {
      const saved = process.env.SOME_API_KEY
      process.env.SOME_API_KEY = "sk-abcdefghijklmnopqrstuvwxyz"
      try {
        for (const id of ["js", "rb"] as const) {
          const runtime = yield* backendOf(id)!.runtime({ skipCheck: false })
          const env = runtime.env({ executable: "/x" }, { artifactsDir: "/art" })
          expect(env.VEYYON_ARTIFACTS_DIR).toBe("/art")
          expect(env.SOME_API_KEY).toBeUndefined()
          expect(env.PYTHONUNBUFFERED).toBeUndefined()
        }
        const py = yield* backendOf("py")!.runtime({ skipCheck: false })
        expect(py.env({ executable: "/py", binDir: "/venv/bin" }, { artifactsDir: "/art" })).toMatchObject({
          PYTHONUNBUFFERED: "1",
          VEYYON_ARTIFACTS_DIR: "/art"
        })
        const julia = yield* juliaBackend.runtime({ skipCheck: false })
        const error = yield* Effect.flip(julia.resolve("/"))
        expect(error).toBeInstanceOf(RuntimeUnavailable)
        expect(error.message).toContain("no Julia runtime is available here")
      } finally {
        if (saved === undefined) delete process.env.SOME_API_KEY
        else process.env.SOME_API_KEY = saved
      }
    }).pipe(
      Effect.provide(Layer.merge(Settings.value(testSettings()), PythonRuntime.fixed({ executable: "/py", foundAt: "/py", rule: "PATH", version: undefined, checked: false, skipped: [] }, { PATH: "/usr/bin" })))
    ))

  it("the tool's enum and description follow the enabled backends", () => {
    const settings = testSettings({ eval: { py: false, rb: true } })
    expect((evalParametersSchema(settings) as { properties: { language: { enum: Array<string> } } }).properties.language.enum).toEqual(["js", "rb"])
    const description = evalDescription(settings)
    expect(description).toContain("Languages: js (JavaScript), rb (Ruby).")
    expect(description).toContain("Ruby cells have display(obj)")
    expect(description).not.toContain("IPython")
  })
})

describe("Ruby at the REPL", () => {
  it("a line opening a block keeps the cell open until an empty line; other lines are cells of their own", () => {
    for (const line of ["def sq(n)", "class Shape < Base", "module Tools", "  if ready", "result = case x", "[1, 2].each do |v|", "loop do", "items.map { |i|", "3.times do # count"]) {
      expect({ line, opens: opensRubyBlock(line) }).toEqual({ line, opens: true })
    }
    for (const line of ["puts 'done'", "x = 5", "undo", "hash = { a: 1 }", "define_thing", "# def later"]) {
      expect({ line, opens: opensRubyBlock(line) }).toEqual({ line, opens: false })
    }
    expect(isCompleteCell(["def sq(n)", "  n * n", "end"], opensRubyBlock)).toBe(false)
    expect(isCompleteCell(["def sq(n)", "  n * n", "end", ""], opensRubyBlock)).toBe(true)
    expect(isCompleteCell(["x = 5"], opensRubyBlock)).toBe(true)
  })
})

describe("Ruby interpreter rules", () => {
  it("accepts Ruby 2.7 and newer", () => {
    expect(["2.7.0", "2.7.8", "3.0.0", "3.1.2", "10.0.0"].map(isSupportedRubyVersion)).toEqual([true, true, true, true, true])
    expect(["2.6.10", "1.9.3", "2"].map(isSupportedRubyVersion)).toEqual([false, false, false])
  })

  it("takes the setting (a path relative to the cwd, or a command on PATH), else ruby on PATH, and says what is missing", () => {
    const bin = path.join(scratch, "bin")
    fs.mkdirSync(bin, { recursive: true })
    for (const name of ["ruby", "ruby3"]) fs.writeFileSync(path.join(bin, name), "#!/bin/sh\n", { mode: 0o755 })
    fs.writeFileSync(path.join(bin, "plain"), "", { mode: 0o644 })
    expect(findRubyCandidate(undefined, "/", bin)).toEqual({ file: path.join(bin, "ruby"), rule: "PATH" })
    expect(findRubyCandidate("ruby3", "/", bin)).toEqual({ file: path.join(bin, "ruby3"), rule: "setting" })
    expect(findRubyCandidate("bin/ruby3", scratch, "")).toEqual({ file: path.join(bin, "ruby3"), rule: "setting" })
    const none = findRubyCandidate(undefined, "/", path.join(scratch, "nothing"))
    expect(none).toBeInstanceOf(RuntimeUnavailable)
    expect((none as RuntimeUnavailable).message).toContain("no ruby found on PATH")
    expect((none as RuntimeUnavailable).message).toContain("VEYYON_RUBY_INTERPRETER")
    const plain = findRubyCandidate(path.join(bin, "plain"), "/", bin)
    expect((plain as RuntimeUnavailable).message).toContain("is not an executable file")
  })
})
