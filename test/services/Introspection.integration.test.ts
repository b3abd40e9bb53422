/**
 * `EvalTool.complete` and `EvalTool.inspect` against real Python and Node kernels: what
 * they answer, that they answer while a cell runs without waiting for it or changing its
 * execution count, and that they run no cell code (getters, properties) to answer.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, ManagedRuntime } from "effect"
import { completionOf, toCodePoints, toUtf16 } from "../../src/kernel/Introspection.ts"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import { EvalTool, type IntrospectParams } from "../../src/services/EvalTool.ts"
import { findPython, integrationEnabled } from "../support/python.ts"

const python = findPython()
const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-introspect-"))
const runtime = ManagedRuntime.make(
  evalLayer({ env: false, settings: { artifactsDir, eval: { js: true }, ...(python === undefined ? {} : { python: { interpreter: python } }) } })
)
afterAll(async () => {
  await runtime.dispose()
  fs.rmSync(artifactsDir, { recursive: true, force: true })
})

const where = (sessionId: string) => ({ sessionId, cwd: process.cwd() })
const run = (sessionId: string, language: "py" | "js", code: string) =>
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

describe.skipIf(!integrationEnabled() || python === undefined)("complete and inspect with a real Python", () => {
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

describe.skipIf(!integrationEnabled())("complete and inspect with a real Node", () => {
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
