/**
 * `EvalTool.complete` and `EvalTool.inspect` against real Python, Node and Ruby kernels: what
 * they answer, that they answer while a cell runs without waiting for it or changing its
 * execution count, and that they run no cell code (getters, properties) to answer.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, ManagedRuntime } from "effect"
import { completionOf, toCodePoints, toUtf16 } from "../../../src/kernel/Introspection.ts"
import { evalLayer } from "../../../src/layers/EvalLive.ts"
import { EvalTool, type IntrospectParams } from "../../../src/services/tool/EvalTool.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { findRuby } from "../../runner/harness.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"

const python = findPython()
const ruby = findRuby()
const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-introspect-"))
const runtime = ManagedRuntime.make(
  evalLayer({ env: false, settings: { artifactsDir, eval: { js: true }, ...(python === undefined ? {} : { python: { interpreter: python } }) } })
)
afterAll(async () => {
  await runtime.dispose()
  fs.rmSync(artifactsDir, { recursive: true, force: true })
})

const where = (sessionId: string) => ({ sessionId, cwd: process.cwd() })
const run = (sessionId: string, language: "py" | "js" | "rb", code: string) =>
  runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run({ language, code }, where(sessionId))))
const complete = (sessionId: string, params: IntrospectParams) =>
  runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.complete(params, where(sessionId))))
const inspect = (sessionId: string, params: IntrospectParams) =>
  runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.inspect(params, where(sessionId))))

describe("introspection offsets", () => {
  it("convert between UTF-16 and code points around astral characters", () => {
    const text = "a😀b"
    expect(toCodePoints(text, 3)).toBe(2)
    expect(toUtf16(text, 2)).toBe(3)
    expect(toCodePoints(text, 99)).toBe(3)
    expect(completionOf("😀 ab", { matches: ["abc"], cursorStart: 2, cursorEnd: 4 })).toEqual({ matches: ["abc"], cursorStart: 3, cursorEnd: 5 })
  })
})

describe.skipIf(!integrationEnabled() || python === undefined)(titled("complete and inspect with a real Python", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  it("completes attributes, names, keyword arguments, modules and magics", async () => {
    await run("pc", "py", "import collections\ndef scale(value, factor=2, *, offset=0):\n    '''Scale a value.'''\n    return value * factor + offset\nlong_variable_name = 1")
    const attribute = await complete("pc", { language: "py", code: "collections.Ord" })
    expect(attribute).toEqual({ matches: ["OrderedDict"], cursorStart: 12, cursorEnd: 15 })
    const name = await complete("pc", { language: "py", code: "x = long_var" })
    expect(name.matches).toEqual(["long_variable_name"])
    expect(name.cursorStart).toBe(4)
    expect((await complete("pc", { language: "py", code: "pri" })).matches).toContain("print")
    expect((await complete("pc", { language: "py", code: "whi" })).matches).toContain("while")
    const keywords = await complete("pc", { language: "py", code: "scale(1, f" })
    expect(keywords.matches[0]).toBe("factor=")
    const kwOnly = await complete("pc", { language: "py", code: "scale(1, o" })
    expect(kwOnly.matches).toContain("offset=")
    expect((await complete("pc", { language: "py", code: "import collec" })).matches).toContain("collections")
    expect((await complete("pc", { language: "py", code: "from collections import Ord" })).matches).toEqual(["OrderedDict"])
    expect((await complete("pc", { language: "py", code: "%tim" })).matches).toEqual(["%time", "%timeit"])
    const middle = await complete("pc", { language: "py", code: "collections.Ord + 1", cursorPos: 15 })
    expect(middle.matches).toEqual(["OrderedDict"])
  })

  it("inspects like IPython's obj? and obj??, and says when nothing is there", async () => {
    await run("pi", "py", "def scale(value, factor=2):\n    '''Scale a value.'''\n    return value * factor")
    const brief = await inspect("pi", { language: "py", code: "scale" })
    expect(brief.found).toBe(true)
    const text = brief.bundle["text/plain"] as string
    expect(text).toContain("Signature:   scale(value, factor=2)")
    expect(text).toContain("Docstring:   Scale a value.")
    expect(text).toContain("Type:        function")
    const full = (await inspect("pi", { language: "py", code: "scale", detailLevel: 1 })).bundle["text/plain"] as string
    expect(full).toContain("return value * factor")
    const inCall = (await inspect("pi", { language: "py", code: "scale(3, ", cursorPos: 9 })).bundle["text/plain"] as string
    expect(inCall).toContain("scale(value, factor=2)")
    expect((await inspect("pi", { language: "py", code: "len" })).bundle["text/plain"]).toContain("Return the number of items")
    expect(await inspect("pi", { language: "py", code: "no_such_name" })).toEqual({ found: false, bundle: {} })
  })

  it("runs no property to answer, and answers while a cell runs without touching its count", async () => {
    const marker = path.join(artifactsDir, "release-the-cell")
    await run("pr", "py", `class P:\n    calls = 0\n    @property\n    def boom(self):\n        P.calls += 1\n        return 'x'\np = P()\nmarker = ${JSON.stringify(marker)}`)
    await complete("pr", { language: "py", code: "p.boom." })
    expect((await inspect("pr", { language: "py", code: "p.boom" })).bundle["text/plain"]).toContain("Type:        property")
    let waiting!: () => void
    const started = new Promise<void>((resolve) => (waiting = resolve))
    const cell = "import os, time\nprint('waiting', flush=True)\nwhile not os.path.exists(marker): time.sleep(0.01)\nP.calls"
    const running = runtime.runPromise(Effect.flatMap(EvalTool, (tool) =>
      tool.run({ language: "py", code: cell }, { ...where("pr"), onEvent: (event) => event._tag === "Stdout" && waiting() })))
    await started
    expect(await complete("pr", { language: "py", code: "P.cal" })).toMatchObject({ matches: ["calls"] })
    expect((await inspect("pr", { language: "py", code: "marker" })).found).toBe(true)
    fs.writeFileSync(marker, "")
    const result = await running
    expect(result).toMatchObject({ status: "ok", executionCount: 2 })
    expect(result.text).toContain("0")
    expect((await run("pr", "py", "P.calls")).executionCount).toBe(3)
  })
})

describe.skipIf(!integrationEnabled())(titled("complete and inspect with a real Node", integrationOff()), () => {
  it("completes properties without running getters, and names; inspects functions and values", async () => {
    await run("jc", "js", "function add(alpha, beta = 2) { return alpha + beta }\nglobalThis.hits = 0\nconst thing = { foo: 1, get boom() { hits++; return 1 } }")
    expect((await complete("jc", { language: "js", code: "thing.f" })).matches).toEqual(["foo"])
    expect((await complete("jc", { language: "js", code: "thing." })).matches).toContain("boom")
    expect((await complete("jc", { language: "js", code: "Math.flo" })).matches).toEqual(["floor"])
    expect((await complete("jc", { language: "js", code: "ad" })).matches).toContain("add")
    const fn = (await inspect("jc", { language: "js", code: "add" })).bundle["text/plain"] as string
    expect(fn).toContain("Signature:   function add(alpha, beta = 2)")
    expect((await inspect("jc", { language: "js", code: "add", detailLevel: 1 })).bundle["text/plain"]).toContain("return alpha + beta")
    expect((await inspect("jc", { language: "js", code: "thing" })).bundle["text/plain"]).toContain("foo: 1")
    expect(await inspect("jc", { language: "js", code: "nothing_here" })).toEqual({ found: false, bundle: {} })
    const counted = await run("jc", "js", "hits")
    expect(counted).toMatchObject({ text: "0", executionCount: 2 })
  })

  it("rejects a disabled language with the fix", async () => {
    const exit = await runtime.runPromiseExit(Effect.flatMap(EvalTool, (tool) => tool.complete({ language: "rb", code: "x" }, where("jc"))))
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain("VEYYON_RB=1")
  })
})

describe.skipIf(!integrationEnabled() || ruby === undefined)(titled("complete and inspect with a real Ruby", skipReason(integrationOff(), ruby === undefined && "no ruby on PATH (Debian: apt-get install ruby)")), () => {
  const rubyRuntime = ManagedRuntime.make(
    evalLayer({ env: false, settings: { artifactsDir, eval: { rb: true }, kernel: { backends: { rb: { interpreter: ruby ?? "ruby" } } } } })
  )
  afterAll(() => rubyRuntime.dispose())
  const rbRun = (sessionId: string, code: string) =>
    rubyRuntime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run({ language: "rb", code }, where(sessionId))))
  const rbComplete = (sessionId: string, code: string, cursorPos?: number) =>
    rubyRuntime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.complete({ language: "rb", code, ...(cursorPos === undefined ? {} : { cursorPos }) }, where(sessionId))))
  const rbInspect = (sessionId: string, code: string, detailLevel?: 0 | 1) =>
    rubyRuntime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.inspect({ language: "rb", code, ...(detailLevel === undefined ? {} : { detailLevel }) }, where(sessionId))))

  it("completes locals, methods, constants, members, ivars and keywords; inspects methods and values", async () => {
    await rbRun("rc", [
      "# Scales a value.",
      "def scale(value, factor = 2, offset: 0)",
      "  value * factor + offset",
      "end",
      "long_variable_name = 1",
      "class Shape",
      "  SIDES = 4",
      "  def self.square; end",
      "end",
      "@count = 3",
      "h = { a: [1, 2] }",
      "nil"
    ].join("\n"))
    expect((await rbComplete("rc", "x = long_var")).matches).toEqual(["long_variable_name"])
    expect((await rbComplete("rc", "x = long_var")).cursorStart).toBe(4)
    expect((await rbComplete("rc", "Shape::")).matches).toEqual(["SIDES", "square"])
    expect((await rbComplete("rc", "h.ke")).matches).toEqual(["keep_if", "key", "key?", "keys"])
    expect((await rbComplete("rc", "@co")).matches).toEqual(["@count"])
    expect((await rbComplete("rc", "whi")).matches).toContain("while")
    expect((await rbComplete("rc", "sca")).matches).toContain("scale")
    expect((await rbComplete("rc", "long_var + 1", 8)).matches).toEqual(["long_variable_name"])
    const method = (await rbInspect("rc", "scale")).bundle["text/plain"] as string
    expect(method).toContain("Signature:   scale(value, factor = ..., offset: ...)")
    expect(method).toContain("Docstring:   Scales a value.")
    expect(method).not.toContain("value * factor + offset")
    expect((await rbInspect("rc", "scale", 1)).bundle["text/plain"]).toContain("value * factor + offset\nend")
    const value = (await rbInspect("rc", "h")).bundle["text/plain"] as string
    expect(value).toContain("Type:        Hash")
    expect(value).toContain("Length:      1")
    expect(await rbInspect("rc", "no_such_name")).toEqual({ found: false, bundle: {} })
  })

  it("runs no cell code to answer, and answers while a cell runs without touching its count", async () => {
    const marker = path.join(artifactsDir, "release-the-ruby-cell")
    await rbRun("rr", [
      "$calls = 0",
      "class Sneaky",
      "  def methods(*) $calls += 1; super end",
      "  def public_methods(*) $calls += 1; super end",
      "  def inspect; $calls += 1; 'sneaky' end",
      "  def method(*) $calls += 1; super end",
      "  def boom; 1 end",
      "end",
      "s = Sneaky.new",
      `marker = ${JSON.stringify(marker)}`
    ].join("\n"))
    expect((await rbComplete("rr", "s.bo")).matches).toEqual(["boom"])
    expect((await rbInspect("rr", "s")).bundle["text/plain"]).toMatch(/String form: #<Sneaky:0x[0-9a-f]+>/)
    expect((await rbInspect("rr", "s.boom")).found).toBe(true)
    let waiting!: () => void
    const started = new Promise<void>((resolve) => (waiting = resolve))
    const running = rubyRuntime.runPromise(Effect.flatMap(EvalTool, (tool) =>
      tool.run({ language: "rb", code: "puts 'waiting'\n$stdout.flush\nsleep 0.01 until File.exist?(marker)\n$calls" }, {
        ...where("rr"),
        onEvent: (event) => event._tag === "Stdout" && waiting()
      })))
    await started
    expect((await rbComplete("rr", "mark")).matches).toEqual(["marker"])
    expect((await rbInspect("rr", "marker")).found).toBe(true)
    fs.writeFileSync(marker, "")
    const result = await running
    expect(result).toMatchObject({ status: "ok", executionCount: 2 })
    expect(result.text.trim().split("\n").at(-1)).toBe("0")
  })
})
