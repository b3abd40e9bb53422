/**
 * The JavaScript kernel end to end: runner/js/runner.mjs under the kernel actor, over the
 * fd-3 channel, with the frames, state, results, errors, output capture and SIGINT
 * semantics the Python kernel has.
 */
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber } from "effect"
import { isRunning, waitUntil } from "../support/process.ts"
import {
  displaysOf,
  doneOf,
  errorOf,
  jsLayer,
  resultOf,
  run,
  startJsKernel,
  stderrOf,
  stdoutOf,
  tempDir
} from "./support.ts"

const layer = jsLayer()

describe("JavaScript kernel", () => {
  it.live("keeps state across cells and shows the completion value", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      expect(resultOf(yield* run(kernel, "let xs = [1, 2, 3]; const k = 10"))).toBeUndefined()
      const mapped = yield* run(kernel, "xs.map((v) => v * k);")
      expect(resultOf(mapped)).toBe("[ 10, 20, 30 ]")
      expect(doneOf(mapped)).toMatchObject({ status: "ok", executionCount: 2, cancelled: false })
      expect(resultOf(yield* run(kernel, "const k = 2; xs.length * k"))).toBe("6")
      expect(resultOf(yield* run(kernel, "function f() {}\nundefined"))).toBeUndefined()
      expect(resultOf(yield* run(kernel, "_ * 2"))).toBe("12")
      expect(resultOf(yield* run(kernel, "'text'"))).toBe("'text'")
      const silent = yield* run(kernel, "xs.length", { silent: true })
      expect(resultOf(silent)).toBeUndefined()
      expect(doneOf(silent).executionCount).toBe(6)
      expect(doneOf(yield* run(kernel, "1", { storeHistory: false })).executionCount).toBe(6)
      expect(resultOf(yield* run(kernel, "[] instanceof Array && new Error('x') instanceof Error"))).toBe("true")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("runs top-level await, import statements, import() and require from the working directory", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("veyyon-js-imports-")
      NodeFs.writeFileSync(path.join(dir, "esm.mjs"), "export const answer = 42\nexport default 'dflt'\n")
      NodeFs.writeFileSync(path.join(dir, "cjs.cjs"), "module.exports = { kind: 'cjs' }\n")
      const kernel = yield* startJsKernel({ cwd: dir })
      const code = [
        "import path from 'node:path'",
        "import { join as j } from \"node:path\";",
        "import dflt, { answer } from './esm.mjs'",
        "import * as ns from './esm.mjs'",
        "const fs = await import('node:fs')",
        "const waited = await new Promise((resolve) => setTimeout(() => resolve('late'), 20))",
        "const text = 'import x from \"nowhere\"'; // import('nowhere')",
        "[j('a', 'b') === path.join('a', 'b'), dflt, answer, ns.answer, typeof fs.readFileSync, waited, require('./cjs.cjs').kind, text.length > 0]"
      ].join("\n")
      const outputs = yield* run(kernel, code)
      expect(errorOf(outputs)).toBeUndefined()
      expect(resultOf(outputs)).toBe("[ true, 'dflt', 42, 42, 'function', 'late', 'cjs', true ]")
      expect(resultOf(yield* run(kernel, "import path from 'node:path'\npath.sep"))).toBe("'/'")
      const missing = errorOf(yield* run(kernel, "await import('./nope.mjs')"))
      expect(missing?.evalue).toContain(path.join(dir, "nope.mjs"))
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("reports errors with the cell's own frames and keeps earlier state", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      yield* run(kernel, "let kept = 'yes'")
      const thrown = yield* run(kernel, "function inner() { null.x }\ninner()")
      const error = errorOf(thrown)!
      expect(error.ename).toBe("TypeError")
      expect(error.evalue).toContain("Cannot read properties of null")
      expect(error.traceback[0]).toMatch(/^TypeError: /)
      expect(error.traceback.some((line) => /at inner \(<cell-\d+>:1:\d+\)/.test(line))).toBe(true)
      expect(error.traceback.join("\n")).not.toMatch(/runner\.mjs|node:inspector|veyyon-runner/)
      expect(doneOf(thrown)).toMatchObject({ status: "error", cancelled: false })
      const count = (doneOf(thrown) as { executionCount: number }).executionCount
      expect(error.traceback.some((line) => line.includes(`at inner (<cell-${count}>:1:`))).toBe(true)

      const syntax = errorOf(yield* run(kernel, "let ok = 1\nlet = ;"))!
      expect(syntax.ename).toBe("SyntaxError")
      expect(syntax.traceback).toEqual([expect.stringMatching(/^<cell-\d+>:2$/), "let = ;", "      ^", "", expect.stringMatching(/^SyntaxError: /)])

      expect(errorOf(yield* run(kernel, "throw 'plain'"))).toMatchObject({ ename: "Uncaught", evalue: "'plain'" })
      const rejected = errorOf(yield* run(kernel, "await Promise.reject(new RangeError('later'))"))
      expect(rejected).toMatchObject({ ename: "RangeError", evalue: "later" })
      const fsError = errorOf(yield* run(kernel, "require('node:fs').readFileSync('/no/such/file')"))!
      expect(fsError.traceback.join("\n")).toContain("code: 'ENOENT'")
      const exit = yield* run(kernel, "process.exit(3)")
      expect(errorOf(exit)?.ename).toBe("KernelExit")
      expect(resultOf(yield* run(kernel, "kept"))).toBe("'yes'")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("turns console, process streams and child-process stdio into output, in order", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir("veyyon-js-children-")
      NodeFs.writeFileSync(path.join(dir, "forked.cjs"), "console.log('forked child')\n")
      const kernel = yield* startJsKernel({ cwd: dir })
      const code = [
        "const cp = require('node:child_process')",
        "console.log('log', { a: 1 }); console.error('error'); console.warn('warn')",
        "process.stdout.write(Buffer.from('buffer\\n'))",
        "cp.execSync('echo exec-inherit', { stdio: 'inherit' })",
        "cp.spawnSync('sh', ['-c', 'echo spawnsync; echo spawnsync-err >&2'], { stdio: 'inherit' })",
        "cp.execFileSync('sh', ['-c', 'echo execfile'], { stdio: [0, 1, 2] })",
        "console.log('captured', cp.execSync('echo piped').toString().trim())",
        "await new Promise((resolve) => cp.spawn('sh', ['-c', 'echo async-child'], { stdio: 'inherit' }).on('close', resolve))",
        "await new Promise((resolve) => cp.fork('./forked.cjs').on('close', resolve))",
        "const { execSync } = await import('node:child_process')",
        "execSync('echo esm-import', { stdio: 'inherit' })",
        "console.log('end')"
      ].join("\n")
      const outputs = yield* run(kernel, code)
      expect(errorOf(outputs)).toBeUndefined()
      expect(stdoutOf(outputs)).toBe(
        "log { a: 1 }\nbuffer\nexec-inherit\nspawnsync\nexecfile\ncaptured piped\nasync-child\nforked child\nesm-import\nend\n"
      )
      expect(stderrOf(outputs)).toBe("error\nwarn\nspawnsync-err\n")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("fs writes to fd 1 and 2 become output in their place among the cell's other writes", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const code = [
        "const fs = require('node:fs')",
        "console.log('a'); fs.writeSync(1, 'b\\n'); process.stdout.write('c\\n')",
        "fs.writeSync(1, Buffer.from('<d\\n>'), 1, 2); fs.writevSync(1, [Buffer.from('e'), new Uint8Array([10])])",
        "await new Promise((resolve) => fs.write(1, 'f\\n', resolve))",
        "const { writeSync } = await import('node:fs')",
        "console.error('g'); writeSync(2, 'h\\n'); writeSync(1, Buffer.from('é\\n', 'utf8')); console.log('i')"
      ].join("\n")
      const outputs = yield* run(kernel, code)
      expect(errorOf(outputs)).toBeUndefined()
      expect(stdoutOf(outputs)).toBe("a\nb\nc\nd\ne\nf\né\ni\n")
      expect(stderrOf(outputs)).toBe("g\nh\n")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("nothing a cell writes can pass for a frame", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const fake = JSON.stringify({ type: "done", id: "r2", status: "ok", executionCount: 99 })
      const code = [
        `const fake = ${JSON.stringify(fake)}`,
        "console.log(fake)",
        "process.stdout.write(fake + '\\n')",
        "require('node:fs').writeSync(1, fake + '\\n')",
        "require('node:child_process').execSync('echo ' + JSON.stringify(fake), { stdio: 'inherit' })",
        "await new Promise((resolve) => setTimeout(resolve, 200))",
        "console.log('after')"
      ].join("\n")
      const outputs = yield* run(kernel, code)
      expect(doneOf(outputs)).toMatchObject({ status: "ok", executionCount: 1 })
      const lines = stdoutOf(outputs).split("\n").filter((line) => line.length > 0).sort()
      expect(lines).toEqual(["after", fake, fake, fake, fake].sort())
      expect(doneOf(yield* run(kernel, "1")).executionCount).toBe(2)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("display() sends the same MIME bundle shapes as Python", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const code = [
        "display([1, 2])",
        "display({ 'text/html': '<b>raw</b>' }, { raw: true })",
        "const rich = { [Symbol.for('veyyon.mimebundle')]() { return { 'text/html': '<i>rich</i>', 'application/json': { n: 1 } } } }",
        "display(rich, { toMIMEBundle: () => ({ 'text/markdown': '**md**' }) })",
        "display.image(Buffer.from([0x89, 0x50, 0x4e, 0x47]))",
        "display.html('<p>p</p>')",
        "rich"
      ].join("\n")
      const outputs = yield* run(kernel, code)
      expect(errorOf(outputs)).toBeUndefined()
      const bundles = displaysOf(outputs)
      expect(bundles[0]).toEqual({ "text/plain": "[ 1, 2 ]" })
      expect(bundles[1]).toEqual({ "text/html": "<b>raw</b>" })
      expect(bundles[2]).toMatchObject({ "text/html": "<i>rich</i>", "application/json": { n: 1 } })
      expect(typeof bundles[2]!["text/plain"]).toBe("string")
      expect(bundles[3]).toMatchObject({ "text/markdown": "**md**" })
      expect(bundles[4]).toMatchObject({ "image/png": Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString("base64") })
      expect(bundles[5]).toEqual({ "text/html": "<p>p</p>" })
      const result = outputs.find((o) => o._tag === "Result")
      expect(result?._tag === "Result" && result.bundle["text/html"]).toBe("<i>rich</i>")
      expect(errorOf(yield* run(kernel, "display('x', { raw: true })"))?.ename).toBe("TypeError")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("SIGINT stops a busy loop; the kernel keeps its state", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      yield* run(kernel, "let spins = 0")
      const cancel = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(run(kernel, "while (true) { spins++ }", { cancel: Deferred.await(cancel) }))
      yield* Effect.sleep(Duration.millis(400))
      yield* Deferred.succeed(cancel, undefined)
      const outputs = yield* Fiber.join(fiber)
      expect(errorOf(outputs)?.ename).toBe("Interrupted")
      expect(doneOf(outputs)).toMatchObject({ status: "error", cancelled: true, killed: false })
      expect(resultOf(yield* run(kernel, "spins > 0"))).toBe("true")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("SIGINT abandons an awaited timer and clears it, so the cell never resumes", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const cancel = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        run(kernel, "console.log('waiting')\nawait new Promise((resolve) => setTimeout(resolve, 600))\nglobalThis.resumed = true", {
          cancel: Deferred.await(cancel)
        })
      )
      yield* Effect.sleep(Duration.millis(300))
      yield* Deferred.succeed(cancel, undefined)
      const outputs = yield* Fiber.join(fiber)
      expect(stdoutOf(outputs)).toBe("waiting\n")
      expect(doneOf(outputs)).toMatchObject({ status: "error", cancelled: true, killed: false })
      yield* Effect.sleep(Duration.millis(600))
      expect(resultOf(yield* run(kernel, "globalThis.resumed === undefined"))).toBe("true")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a cancel that comes before the cell started still interrupts it, without a kill", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const outputs = yield* run(kernel, "await new Promise((resolve) => setTimeout(resolve, 5000))", { cancel: Effect.void })
      expect(doneOf(outputs)).toMatchObject({ cancelled: true, killed: false })
      expect(yield* kernel.isAlive).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a SIGINT at any moment of a cell interrupts it and never kills the kernel", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const code = "for (let i = 0; i < 3e5; i++) {}\nawait new Promise((resolve) => setTimeout(resolve, 5))\nfor (let i = 0; i < 3e5; i++) {}\n'finished'"
      for (let round = 0; round < 25; round++) {
        const outputs = yield* run(kernel, code, { cancel: Effect.sleep(Duration.millis(round % 8)) })
        const done = doneOf(outputs)
        expect(done).toMatchObject({ killed: false })
        if (done.status === "ok") expect(resultOf(outputs)).toBe("'finished'")
        else expect({ ename: errorOf(outputs)?.ename, cancelled: done.cancelled }).toEqual({ ename: "Interrupted", cancelled: true })
      }
      expect(resultOf(yield* run(kernel, "'alive'"))).toBe("'alive'")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a SIGINT landing inside console.log leaves the next cells' output intact", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      for (let round = 0; round < 8; round++) {
        const outputs = yield* run(kernel, "for (;;) console.log('spin')", { cancel: Effect.sleep(Duration.millis(30 + 10 * round)) })
        expect(doneOf(outputs)).toMatchObject({ cancelled: true, killed: false })
        expect(stdoutOf(yield* run(kernel, `console.log('after ${round}'); process.stdout.write('and more\\n')`))).toBe(`after ${round}\nand more\n`)
      }
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("two SIGINTs in a row interrupt a busy cell once and never kill the kernel", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      for (let round = 0; round < 10; round++) {
        const fiber = yield* Effect.forkChild(run(kernel, "for (;;) {}"))
        yield* Effect.sleep(Duration.millis(150))
        process.kill(kernel.pid, "SIGINT")
        process.kill(kernel.pid, "SIGINT")
        const outputs = yield* Fiber.join(fiber)
        expect(doneOf(outputs)).toMatchObject({ status: "error", killed: false })
        expect(yield* kernel.isAlive).toBe(true)
        expect(resultOf(yield* run(kernel, `${round} + 1`))).toBe(String(round + 1))
      }
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("SIGINT between cells is ignored", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      yield* run(kernel, "let n = 1")
      process.kill(kernel.pid, "SIGINT")
      yield* Effect.sleep(Duration.millis(200))
      expect(yield* kernel.isAlive).toBe(true)
      expect(resultOf(yield* run(kernel, "n + 1"))).toBe("2")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("the watchdog interrupts a cell that outlives its timeout", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const done = doneOf(yield* run(kernel, "await new Promise(() => {})", { timeoutSeconds: 1 }))
      expect(done).toMatchObject({ cancelled: true, timedOut: true, killed: false })
      expect(done.notice).toContain("eval cell timed out after 1s")
      expect(resultOf(yield* run(kernel, "'still here'"))).toBe("'still here'")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a loop that starts after an await cannot be interrupted: the kernel is killed", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const done = doneOf(yield* run(kernel, "await null\nwhile (true) {}", { timeoutSeconds: 1 }))
      expect(done).toMatchObject({ timedOut: true, killed: true })
      expect(yield* kernel.isAlive).toBe(false)
      expect(yield* Effect.promise(() => waitUntil(() => !isRunning(kernel.pid), 2000))).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("shutdown ends the runner with the exit request and takes its children along", () =>
    Effect.suspend(() => {
      const markerDir = NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), "veyyon-js-exit-"))
      const exitMarker = path.join(markerDir, "exited")
      return Effect.gen(function*() {
      let pid = 0
      let child = 0
      yield* Effect.scoped(
        Effect.gen(function*() {
          const kernel = yield* startJsKernel()
          pid = kernel.pid
          yield* run(kernel, `process.on("exit", () => require("node:fs").writeFileSync(${JSON.stringify(exitMarker)}, "exit request"))`)
          const outputs = yield* run(kernel, "require('node:child_process').spawn('sleep', ['1000']).pid")
          child = Number(resultOf(outputs))
          expect(isRunning(child)).toBe(true)
          yield* kernel.shutdown
        })
      )
      expect(isRunning(pid)).toBe(false)
      expect(NodeFs.readFileSync(exitMarker, "utf8")).toBe("exit request")
      expect(yield* Effect.promise(() => waitUntil(() => !isRunning(child), 3000))).toBe(true)
    }).pipe(Effect.ensuring(Effect.sync(() => NodeFs.rmSync(markerDir, { recursive: true, force: true }))))
  }).pipe(Effect.provide(layer)))
})
