/**
 * The Ruby runner where Ruby differs from the other runners: one binding for locals, methods
 * and constants; which cells have a result; backtraces; display() hooks; output of every kind
 * arriving as frames; SIGINT in blocking calls; the prelude's kv, defs, env, agent.
 */
import { spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import {
  type Cell,
  type Frame,
  type Kernel,
  kvHost,
  plainResult,
  rubyRunner,
  RUBY_RUNNER_PATH,
  startKernel,
  startWithPrelude
} from "../runner/harness.ts"
import { isLive, isRunning, waitUntil } from "../support/process.ts"
import { titled } from "../support/skip.ts"

const runner = rubyRunner()

describe.skipIf(runner === undefined)(titled("Ruby runner", runner === undefined ? "no ruby on PATH (Debian: apt-get install ruby)" : undefined), () => {
  let kernel: Kernel
  const spawned: Array<Kernel> = []
  const artifacts = NodeFs.realpathSync(NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), "veyyon-ruby-")))

  const start = async (): Promise<Kernel> => {
    const started = await startWithPrelude(runner!, { env: { VEYYON_ARTIFACTS_DIR: artifacts } })
    spawned.push(started)
    return started
  }

  const run = (code: string, options: Parameters<Kernel["execute"]>[1] = {}): Promise<Cell> => kernel.execute(code, options)

  const interruptAfter = async (code: string, marker: string): Promise<Cell> => {
    const id = kernel.request(code)
    await kernel.waitForStdout(marker, id)
    kernel.interrupt()
    return kernel.collect(id)
  }

  beforeAll(async () => {
    kernel = await start()
  })

  afterEach(() => {
    for (const k of spawned) {
      expect(k.schemaErrors.splice(0)).toEqual([])
      expect(k.badLines.splice(0)).toEqual([])
      expect(k.rawStdout).toBe("")
    }
  })

  afterAll(() => {
    for (const k of spawned) k.kill()
    NodeFs.rmSync(artifacts, { recursive: true, force: true })
  })

  describe("state and results", () => {
    it("keeps locals, methods and constants across cells in one binding", async () => {
      await run("count = 40\ndef bump(n); n + 1; end\nLIMIT = 2")
      expect(plainResult(await run("bump(count) + LIMIT - 1"))).toBe("42")
      expect(plainResult(await run("count += 1; count"))).toBe("41")
    })

    it("shows the last expression's inspect, but not nil, an assignment, a definition or a cell ending in ;", async () => {
      expect(plainResult(await run("'text'"))).toBe('"text"')
      expect(plainResult(await run("[1, :a, nil]"))).toBe("[1, :a, nil]")
      for (const code of ["nil", "puts 'x'", "y = 5", "a, b = 1, 2", "y += 1", "def helper; end", "class Shape; end", "module Tools; end", "y;", "y # note\n;  # why\n"]) {
        const cell = await run(code)
        expect({ code, results: cell.results }).toEqual({ code, results: [] })
        expect(cell.done.status).toBe("ok")
      }
      expect(plainResult(await run("y"))).toBe("6")
    })

    it("shows a result whose inspect raises, or that has no methods at all, without failing the cell", async () => {
      const raising = await run("class Grumpy; def inspect; raise('no'); end; end\nGrumpy.new")
      expect(plainResult(raising)).toBe("#<Grumpy (inspect raised RuntimeError)>")
      const bare = await run("BasicObject.new")
      expect(plainResult(bare)).toBe("#<BasicObject (inspect raised NoMethodError)>")
      expect(bare.done.status).toBe("ok")
    })

    it("binds _ to the last result of a cell that stores history", async () => {
      await run("6 * 7")
      expect(plainResult(await run("_"))).toBe("42")
      await run("1000", { storeHistory: false })
      expect(plainResult(await run("_"))).toBe("42")
    })
  })

  describe("errors", () => {
    it("reports class, message and a backtrace through the cells, without runner or prelude frames", async () => {
      await run("def inner(x)\n  raise KeyError, \"missing #{x}\"\nend")
      const cell = await run("def outer; inner(:k); end\nouter")
      expect(cell.error).toMatchObject({ ename: "KeyError", evalue: "missing k" })
      const traceback = cell.error!.traceback as Array<string>
      // Ruby 3.4 spells frames 'Object#inner' where earlier versions write `inner'
      expect(traceback[0]).toMatch(/^<cell-\d+>:2:in [`'](Object#)?inner': missing k \(KeyError\)$/)
      expect(traceback.slice(1).join("\n")).toMatch(/^\tfrom <cell-\d+>:1:in [`'](Object#)?outer'\n\tfrom <cell-\d+>:2:in [`']<main>'$/)
      expect(traceback.join("\n")).not.toMatch(/runner\.rb|veyyon prelude/)
    })

    it("reports a syntax error against the cell and keeps serving", async () => {
      const cell = await run("def broken(\n  1 +")
      expect(cell.error).toMatchObject({ ename: "SyntaxError" })
      expect(String(cell.error!.evalue)).toMatch(/<cell-\d+>:2/)
      expect(plainResult(await run("1 + 1"))).toBe("2")
    })

    it("reports exit as SystemExit and stays alive", async () => {
      const cell = await run("exit 3")
      expect(cell.error).toMatchObject({ ename: "SystemExit" })
      expect(plainResult(await run(":alive"))).toBe(":alive")
    })
  })

  describe("output", () => {
    it("turns puts, $stdout, STDOUT.syswrite, $stderr and child processes into frames, and nothing reaches fd 1", async () => {
      const cell = await run("puts 'a'\n$stdout.write(\"b\\n\")\nSTDOUT.syswrite(\"c\\n\")\nsystem('echo d')\nspawn('echo e').then { |pid| Process.wait(pid) }\n$stderr.puts 'f'\nsystem('echo g >&2')\nnil")
      expect(cell.stdout).toBe("a\nb\nc\nd\ne\n")
      expect(cell.stderr).toBe("f\ng\n")
    })

    it("keeps a frame written with STDOUT.syswrite as plain output", async () => {
      const cell = await run(`STDOUT.syswrite(%q({"type":"done","id":"x","status":"ok","executionCount":1}) + "\\n")`)
      expect(cell.stdout).toContain('"type":"done"')
      expect(cell.frames.filter((f) => f.type === "done")).toHaveLength(1)
    })

    it("joins a character split across writes and replaces invalid UTF-8", async () => {
      const cell = await run(`$stdout.write("caf\\xC3".b)\n$stdout.write("\\xA9 \\xFF!\\n".b)\nnil`)
      expect(cell.stdout).toBe("café \uFFFD!\n")
    })

    it("delivers 5 MB of output complete, in bounded frames", async () => {
      const cell = await run("50_000.times { |i| puts format('%099d', i) }\nnil")
      expect(cell.stdout.length).toBe(50_000 * 100)
      expect(cell.stdout.endsWith(`${"0".repeat(94)}49999\n`)).toBe(true)
      for (const frame of cell.frames) if (frame.type === "stdout") expect(String(frame.data).length).toBeLessThanOrEqual(64 * 1024)
    })
  })

  describe("display", () => {
    const bundleOf = (cell: Cell, index = 0) => cell.displays[index]!

    it("honours to_html, to_markdown, to_svg and to_png, always with text/plain", async () => {
      await run([
        "class Report",
        "  def to_html; '<b>report</b>'; end",
        "  def to_markdown; '**report**'; end",
        "  def inspect; '#<Report>'; end",
        "end",
        "class Chart",
        "  def to_svg; '<svg/>'; end",
        "  def to_png; \"\\x89PNG\\r\\n\\x1A\\n\".b + \"\\x00\\xFF\".b; end",
        "end"
      ].join("\n"))
      const cell = await run("display(Report.new, Chart.new)")
      expect(bundleOf(cell)).toEqual({ "text/html": "<b>report</b>", "text/markdown": "**report**", "text/plain": "#<Report>" })
      expect(bundleOf(cell, 1)["image/svg+xml"]).toBe("<svg/>")
      expect(Buffer.from(String(bundleOf(cell, 1)["image/png"]), "base64")).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff]))
      expect(plainResult(cell)).toBeUndefined()
    })

    it("gives a cell's result the same rich types", async () => {
      const cell = await run("Report.new")
      expect(cell.results[0]).toEqual({ "text/html": "<b>report</b>", "text/markdown": "**report**", "text/plain": "#<Report>" })
    })

    it("takes an explicit MIME hash, raw: true, mime: and to_mime_bundle", async () => {
      const cell = await run([
        "display({'text/markdown' => '# hi'})",
        "display({'application/json' => {'a' => [1]}}, raw: true)",
        "display('<i>x</i>', mime: 'text/html')",
        "class Bundled; def to_mime_bundle; {'text/latex' => '$x$'}; end; end",
        "display(Bundled.new)"
      ].join("\n"))
      expect(cell.displays[0]).toEqual({ "text/markdown": "# hi" })
      expect(cell.displays[1]).toEqual({ "application/json": { a: [1] } })
      expect(cell.displays[2]).toEqual({ "text/html": "<i>x</i>", "text/plain": '"<i>x</i>"' })
      expect(cell.displays[3]!["text/latex"]).toBe("$x$")
      expect(typeof cell.displays[3]!["text/plain"]).toBe("string")
    })

    it("falls back to text/plain when a hook raises, and keeps display order with output", async () => {
      const cell = await run("class Flaky; def to_html; raise('no'); end; def inspect; 'flaky'; end; end\nputs 'before'\ndisplay(Flaky.new)\nputs 'after'")
      expect(cell.displays[0]).toEqual({ "text/plain": "flaky" })
      expect(cell.frames.map((f) => f.type).filter((t) => t !== "started" && t !== "done")).toEqual(["stdout", "display", "stdout"])
    })
  })

  describe("SIGINT", () => {
    it("interrupts sleep, keeps state and reports Interrupt with cancelled", async () => {
      const cell = await interruptAfter("kept = 41\nputs 'ready'\nsleep 60", "ready")
      expect(cell.error).toMatchObject({ ename: "Interrupt" })
      expect(cell.done).toMatchObject({ status: "error", cancelled: true })
      expect(plainResult(await run("kept + 1"))).toBe("42")
    })

    it("interrupts a cell waiting for a child process", async () => {
      const cell = await interruptAfter("puts 'ready'\nsystem('sleep 60')\nsleep 60", "ready")
      expect(cell.done).toMatchObject({ status: "error", cancelled: true })
    })

    it("does not report cancelled when the cell rescues the interrupt, nor for its own raise Interrupt", async () => {
      const rescued = await interruptAfter("begin\n  puts 'ready'\n  sleep 60\nrescue Interrupt\n  :caught\nend", "ready")
      expect(plainResult(rescued)).toBe(":caught")
      expect(rescued.done).toMatchObject({ status: "ok", cancelled: false })
      const own = await run("raise Interrupt")
      expect(own.done).toMatchObject({ status: "error", cancelled: false })
    })

    it("interrupts a cell waiting for the host's answer and resumes the paused timeout before done", async () => {
      const id = kernel.request("puts 'ready'\ncompletion('never answered')")
      await kernel.waitFor((f) => f.type === "bridge" && f.id === id)
      kernel.interrupt()
      const cell = await kernel.collect(id)
      expect(cell.done).toMatchObject({ status: "error", cancelled: true })
      expect(cell.statuses.map((s) => s.action)).toEqual(["pause", "resume"])
      const late = kernel.frames.find((f) => f.type === "bridge" && f.id === id)!
      kernel.send({ type: "bridge_result", callId: late.callId, ok: true, value: "too late" })
      expect(plainResult(await run("1 + 1"))).toBe("2")
    })

    it("survives a burst of SIGINTs landing anywhere in a cell and its bookkeeping", async () => {
      const id = kernel.request("200_000.times { |k| puts k }")
      await kernel.waitForStdout("\n", id)
      for (let shot = 0; shot < 20; shot++) kernel.interrupt()
      const cell = await kernel.collect(id)
      expect(["ok", "error"]).toContain(cell.done.status)
      expect((await run("sleep 0.3\n7")).done).toMatchObject({ status: "ok", cancelled: false })
      for (let round = 0; round < 5; round++) {
        const quick = kernel.request("1 + 1")
        kernel.interrupt()
        await kernel.collect(quick)
      }
      expect(plainResult(await run("kept * 2"))).toBe("82")
      expect(kernel.hasExited).toBe(false)
    })
  })

  describe("prelude", () => {
    it("writes kv through the host with the kv bridge call and reads the files itself", async () => {
      const calls: Array<Frame> = []
      const host = kvHost(path.join(artifacts, "kv"))
      kernel.answerBridge((frame) => {
        calls.push(frame)
        return host(frame)
      })
      try {
        const set = await run("kv.set('shared', {'n' => 1, 'big' => 12345678901234567890})\nkv['other'] = [true]\nkv.get('shared')")
        expect(set.error).toBeUndefined()
        expect(calls.map((f) => f.params)).toEqual([
          { op: "set", key: "shared", value: '{"n":1,"big":12345678901234567890}' },
          { op: "set", key: "other", value: "[true]" }
        ])
        expect(plainResult(set)).toBe('{"n"=>1, "big"=>12345678901234567890}')
        expect(plainResult(await run("kv.list"))).toBe('["other", "shared"]')
        expect(plainResult(await run("[kv.delete('other'), kv.delete('other'), kv.key?('other')]"))).toBe("[true, false, false]")
        expect(calls.slice(2).map((f) => f.params)).toEqual([{ op: "delete", key: "other" }, { op: "delete", key: "other" }])
      } finally {
        kernel.answerBridge(undefined)
      }
    })

    it("refuses bad keys and values before asking the host, and raises the host's refusals as ArgumentError", async () => {
      const before = kernel.frames.filter((f) => f.type === "bridge").length
      expect((await run("kv.set('a/b', 1)")).error).toMatchObject({ ename: "ArgumentError" })
      expect((await run("kv.set('', 1)")).error).toMatchObject({ ename: "ArgumentError" })
      expect((await run("kv.set('k', Object.new)")).error).toMatchObject({ ename: "TypeError" })
      expect((await run("kv.set('k', Float::NAN)")).error).toMatchObject({ ename: "TypeError" })
      expect((await run("kv.set('k', 'x' * (256 * 1024))")).error).toMatchObject({ ename: "ArgumentError" })
      expect(kernel.frames.filter((f) => f.type === "bridge").length).toBe(before)
      kernel.answerBridge(() => ({ ok: false, error: { name: "KvStoreFull", message: "kv store is full" } }))
      try {
        const full = await run("kv.set('k', 1)")
        expect(full.error).toMatchObject({ ename: "ArgumentError", evalue: "kv store is full" })
      } finally {
        kernel.answerBridge(undefined)
      }
    })

    it("defs lists what cells defined, not what the prelude did; env reads and sets variables", async () => {
      const fresh = await start()
      const defs = await fresh.execute("total = 3\ndef area(w, h = 1); w * h; end\nPoint = Struct.new(:x)\ndefs")
      expect(plainResult(defs)).toBe(["Point: class", "area: method(w, h = ...)", "total: Integer = 3"].join("\n"))
      const env = await fresh.execute("env('VEYYON_RUBY_TEST', 'on')\nenv('VEYYON_RUBY_TEST')")
      expect(env.stdout).toBe("env: VEYYON_RUBY_TEST=on\n")
      expect(plainResult(env)).toBe('"on"')
      expect((await fresh.execute("env('VEYYON_NOT_SET_ANYWHERE')")).error).toMatchObject({ ename: "KeyError" })
    })

    it("agent sends the Python prelude's params and checks a schema answer", async () => {
      kernel.answerBridge(() => ({ ok: true, value: { text: "```json\n{\"n\": 2}\n```", id: "a1", agent: "deep" } }))
      try {
        const cell = await run("agent('count', schema: {'type' => 'object', 'required' => ['n']})")
        expect(plainResult(cell)).toBe('{"n"=>2}')
        const bridge = cell.frames.find((f) => f.type === "bridge")!
        expect(bridge).toMatchObject({
          method: "agent",
          params: { prompt: "count", agent: "deep", model: null, label: null, schema: { type: "object", required: ["n"] }, isolated: null, apply: null, merge: null }
        })
        const wrong = await run("agent('count', schema: {'type' => 'array'})")
        expect(wrong.error).toMatchObject({ ename: "Veyyon::Prelude::SchemaError" })
        const handle = await run("agent('count', handle: true)['handle']")
        expect(plainResult(handle)).toBe('"agent://a1"')
      } finally {
        kernel.answerBridge(undefined)
      }
    })
  })

  describe("standalone", () => {
    it("serves stdin and stdout when started without fd 3", async () => {
      const piped = await startKernel({ runner: { ...runner!, channel: "stdio" } })
      spawned.push(piped)
      const cell = await piped.execute("puts 'hi'\nSTDOUT.syswrite(\"raw\\n\")\n1 + 1")
      expect(cell.stdout).toBe("hi\nraw\n")
      expect(plainResult(cell)).toBe("2")
    })

    it("ends when its host dies, even while a cell is busy", async () => {
      const host = `
        const { spawn } = require("node:child_process")
        const runner = spawn(${JSON.stringify(runner!.command)}, [${JSON.stringify(RUBY_RUNNER_PATH)}], { stdio: ["ignore", "ignore", "ignore", "pipe"], detached: true })
        runner.stdio[3].write(JSON.stringify({ id: "busy", code: "loop { }", silent: false, storeHistory: true }) + "\\n")
        runner.stdio[3].on("data", (chunk) => { if (String(chunk).includes("started")) console.log(runner.pid) })
      `
      const parent = spawn(process.execPath, ["-e", host], { stdio: ["ignore", "pipe", "inherit"] })
      try {
        const pid = await new Promise<number>((resolve) => parent.stdout!.once("data", (chunk) => resolve(Number(String(chunk).trim()))))
        expect(isRunning(pid)).toBe(true)
        parent.kill("SIGKILL")
        const gone = await waitUntil(() => !isLive(pid), 10_000)
        if (!gone) process.kill(pid, "SIGKILL")
        expect(gone).toBe(true)
      } finally {
        if (parent.exitCode === null && parent.signalCode === null) parent.kill("SIGKILL")
      }
    })

    it("does not start a server when required as a library", async () => {
      const { execFileSync } = await import("node:child_process")
      const out = execFileSync(runner!.command, ["-e", `require ${JSON.stringify(RUBY_RUNNER_PATH)}; puts VeyyonRunner::Protocol.classify('{"type":"exit"}').inspect`], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"]
      })
      expect(out).toBe("[:exit]\n")
    })
  })
})
