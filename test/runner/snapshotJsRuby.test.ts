/**
 * Snapshots and restores in the JavaScript and Ruby runners (PROTOCOL.md, "Snapshots and
 * restores"), driven standalone: cells run, a snapshot is taken, a NEW runner process gets
 * it back, and a cell there uses every restored name. Also: what cannot be saved is named,
 * budgets, `unchanged`, yielding to a cell, and a corrupt payload that leaves the runner
 * serving.
 */
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { type Frame, type Kernel, killAll, nodeRunner, plainResult, RUBY_RUNNER_PATH, rubyRunner, type RunnerSpec, startWithPrelude } from "./harness.ts"
import { titled } from "../support/skip.ts"

const MiB = 1024 * 1024
let seq = 0

interface Snapshot {
  readonly done: Frame
  readonly payload: Buffer
  readonly chunks: ReadonlyArray<Frame>
}

const snapshot = async (
  kernel: Kernel,
  options: { budget?: number; valueBudget?: number; known?: string } = {}
): Promise<Snapshot> => {
  const id = `snap${++seq}`
  const from = kernel.frames.length
  kernel.send({
    type: "snapshot",
    id,
    budget: options.budget ?? 256 * MiB,
    valueBudget: options.valueBudget ?? 256 * MiB,
    ...(options.known !== undefined ? { known: options.known } : {})
  })
  const done = await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === id, 60_000, from)
  const chunks = kernel.frames.filter((f) => f.type === "snapshot_chunk" && f.id === id)
  return { done, chunks, payload: Buffer.concat(chunks.map((f) => Buffer.from(String(f.data), "base64"))) }
}

/** Sends payload back in pieces of `pieceBytes` (decoded), the last with more: false. */
const restore = async (kernel: Kernel, payload: Buffer, executionCount?: number, pieceBytes = 64 * 1024): Promise<Frame> => {
  const id = `restore${++seq}`
  const from = kernel.frames.length
  const count = Math.max(1, Math.ceil(payload.length / pieceBytes))
  for (let i = 0; i < count; i++) {
    const more = i < count - 1
    kernel.send({
      type: "restore",
      id,
      data: payload.subarray(i * pieceBytes, (i + 1) * pieceBytes).toString("base64"),
      more,
      ...(!more && executionCount !== undefined ? { executionCount } : {})
    })
  }
  return kernel.waitFor((f) => f.type === "restore_done" && f.id === id, 60_000, from)
}

const skippedNames = (frame: Frame): Record<string, string> =>
  Object.fromEntries((frame.skipped as Array<{ name: string; reason: string }>).map((s) => [s.name, s.reason]))

const sha256 = (data: Buffer): string => NodeCrypto.createHash("sha256").update(data).digest("hex")

const suite = (language: string, runner: RunnerSpec | undefined, body: (start: () => Promise<Kernel>, dir: string) => void) =>
  describe.skipIf(runner === undefined)(titled(`${language} snapshots`, runner === undefined ? `no ${language} interpreter on PATH` : undefined), () => {
    const spawned: Array<Kernel> = []
    const dir = NodeFs.realpathSync(NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), `veyyon-snap-${language}-`)))
    const start = async (): Promise<Kernel> => {
      const kernel = await startWithPrelude(runner!, { cwd: dir, env: { VEYYON_ARTIFACTS_DIR: dir } })
      spawned.push(kernel)
      return kernel
    }
    afterEach(() => {
      for (const kernel of spawned) {
        expect(kernel.schemaErrors.splice(0)).toEqual([])
        expect(kernel.badLines.splice(0)).toEqual([])
      }
    })
    afterAll(() => {
      killAll()
      NodeFs.rmSync(dir, { recursive: true, force: true })
    })
    body(start, dir)
  })

const expectOk = (cell: { done: Frame; error: Frame | undefined }): void => {
  expect(cell.error).toBeUndefined()
  expect(cell.done.status).toBe("ok")
}

suite("JavaScript", nodeRunner(), (start, dir) => {
  it("brings every kind of binding back in a new runner process", async () => {
    const work = path.join(dir, "work")
    NodeFs.mkdirSync(work)
    const first = await start()
    expectOk(await first.execute([
      "const cfg = { name: 'x', nested: { n: 1 } }",
      "let count = 41",
      "const shared = [1, 2]",
      "var alias = shared",
      "const m = new Map([['a', 1]])",
      "function add(a, b) { return a + b }",
      "class Point { constructor(x, y) { this.x = x; this.y = y } norm() { return Math.hypot(this.x, this.y) } }",
      "class Point3 extends Point { constructor(x, y, z) { super(x, y); this.z = z } }",
      "const p = new Point(3, 4)",
      "const q = new Point3(1, 2, 3)",
      "const square = (x) => x * x",
      "implicitGlobal = 'g'",
      "const buf = Buffer.from('hi')",
      "const when = new Date(0)",
      `process.chdir(${JSON.stringify(work)})`,
      "process.env.SNAP_VAR = 'yes'"
    ].join("\n")))
    expectOk(await first.execute("const gen = (function* () { yield 1 })()\nconst sock = new (require('node:net').Socket)()\nconst counter = (() => { let n = 0; return () => ++n })()\nconst boundLog = console.log.bind(console)"))
    const saved = await snapshot(first)
    expect(saved.done.status).toBe("saved")
    expect(saved.done.bytes).toBe(saved.payload.length)
    expect(saved.done.digest).toBe(sha256(saved.payload))
    expect(saved.done.names).toEqual(["Point", "Point3", "add", "alias", "buf", "cfg", "count", "implicitGlobal", "m", "p", "q", "shared", "square", "when"])
    const skipped = skippedNames(saved.done)
    expect(skipped.gen).toBe("a generator cannot be saved")
    expect(skipped.sock).toBe("socket objects cannot be saved")
    expect(skipped.counter).toMatch(/closure/)
    expect(skipped.boundLog).toMatch(/built-in or bound/)
    for (const name of ["display", "require", "kv", "_"]) expect(saved.done.names).not.toContain(name)

    const second = await start()
    const done = await restore(second, saved.payload, 7, 1000)
    expect(done.error).toBeUndefined()
    expect(done.restored).toEqual(saved.done.names)
    expect(Object.keys(skippedNames(done)).sort()).toEqual(["boundLog", "counter", "gen", "sock"])
    const cell = await second.execute(
      "[cfg.nested.n, count + 1, shared === alias, m.get('a'), add(2, 3), p.norm(), p instanceof Point, q instanceof Point3, q.norm().toFixed(3), q.z, square(4), implicitGlobal, Buffer.isBuffer(buf) && buf.toString(), when.getTime(), process.cwd(), process.env.SNAP_VAR].join(',')"
    )
    expectOk(cell)
    expect(plainResult(cell)).toBe(`'1,42,true,1,5,5,true,true,2.236,3,16,g,hi,0,${work},yes'`)
    expect(cell.done.executionCount).toBe(8)
    const kinds = await second.execute("try { cfg = 1; 'mutable' } catch (e) { e.constructor.name }")
    expect(plainResult(kinds)).toBe("'TypeError'")
    expectOk(await second.execute("count = 5; const cfg = 'declared again in a later cell'; cfg"))
  })

  it("loads the modules cells imported or required again, as they did", async () => {
    const mods = path.join(dir, "mods")
    NodeFs.mkdirSync(mods, { recursive: true })
    NodeFs.writeFileSync(path.join(mods, "helper.cjs"), "module.exports = { answer: () => 42 }\n")
    NodeFs.writeFileSync(path.join(mods, "esm.mjs"), "export const twice = (x) => 2 * x\nexport default { kind: 'esm' }\n")
    const first = await start()
    expectOk(await first.execute([
      `process.chdir(${JSON.stringify(mods)})`,
      "const fs = require('node:fs')",
      "const { join } = require('node:path')",
      "const helper = require('./helper.cjs')",
      "import * as os from 'node:os'",
      "import { createHash } from 'node:crypto'",
      "import esmDefault, { twice } from './esm.mjs'",
      "const later = await import('./esm.mjs')",
      "process.chdir('/')"
    ].join("\n")))
    const saved = await snapshot(first)
    expect(saved.done.names).toEqual(["createHash", "esmDefault", "fs", "helper", "join", "later", "os", "twice"])
    expect(saved.done.skipped).toEqual([])
    const second = await start()
    const done = await restore(second, saved.payload)
    expect(done).toMatchObject({ restored: saved.done.names, skipped: [] })
    const cell = await second.execute(
      "[fs.existsSync('/'), join('a', 'b'), helper.answer(), typeof os.platform(), createHash('sha256').update('').digest('hex').slice(0, 8), esmDefault.kind, twice(4), later.twice(5), process.cwd()].join(',')"
    )
    expect(plainResult(cell)).toBe("'true,a/b,42,string,e3b0c442,esm,8,10,/'")
    // A third runner gets them from the second's snapshot: the loads are noted again as they run.
    const third = await start()
    expect((await restore(third, (await snapshot(second)).payload)).restored).toEqual(saved.done.names)
    // A module that is gone by then is named.
    NodeFs.rmSync(path.join(mods, "helper.cjs"))
    const fourth = await start()
    const missing = await restore(fourth, saved.payload)
    expect(skippedNames(missing).helper).toMatch(/^its module could not be loaded again: Error: Cannot find module/)
    expect(plainResult(await fourth.execute("twice(3)"))).toBe("6")
  })

  it("brings back constructor functions' instances and classes that read a value when defined", async () => {
    const first = await start()
    expectOk(await first.execute([
      "const UNIT = 'cm'",
      "class Ruler { static unit = UNIT; length() { return 3 + Ruler.unit } }",
      "function Counter(start) { this.n = start }",
      "Counter.prototype.next = function () { return ++this.n }",
      "const counter = new Counter(5)",
      "function* numbers() { yield 1 }",
      "const stream = numbers()",
      "const pending = Promise.resolve(1)",
      "const weak = new WeakMap()"
    ].join("\n")))
    // A getter is never run to save its object (running it is the cell's code, with its side effects): the object is named.
    expectOk(await first.execute("let calls = 0\nconst tricky = { get x() { return ++calls % 2 === 0 ? () => 1 : 1 } }"))
    const saved = await snapshot(first)
    expect(saved.done.names).toEqual(["Counter", "Ruler", "UNIT", "calls", "counter", "numbers"])
    expect(skippedNames(saved.done)).toMatchObject({
      pending: "a promise cannot be saved",
      stream: "a generator cannot be saved",
      weak: "a WeakMap cannot be saved"
    })
    expect(skippedNames(saved.done).tricky).toBe("its x is a getter, which saving would run")
    const second = await start()
    const done = await restore(second, saved.payload)
    expect(done.restored).toEqual(saved.done.names)
    // Methods put on a constructor's prototype after it was defined are not part of its source: named by what they do not do.
    const cell = await second.execute("[new Ruler().length(), counter.n, counter instanceof Counter, typeof counter.next, numbers().next().value, calls].join(',')")
    expect(plainResult(cell)).toBe("'3cm,5,true,undefined,1,0'")
  })

  it("names a value over the per-value budget and answers unchanged for a known digest", async () => {
    const kernel = await start()
    expectOk(await kernel.execute("const big = new Uint8Array(3 * 1024 * 1024).fill(7)\nconst small = 'ok'"))
    const saved = await snapshot(kernel, { valueBudget: MiB })
    expect(saved.done.status).toBe("saved")
    expect(saved.done.names).toEqual(["small"])
    expect(skippedNames(saved.done).big).toBe("3 MiB over the 1 MiB budget")
    const again = await snapshot(kernel, { valueBudget: MiB, known: String(saved.done.digest) })
    expect(again.done).toMatchObject({ status: "unchanged", digest: saved.done.digest })
    expect(again.chunks).toEqual([])
    const whole = await snapshot(kernel, { budget: 2 * MiB, valueBudget: 8 * MiB })
    expect(skippedNames(whole.done).big).toMatch(/^3 MiB over the 2 MiB budget of the whole session/)
    expect(whole.done.bytes).toBeLessThanOrEqual(2 * MiB)
    // The host takes no byte past the budget, the header's included: a budget the header alone passes saves nothing.
    const tiny = await snapshot(kernel, { budget: 100, valueBudget: 100 })
    expect(tiny.done).toMatchObject({ status: "failed" })
    expect(String(tiny.done.error)).toMatch(/over the 100 bytes budget/)
    expect(tiny.chunks).toEqual([])
  })

  it("sends a big payload in chunks of at most 4 MiB", async () => {
    const kernel = await start()
    expectOk(await kernel.execute("const blob = new Uint8Array(5 * 1024 * 1024).fill(1)"))
    const saved = await snapshot(kernel)
    expect(saved.chunks.length).toBe(2)
    for (const chunk of saved.chunks) expect(Buffer.from(String(chunk.data), "base64").length).toBeLessThanOrEqual(4 * MiB)
    const second = await start()
    const done = await restore(second, saved.payload, undefined, 4 * MiB)
    expect(done.restored).toEqual(["blob"])
    expect(plainResult(await second.execute("blob.length === 5 * 1024 * 1024 && blob[123] === 1"))).toBe("true")
  })

  it("yields to an execute request that arrives before it is done", async () => {
    const kernel = await start()
    // Twelve values that each take a while to walk and serialize: the snapshot takes long enough for a cell to arrive during it.
    expectOk(await kernel.execute("for (let i = 0; i < 12; i++) globalThis['v' + i] = Array.from({ length: 50000 }, (_, j) => ({ j, s: 'x' + j }))"))
    const full = await snapshot(kernel)
    expect(full.done.status).toBe("saved")
    const id = `snap${++seq}`
    const from = kernel.frames.length
    kernel.send({ type: "snapshot", id, budget: 1024 * MiB, valueBudget: 256 * MiB })
    await new Promise((resolve) => setTimeout(resolve, 50))
    const cell = await kernel.execute("'cell ran'")
    const done = await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === id, 60_000, from)
    expect(done).toMatchObject({ status: "yielded", names: [], skipped: [] })
    expect(kernel.frames.filter((f) => f.type === "snapshot_chunk" && f.id === id)).toEqual([])
    expect(kernel.frames.indexOf(done)).toBeLessThan(kernel.frames.indexOf(cell.frames[0]!))
    expect(plainResult(cell)).toBe("'cell ran'")
    // A snapshot with a cell already queued behind it yields at once; one queued behind a cell waits for it.
    const before = `snap${++seq}`
    kernel.send({ type: "snapshot", id: before, budget: MiB, valueBudget: MiB })
    kernel.request("1 + 1")
    expect(await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === before)).toMatchObject({ status: "yielded" })
    const running = kernel.request("await new Promise((resolve) => setTimeout(resolve, 300)); 'slow'")
    const after = `snap${++seq}`
    kernel.send({ type: "snapshot", id: after, budget: MiB, valueBudget: MiB })
    const afterDone = await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === after)
    const runningDone = kernel.frames.find((f) => f.type === "done" && f.id === running)!
    expect(kernel.frames.indexOf(runningDone)).toBeLessThan(kernel.frames.indexOf(afterDone))
  })

  it("names instances whose class cannot come back", async () => {
    const kernel = await start()
    expectOk(await kernel.execute([
      "class Secret { #key = 1; get key() { return this.#key } }",
      "const secret = new Secret()",
      "const Hidden = (() => { let made = 0; return class Hidden { constructor() { this.v = ++made } } })()",
      "const hidden = new Hidden()",
      "const url = new URL('https://example.com/')",
      "const nested = { list: [1, new Hidden()] }",
      "const bare = Object.assign(Object.create(null), { k: 1 })"
    ].join("\n")))
    const saved = await snapshot(kernel)
    const skipped = skippedNames(saved.done)
    expect(skipped.secret).toMatch(/private fields/)
    expect(skipped.Hidden).toMatch(/closure/)
    expect(skipped.hidden).toMatch(/instance of Hidden/)
    expect(skipped.url).toMatch(/instance of URL/)
    expect(skipped.nested).toMatch(/^it holds what cannot be saved: an instance of Hidden/)
    expect(saved.done.names).toEqual(["Secret", "bare"])
    const second = await start()
    expect((await restore(second, saved.payload)).restored).toEqual(["Secret", "bare"])
    expect(plainResult(await second.execute("[Object.getPrototypeOf(bare), bare.k, new Secret().key].join(',')"))).toBe("',1,1'")
  })

  it("answers a corrupt or foreign payload with an error and keeps serving", async () => {
    const kernel = await start()
    expectOk(await kernel.execute("const kept = 1"))
    const saved = await snapshot(kernel)
    const corrupt = Buffer.from(saved.payload)
    corrupt.fill(0xff, corrupt.length - 20)
    const fresh = await start()
    const bad = await restore(fresh, corrupt)
    expect(String(bad.error)).toMatch(/corrupt/)
    expect(bad.restored).toEqual([])
    // One byte of the data changed where v8 would still read it: the digest in the header catches it.
    const flipped = Buffer.from(saved.payload)
    flipped[flipped.length - 3] ^= 1
    expect(String((await restore(fresh, flipped)).error)).toMatch(/SHA-256 does not match/)
    const foreign = await restore(fresh, Buffer.from("\x80\x04not a javascript snapshot"))
    expect(String(foreign.error)).toMatch(/not a JavaScript runner's snapshot/)
    const newer = Buffer.from(saved.payload)
    newer.writeUInt32BE(99, 8)
    expect(String((await restore(fresh, newer)).error)).toMatch(/format 99/)
    const cell = await fresh.execute("typeof kept")
    expect(plainResult(cell)).toBe("'undefined'")
  })
})

suite("Ruby", rubyRunner(), (start, dir) => {
  it("brings locals, definitions and kernel state back in a new runner process", async () => {
    const work = path.join(dir, "work")
    NodeFs.mkdirSync(work)
    const first = await start()
    expectOk(await first.execute([
      "config = { name: 'x', 'nested' => { n: 1 } }",
      "shared = [1, 2]",
      "same = shared",
      "class Point",
      "  attr_reader :x, :y",
      "  def initialize(x, y)",
      "    @x, @y = x, y",
      "  end",
      "  def norm = Math.hypot(x, y)",
      "end",
      "class Point3 < Point",
      "  def initialize(x, y, z)",
      "    super(x, y)",
      "    @z = z",
      "  end",
      "  attr_reader :z",
      "end",
      "p1 = Point.new(3, 4)",
      "q = Point3.new(1, 2, 3)",
      "def twice(value)",
      "  value * 2",
      "end",
      "LIMIT = 10",
      "@seen = 'main ivar'",
      "$flag = :on",
      "require 'set'",
      "tags = Set[:a, :b]",
      `Dir.chdir(${JSON.stringify(work)})`,
      "ENV['SNAP_VAR'] = 'yes'",
      "nil"
    ].join("\n")))
    expectOk(await first.execute("require 'socket'\nfile = File.open(__dir__ || '/dev/null') rescue File.open('/dev/null')\nsock = UNIXSocket.pair.first\nblock = proc { 1 }\nenum = [1, 2].each\nnil"))
    const saved = await snapshot(first)
    expect(saved.done.status).toBe("saved")
    expect(saved.done.digest).toBe(sha256(saved.payload))
    expect(saved.done.bytes).toBe(saved.payload.length)
    expect(saved.done.names).toEqual(["$flag", "@seen", "LIMIT", "Point", "Point3", "config", "p1", "q", "same", "shared", "tags", "twice"])
    const skipped = skippedNames(saved.done)
    expect(skipped.file).toBe("IO objects (open files, pipes) cannot be saved")
    expect(skipped.sock).toBe("socket objects cannot be saved")
    expect(skipped.block).toBe("a Proc cannot be saved")
    expect(skipped.enum).toBe("an Enumerator cannot be saved")
    for (const name of ["kv", "defs", "env", "display", "_"]) expect(saved.done.names).not.toContain(name)

    const second = await start()
    const done = await restore(second, saved.payload, 4, 500)
    expect(done.error).toBeUndefined()
    expect(done.restored).toEqual(saved.done.names)
    expect(Object.keys(skippedNames(done)).sort()).toEqual(["block", "enum", "file", "sock"])
    const cell = await second.execute(
      "[config['nested'][:n], shared.equal?(same), p1.norm, p1.class, q.is_a?(Point), q.z, twice(4), LIMIT, @seen, $flag, tags.include?(:b), Dir.pwd, ENV['SNAP_VAR']].map(&:to_s).join(',')"
    )
    expectOk(cell)
    expect(plainResult(cell)).toBe(`"1,true,5.0,Point,true,3,8,10,main ivar,on,true,${work},yes"`)
    expect(cell.done.executionCount).toBe(5)

    // The restored definitions are in the new runner's history: a third runner gets them from its snapshot.
    const again = await snapshot(second)
    expect(again.done.names).toEqual(saved.done.names)
    const third = await start()
    expect((await restore(third, again.payload)).restored).toEqual(saved.done.names)
    expect(plainResult(await third.execute("Point3.new(0, 3, 1).norm + twice(1)"))).toBe("5.0")
  })

  it("replays Structs, modules, singleton definitions of main and required libraries", async () => {
    const first = await start()
    expectOk(await first.execute([
      "Pair = Struct.new(:a, :b) do",
      "  def sum = a + b",
      "end",
      "module Greeter",
      "  def greet = \"hi #{name}\"",
      "end",
      "class Person",
      "  include Greeter",
      "  attr_accessor :name",
      "end",
      "class << self",
      "  def hello = 'hello'",
      "end",
      "pair = Pair.new(1, 2)",
      "bob = Person.new",
      "bob.name = 'bob'",
      "kind = Pair",
      "require 'ostruct'",
      "options = OpenStruct.new(depth: 2)",
      "counts = Hash.new { |hash, key| hash[key] = 0 }",
      "odd = Object.new",
      "def odd.speak = 1",
      "nil"
    ].join("\n")))
    // A cell that fails after a definition: what ran is kept, what never ran is not replayed.
    const failed = await first.execute("class Later\n  def v = 7\nend\nlater = Later.new\nraise 'after the definition'\nclass NeverRan; end")
    expect(failed.error?.evalue).toBe("after the definition")
    const saved = await snapshot(first)
    expect(saved.done.names).toEqual(["Greeter", "Later", "Pair", "Person", "bob", "kind", "later", "options", "pair"])
    expect(skippedNames(saved.done)).toEqual({
      counts: "a Hash with a default block, which cannot be saved",
      odd: "an object with singleton methods, which cannot be saved"
    })
    const second = await start()
    expect((await restore(second, saved.payload)).restored).toEqual(saved.done.names)
    const cell = await second.execute("[pair.sum, bob.greet, kind == Pair, hello, options.depth, later.v, defined?(NeverRan)].inspect")
    expect(plainResult(cell)).toBe('"[3, \\"hi bob\\", true, \\"hello\\", 2, 7, nil]"')
  })

  it("requires a cell's libraries again, after the load path entries they need", async () => {
    const lib = path.join(dir, "lib")
    NodeFs.mkdirSync(lib, { recursive: true })
    NodeFs.writeFileSync(path.join(lib, "snaplib_helper.rb"), "module SnapLibHelper\n  V = 42\nend\n")
    NodeFs.writeFileSync(path.join(lib, "snaplib.rb"), "require 'snaplib_helper'\nmodule SnapLib\n  def self.v = SnapLibHelper::V\nend\n")
    const first = await start()
    expectOk(await first.execute(`$LOAD_PATH.unshift(${JSON.stringify(lib)})\nrequire 'snaplib'\nanswer = SnapLib.v\nnil`))
    const saved = await snapshot(first)
    expect(saved.done.names).toEqual(["answer"])
    const second = await start()
    const done = await restore(second, saved.payload)
    expect(done).toMatchObject({ restored: ["answer"], skipped: [] })
    expect(plainResult(await second.execute("[answer, SnapLib.v, $LOAD_PATH.include?(" + JSON.stringify(lib) + ")].inspect"))).toBe('"[42, 42, true]"')
  })

  it("replays a class body that reads a constant after the values are back", async () => {
    const first = await start()
    expectOk(await first.execute("UNIT = 'cm'\nclass Ruler\n  SHOWN = UNIT.upcase\n  def show = SHOWN\nend\nruler = Ruler.new\nnil"))
    const saved = await snapshot(first)
    const second = await start()
    const done = await restore(second, saved.payload)
    expect(done).toMatchObject({ restored: ["Ruler", "UNIT", "ruler"], skipped: [] })
    expect(plainResult(await second.execute("ruler.show"))).toBe('"CM"')
  })

  it.skipIf(!NodeFs.existsSync("/proc/self/status"))("writes the snapshot in a child that holds no protocol channel and ignores SIGINT", async () => {
    const kernel = await start()
    expectOk(await kernel.execute("class Slow\n  def marshal_dump\n    sleep 2\n    1\n  end\n  def marshal_load(_) = nil\nend\nslow = Slow.new\nnil"))
    const id = `snap${++seq}`
    kernel.send({ type: "snapshot", id, budget: MiB, valueBudget: MiB })
    const childOf = (parent: number): number | undefined => {
      for (const entry of NodeFs.readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
        try {
          const stat = NodeFs.readFileSync(`/proc/${entry}/stat`, "utf8")
          if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === parent) return Number(entry)
        } catch {
          // gone
        }
      }
      return undefined
    }
    let child: number | undefined
    for (let i = 0; i < 100 && child === undefined; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      child = childOf(kernel.pid)
    }
    expect(child).toBeDefined()
    const parentChannel = NodeFs.readlinkSync(`/proc/${kernel.pid}/fd/3`)
    const childFds = (): Array<string> =>
      NodeFs.readdirSync(`/proc/${child}/fd`).map((fd) => {
        try {
          return NodeFs.readlinkSync(`/proc/${child}/fd/${fd}`)
        } catch {
          return ""
        }
      })
    // The child closes the channel first thing; it then sleeps in marshal_dump for two seconds.
    for (let i = 0; i < 50 && childFds().includes(parentChannel); i++) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(childFds()).not.toContain(parentChannel)
    const ignored = BigInt("0x" + /SigIgn:\s*([0-9a-f]+)/.exec(NodeFs.readFileSync(`/proc/${child}/status`, "utf8"))![1])
    expect(ignored & 2n).toBe(2n)
    kernel.interrupt()
    expect(await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === id)).toMatchObject({ status: "saved", names: ["Slow", "slow"] })
    expect(plainResult(await kernel.execute("'still serving'"))).toBe('"still serving"')
  })

  it("without fork builds the snapshot in the kernel and yields between values", async () => {
    const script = `module Kernel\n  private def fork(*) = raise(NotImplementedError, "no fork")\nend\n$PROGRAM_NAME = ${JSON.stringify(RUBY_RUNNER_PATH)}\nload $PROGRAM_NAME`
    const noFork = { ...rubyRunner()!, args: ["-e", script] }
    const kernel = await startWithPrelude(noFork, { cwd: dir })
    expectOk(await kernel.execute("class Slow\n  def marshal_dump\n    sleep 1.5\n    1\n  end\n  def marshal_load(_) = nil\nend\na_slow = Slow.new\nb_slow = Slow.new\nkept = [1]\nnil"))
    const id = `snap${++seq}`
    const from = kernel.frames.length
    const started = Date.now()
    kernel.send({ type: "snapshot", id, budget: MiB, valueBudget: MiB })
    await new Promise((resolve) => setTimeout(resolve, 100))
    const cell = await kernel.execute("'cell ran'")
    const waited = Date.now() - started
    expect(await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === id, 60_000, from)).toMatchObject({ status: "yielded" })
    expect(plainResult(cell)).toBe('"cell ran"')
    // The cell waited for the one value being dumped (1.5 s), not for both (3 s).
    expect(waited).toBeLessThan(2900)
    expectOk(await kernel.execute("a_slow = b_slow = nil"))
    const saved = await snapshot(kernel)
    expect(saved.done.names).toEqual(["Slow", "a_slow", "b_slow", "kept"])
    kernel.kill()
  })

  it("names a value over the budget and answers unchanged for a known digest", async () => {
    const kernel = await start()
    expectOk(await kernel.execute("big = 'x' * (3 * 1024 * 1024)\nsmall = 'ok'\nnil"))
    const saved = await snapshot(kernel, { valueBudget: MiB })
    expect(saved.done.names).toEqual(["small"])
    expect(skippedNames(saved.done).big).toBe("3 MiB over the 1 MiB budget")
    const again = await snapshot(kernel, { valueBudget: MiB, known: String(saved.done.digest) })
    expect(again.done).toMatchObject({ status: "unchanged", digest: saved.done.digest })
    expect(again.chunks).toEqual([])
    const whole = await snapshot(kernel, { budget: 2 * MiB, valueBudget: 8 * MiB })
    expect(skippedNames(whole.done).big).toMatch(/^3 MiB over the 2 MiB budget of the whole session/)
    expect(whole.done.bytes).toBeLessThanOrEqual(2 * MiB)
    // The host takes no byte past the budget, the header's included: a budget the header alone passes saves nothing.
    const tiny = await snapshot(kernel, { budget: 100, valueBudget: 100 })
    expect(tiny.done).toMatchObject({ status: "failed" })
    expect(String(tiny.done.error)).toMatch(/over the 100 bytes budget/)
    expect(tiny.chunks).toEqual([])
  })

  it("sends a big payload in chunks of at most 4 MiB", async () => {
    const kernel = await start()
    expectOk(await kernel.execute("blob = 'y' * (5 * 1024 * 1024)\nnil"))
    const saved = await snapshot(kernel)
    expect(saved.chunks.length).toBe(2)
    for (const chunk of saved.chunks) expect(Buffer.from(String(chunk.data), "base64").length).toBeLessThanOrEqual(4 * MiB)
    const second = await start()
    expect((await restore(second, saved.payload, undefined, 4 * MiB)).restored).toEqual(["blob"])
    expect(plainResult(await second.execute("blob.bytesize == 5 * 1024 * 1024"))).toBe("true")
  })

  it("yields to an execute request that arrives before it is done", async () => {
    const kernel = await start()
    // A value whose dump takes two seconds: the snapshot is still saving when the cell arrives.
    expectOk(await kernel.execute("class Slow\n  def marshal_dump\n    sleep 2\n    1\n  end\n  def marshal_load(_) = nil\nend\nslow = Slow.new\nnil"))
    const id = `snap${++seq}`
    const from = kernel.frames.length
    const started = Date.now()
    kernel.send({ type: "snapshot", id, budget: 1024 * MiB, valueBudget: 256 * MiB })
    await new Promise((resolve) => setTimeout(resolve, 50))
    const cell = await kernel.execute("'cell ran'")
    const done = await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === id, 60_000, from)
    expect(done).toMatchObject({ status: "yielded", names: [], skipped: [] })
    expect(kernel.frames.filter((f) => f.type === "snapshot_chunk" && f.id === id)).toEqual([])
    expect(kernel.frames.indexOf(done)).toBeLessThan(kernel.frames.indexOf(cell.frames[0]!))
    expect(plainResult(cell)).toBe('"cell ran"')
    expect(Number(new Date()) - started).toBeLessThan(1500)
    const running = kernel.request("slow = nil\nsleep 0.3\n'slow'")
    const after = `snap${++seq}`
    kernel.send({ type: "snapshot", id: after, budget: MiB, valueBudget: MiB })
    const afterDone = await kernel.waitFor((f) => f.type === "snapshot_done" && f.id === after)
    const runningDone = kernel.frames.find((f) => f.type === "done" && f.id === running)!
    expect(kernel.frames.indexOf(runningDone)).toBeLessThan(kernel.frames.indexOf(afterDone))
  })

  it("answers a corrupt or foreign payload with an error and keeps serving", async () => {
    const kernel = await start()
    expectOk(await kernel.execute("kept = 1\ndef helper = 2"))
    const saved = await snapshot(kernel)
    const corrupt = Buffer.from(saved.payload)
    corrupt.fill(0x41, corrupt.length - 4)
    const fresh = await start()
    const bad = await restore(fresh, corrupt)
    expect(String(bad.error)).toMatch(/corrupt/)
    expect(bad.restored).toEqual([])
    expect(String((await restore(fresh, Buffer.from("VEYYONJS\0\0\0\x01"))).error)).toMatch(/not a Ruby runner's snapshot/)
    const newer = Buffer.from(saved.payload)
    newer.writeUInt32BE(99, 8)
    expect(String((await restore(fresh, newer)).error)).toMatch(/format 99/)
    const cell = await fresh.execute("[defined?(kept), respond_to?(:helper, true)].inspect")
    expect(plainResult(cell)).toBe('"[nil, false]"')
  })
})
