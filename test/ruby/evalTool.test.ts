/**
 * `language: "rb"` through the whole stack (evalLayer, EvalTool, registry, runner cache,
 * kernel actor, output sink): state across calls, errors, the watchdog's interrupt and the
 * kill of a stuck cell, kv shared with Python and JavaScript, rich display, and the
 * `eval.rb` switch. Skips, saying why, when no ruby is on PATH.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Exit } from "effect"
import { findRubyCandidate } from "../../src/backends/ruby.ts"
import { isRunning, waitUntil } from "../support/process.ts"
import { toolRuntimes } from "../support/toolRuntimes.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const rubyFound = !(findRubyCandidate(undefined, process.cwd(), process.env.PATH) instanceof Error)
const python = findPython()

const tools = toolRuntimes("veyyon-rb-evaltool-", "rb1")
const artifactsDir = tools.artifactsDir
const makeRuntime = tools.make
afterAll(tools.disposeAll)

describe.skipIf(!rubyFound)(titled("EvalTool with Ruby cells", rubyFound ? undefined : "no ruby on PATH (Debian: apt-get install ruby)"), () => {
  const tool = makeRuntime({
    env: false,
    settings: { artifactsDir, eval: { rb: true }, ...(python === undefined ? {} : { python: { interpreter: python } }) }
  })
  const rb = (code: string, extra: Record<string, unknown> = {}, sessionId?: string) => tool.ok({ language: "rb", code, ...extra }, sessionId)

  it("is off unless eval.rb is on: the enum leaves rb out and an rb cell says how to enable it", async () => {
    const off = makeRuntime({ env: false, settings: { artifactsDir } })
    const definition = await off.definition()
    expect((definition.parameters as { properties: { language: { enum: Array<string> } } }).properties.language.enum).toEqual(["py", "js"])
    const exit = await off.run({ language: "rb", code: "1" })
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain("VEYYON_RB=1")
    const on = await tool.definition()
    expect((on.parameters as { properties: { language: { enum: Array<string> } } }).properties.language.enum).toEqual(["py", "js", "rb"])
    expect(on.description).toContain("rb (Ruby)")
    expect(on.description).toContain("one binding, as in IRB")
  })

  it("keeps locals, methods and constants across calls, and shows the last expression's inspect", async () => {
    expect(await rb("count = 40\ndef bump(n) = n + 1\nLIMIT = 2")).toMatchObject({ status: "ok", text: "", executionCount: 1 })
    expect(await rb("bump(count) + LIMIT - 1")).toMatchObject({ status: "ok", text: "42", executionCount: 2 })
    expect((await rb("puts 'out'\n{ a: [1, nil] }")).text).toBe("out\n{:a=>[1, nil]}")
  })

  it("reports an exception with its class, message and backtrace, and keeps earlier state", async () => {
    await rb("kept = :still_here")
    const result = await rb("def explode = raise(ArgumentError, 'bad value')\nexplode")
    expect(result.status).toBe("error")
    expect(result.error).toMatchObject({ ename: "ArgumentError", evalue: "bad value" })
    expect(result.error!.traceback.join("\n")).toContain("explode")
    expect(result.text).toContain("ArgumentError")
    expect((await rb("kept")).text).toBe(":still_here")
  })

  it("a cell past its timeout is interrupted and the kernel keeps its state", async () => {
    await rb("survivor = 41", {}, "rb-timeout")
    const result = await rb("sleep 60", { timeout: 1 }, "rb-timeout")
    expect(result).toMatchObject({ status: "error", cancelled: true, timedOut: true, killed: false })
    expect(result.error?.ename).toBe("Interrupt")
    expect((await rb("survivor + 1", {}, "rb-timeout")).text).toBe("42")
  })

  it("a cell that swallows the interrupt is killed after the escalation, and the next call gets a fresh kernel", async () => {
    const pid = Number((await rb("Process.pid", {}, "rb-stuck")).text)
    expect(isRunning(pid)).toBe(true)
    const result = await rb("loop do\n  begin\n    sleep 60\n  rescue Interrupt\n  end\nend", { timeout: 1 }, "rb-stuck")
    expect(result).toMatchObject({ status: "error", timedOut: true, killed: true })
    expect(result.notice).toContain("killed")
    expect(await waitUntil(() => !isRunning(pid), 10_000)).toBe(true)
    const fresh = await rb("Process.pid", {}, "rb-stuck")
    expect(fresh.status).toBe("ok")
    expect(Number(fresh.text)).not.toBe(pid)
  })

  it.skipIf(!integrationEnabled() || python === undefined)(titled("a kv key written by Python is read by Ruby and JavaScript, and back", skipReason(integrationOff(), python === undefined && "no python3 found")), async () => {
    const session = "rb-kv"
    const py = (code: string) => tool.ok({ language: "py", code }, session)
    await py(`kv.set("from-py", {"n": [1, 2.5, None], "s": "é✓", "ok": True});`)
    expect((await rb(`kv["from-py"]`, {}, session)).text).toBe(`{"n"=>[1, 2.5, nil], "s"=>"é✓", "ok"=>true}`)
    await rb(`kv["from-rb"] = { "list" => [1, "two"], "flag" => false }\nkv.delete("from-py")`, {}, session)
    expect((await py("import json\nprint(json.dumps(kv.get('from-rb'), sort_keys=True))")).text).toBe('{"flag": false, "list": [1, "two"]}')
    expect((await py("kv.get('from-py', 'gone')")).text).toBe("'gone'")
    expect((await tool.ok({ language: "js", code: "JSON.stringify(kv.get('from-rb'))" }, session)).text).toBe(`'{"list":[1,"two"],"flag":false}'`)
  })

  it("display honours to_html and an explicit MIME hash", async () => {
    const result = await rb(
      "class Card\n  def to_html = '<b>card</b>'\n  def inspect = '#<Card>'\nend\ndisplay(Card.new)\ndisplay({ 'text/html' => '<i>raw</i>', 'text/plain' => 'raw' })\nnil"
    )
    const bundles = result.outputs.flatMap((output) => (output._tag === "Display" ? [output.bundle] : []))
    expect(bundles).toHaveLength(2)
    expect(bundles[0]).toMatchObject({ "text/html": "<b>card</b>", "text/plain": "#<Card>" })
    expect(bundles[1]).toMatchObject({ "text/html": "<i>raw</i>", "text/plain": "raw" })
  })

  it("reset: true starts a fresh Ruby kernel", async () => {
    await rb("gone_soon = 1", {}, "rb-reset")
    const result = await rb("defined?(gone_soon) ? :kept : :fresh", { reset: true }, "rb-reset")
    expect(result).toMatchObject({ text: ":fresh", executionCount: 1 })
  })
})

const bwrapWorks = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]).status === 0

describe.skipIf(!rubyFound || !bwrapWorks)(titled("sandboxed Ruby cells", skipReason(!rubyFound && "no ruby on PATH (Debian: apt-get install ruby)", !bwrapWorks && "bwrap is missing or cannot create namespaces here")), () => {
  it("run in the sandbox: a writable cwd, read-only system dirs, their own pid namespace, and SIGINT still reaches the cell", async () => {
    const cwd = fs.mkdtempSync(path.join(artifactsDir, "cwd-"))
    const tool = makeRuntime({ env: false, settings: { artifactsDir, eval: { rb: true }, sandbox: { mode: "required" } } }, cwd)
    const run = (code: string, timeout?: number) =>
      tool.ok({ language: "rb", code, ...(timeout === undefined ? {} : { timeout }) }, "rb-sandbox")
    const seen = await run([
      "File.write('made.txt', 'ok')",
      "usr = begin; File.write('/usr/veyyon-probe', 'x'); 'writable'; rescue SystemCallError => e; e.class.name; end",
      "pids = Dir.children('/proc').grep(/\\A\\d+\\z/).size",
      "[usr, pids < 10, Process.pid < 10]"
    ].join("\n"))
    expect(seen.error).toBeUndefined()
    expect(seen.text).toMatch(/^\["Errno::E(ROFS|ACCES|PERM)", true, true\]$/)
    expect(fs.readFileSync(path.join(cwd, "made.txt"), "utf8")).toBe("ok")
    await run("kept = 41")
    expect(await run("sleep 60", 1)).toMatchObject({ timedOut: true, killed: false })
    expect((await run("kept + 1")).text).toBe("42")
  })
})

describe("EvalTool with Julia cells", () => {
  it("with eval.jl on, a jl cell fails saying no Julia runtime is available, and the other languages keep working", async () => {
    const tool = makeRuntime({ env: false, settings: { artifactsDir, eval: { jl: true } } })
    const exit = await tool.run({ language: "jl", code: "1 + 1" }, "jl")
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain("no Julia runtime is available here")
    expect((await tool.ok({ language: "js", code: "1 + 1" }, "jl")).text).toBe("2")
  })
})
