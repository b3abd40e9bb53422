import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, ManagedRuntime } from "effect"
import { evalLayer } from "../../../src/layers/EvalLive.ts"
import { EvalTool } from "../../../src/services/tool/EvalTool.ts"
import { KernelRegistry } from "../../../src/services/registry/KernelRegistry.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { tempDir } from "../../support/tempDirs.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"

const python = findPython()
const artifactsDir = tempDir("veyyon-evaltool-")

const makeRuntime = (settings: Parameters<typeof evalLayer>[0] = {}) =>
  ManagedRuntime.make(
    evalLayer({
      env: false,
      settings: { artifactsDir, python: { interpreter: python! }, output: { maxBytes: 4096, maxLines: 100 } },
      ...settings
    })
  )

describe.skipIf(!integrationEnabled() || python === undefined)(titled("EvalTool with a real Python", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  process.env.OPENAI_API_KEY = "sk-test-secret"
  const runtime = makeRuntime()
  afterAll(() => runtime.dispose())
  const run = (params: unknown, sessionId = "t1", cwd = process.cwd()) =>
    runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run(params, { sessionId, cwd })))

  it("keeps state across calls and shows the last expression", async () => {
    await run({ language: "py", code: "x = 20" })
    const result = await run({ language: "py", code: "x * 2 + 2" })
    expect(result).toMatchObject({ status: "ok", text: "42", cancelled: false, timedOut: false })
    expect(result.executionCount).toBe(2)
  })

  it("reports a failing cell with its traceback and keeps earlier state", async () => {
    const result = await run({ language: "py", code: "y = x\nraise ValueError('bad value')" })
    expect(result.status).toBe("error")
    expect(result.error).toMatchObject({ ename: "ValueError", evalue: "bad value" })
    expect(result.text).toContain("ValueError: bad value")
    expect((await run({ language: "py", code: "y" })).text).toBe("20")
  })

  it("endSession shuts the session's kernels down, keeping its saved state for its next cell; with forget, that starts empty", async () => {
    await run({ language: "py", code: "ended = 1" }, "t-end")
    const keysOf = () => runtime.runPromise(Effect.map(Effect.flatMap(KernelRegistry, (registry) => registry.keys), (keys) => keys.filter((key) => key.sessionId === "t-end")))
    expect(await keysOf()).toHaveLength(1)
    await runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.endSession("t-end")))
    expect(await keysOf()).toHaveLength(0)
    const again = await run({ language: "py", code: "'ended' in dir()" }, "t-end")
    expect(again.outputs).toMatchObject([{ _tag: "Result" }])
    expect(again.text.split("\n")[0]).toBe("True")
    expect(again.notice).toContain("restored as of cell 1")
    await runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.endSession("t-end", { forget: true })))
    expect(await keysOf()).toHaveLength(0)
    expect((await run({ language: "py", code: "'ended' in dir()" }, "t-end")).text).toBe("False")
  })

  it("reset starts a fresh kernel", async () => {
    const result = await run({ language: "py", code: "'x' in dir()", reset: true })
    expect(result.text).toBe("False")
    expect(result.executionCount).toBe(1)
  })

  it("times out, interrupts and says so", async () => {
    const result = await run({ language: "py", code: "import time\ntime.sleep(30)", timeout: 1 }, "t-timeout")
    expect(result).toMatchObject({ cancelled: true, timedOut: true, killed: false })
    expect(result.text).toContain("eval cell timed out after 1s")
  })

  it("an abort signal cancels the cell", async () => {
    const controller = new AbortController()
    const pending = runtime.runPromise(
      Effect.flatMap(EvalTool, (tool) =>
        tool.run({ language: "py", code: "import time\ntime.sleep(30)" }, { sessionId: "t-abort", cwd: process.cwd(), signal: controller.signal })
      )
    )
    setTimeout(() => controller.abort(), 500)
    const result = await pending
    expect(result).toMatchObject({ cancelled: true, timedOut: false })
    expect(result.error?.ename).toBe("KeyboardInterrupt")
  })

  it("bounds large output and keeps all of it in an artifact", async () => {
    const result = await run({ language: "py", code: "for i in range(5000): print(f'line {i}')" }, "t-big")
    expect(result.truncation).toBeDefined()
    expect(result.truncation!.totalLines).toBe(5000)
    expect(result.text).toContain("line 0")
    expect(result.text).toContain("line 4999")
    expect(result.text).toContain("artifact://")
    const file = fs.readdirSync(artifactsDir, { recursive: true }).map(String).find((f) => f.endsWith(result.truncation!.artifactId))
    expect(file).toBeDefined()
    expect(fs.readFileSync(path.join(artifactsDir, file!), "utf8").split("\n").filter(Boolean)).toHaveLength(5000)
  })

  it("returns displayed images", async () => {
    const code = [
      "import base64, struct, zlib",
      "def png(w, h):",
      "    raw = b''.join(b'\\x00' + b'\\xff\\x00\\x00' * w for _ in range(h))",
      "    chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))",
      "    return b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')",
      "class Img:",
      "    def _repr_png_(self): return png(4, 3)",
      "display(Img())"
    ].join("\n")
    const result = await run({ language: "py", code }, "t-img")
    expect(result.images).toHaveLength(1)
    expect(result.images[0]!.mimeType).toBe("image/png")
    expect(result.images[0]!.data.length).toBeGreaterThan(20)
  })

  it("never lets API keys of the host reach the kernel", async () => {
    const result = await run({ language: "py", code: "import os\nos.environ.get('OPENAI_API_KEY', 'absent')" }, "t-env")
    expect(result.text).toBe("'absent'")
  })

  it("runs 16 sessions x 20 cells concurrently, each seeing only its own state", async () => {
    const sessions = Array.from({ length: 16 }, (_, i) => `many-${i}`)
    await Promise.all(
      sessions.map(async (sessionId) => {
        await run({ language: "py", code: `me = ${JSON.stringify(sessionId)}\nseen = []` }, sessionId)
        for (let cell = 0; cell < 20; cell++) {
          const result = await run({ language: "py", code: `seen.append(${cell})\nprint(me, len(seen))` }, sessionId)
          expect(result.text).toBe(`${sessionId} ${cell + 1}`)
        }
      })
    )
    for (const sessionId of sessions) {
      await runtime.runPromise(Effect.flatMap(KernelRegistry, (registry) => registry.reset(sessionId)))
    }
  }, 120_000)

  it("validates cwd before running", async () => {
    const exit = await runtime.runPromiseExit(
      Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code: "1" }, { sessionId: "t-cwd", cwd: "/no/such/dir" }))
    )
    expect(Exit.isFailure(exit) && String(exit.cause)).toContain("does not exist")
  })

  it("fails py cells with a fix when no Python is available, and other backends stay selectable", async () => {
    const broken = ManagedRuntime.make(
      evalLayer({ env: false, settings: { artifactsDir, python: { interpreter: "/no/such/python3" } } })
    )
    try {
      const exit = await broken.runPromiseExit(
        Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code: "1" }, { sessionId: "t-nopy", cwd: process.cwd() }))
      )
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("Python backend not available")
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("veyyon setup python --check")
      const definition = await broken.runPromise(Effect.map(EvalTool, (tool) => tool.definition))
      expect((definition.parameters as { properties: { language: { enum: Array<string> } } }).properties.language.enum).toContain("js")
    } finally {
      await broken.dispose()
    }
  })
})

