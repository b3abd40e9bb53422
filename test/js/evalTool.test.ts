/**
 * `language: "js"` through the whole stack (evalLayer, EvalTool, registry, output sink):
 * JavaScript stays available when Python is missing or disabled, and the watchdog, reset,
 * truncation and env policy apply to js cells unchanged.
 */
import * as os from "node:os"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Exit, Result } from "effect"
import { resolveSettings } from "../../src/services/config/Settings.ts"
import { toolRuntimes } from "../support/toolRuntimes.ts"

const tools = toolRuntimes("veyyon-js-evaltool-", "js1")
const artifactsDir = tools.artifactsDir
const makeRuntime = tools.make
afterAll(tools.disposeAll)

const languagesOf = (parameters: Readonly<Record<string, unknown>>) =>
  (parameters as { properties: { language: { enum: Array<string> } } }).properties.language.enum

describe("EvalTool with JavaScript cells", () => {
  it("keeps js available when the Python preflight fails: py cells fail with the fix, js cells run", async () => {
    const tool = makeRuntime({ env: false, settings: { artifactsDir, python: { interpreter: "/no/such/python" } } })
    const py = await tool.run({ language: "py", code: "1" })
    expect(Exit.isFailure(py) && String(py.cause)).toContain("Python backend not available")
    const js = await tool.ok({ language: "js", code: "let n = 20; n * 2 + 2" })
    expect(js).toMatchObject({ language: "js", status: "ok", text: "42", executionCount: 1 })
    expect(languagesOf((await tool.definition()).parameters)).toEqual(["py", "js"])
    expect((await tool.definition()).description).toContain("JavaScript (Node)")
  })

  it("VEYYON_PY=0 VEYYON_JS=1 narrows the language enum to js", async () => {
    const env = { VEYYON_PY: "0", VEYYON_JS: "1" }
    const settings = Result.getOrThrow(resolveSettings({}, env, { tmpdir: os.tmpdir(), cwd: "/", home: undefined, uid: 0 }))
    expect(settings.eval).toMatchObject({ py: false, js: true })
    const tool = makeRuntime({ env, settings: { artifactsDir } })
    const definition = await tool.definition()
    expect(languagesOf(definition.parameters)).toEqual(["js"])
    expect(definition.description).not.toContain("IPython")
    const py = await tool.run({ language: "py", code: "1" })
    expect(Exit.isFailure(py) && String(py.cause)).toContain("VEYYON_PY=1")
    expect((await tool.ok({ language: "js", code: "'only js'" })).text).toBe("'only js'")
  })

  it("applies reset, the watchdog, truncation and the env policy to js cells", async () => {
    const secret = process.env.VEYYON_TEST_API_KEY
    process.env.VEYYON_TEST_API_KEY = "sk-js-secret"
    process.env.VEYYON_TEST_VISIBLE = "yes"
    try {
      const tool = makeRuntime({ env: false, settings: { artifactsDir, output: { maxBytes: 2048, maxLines: 50 } } })
      await tool.ok({ language: "js", code: "var kept = 1" }, "js-tool")
      const env = await tool.ok({ language: "js", code: "[process.env.VEYYON_TEST_API_KEY, process.env.VEYYON_TEST_VISIBLE, process.env.VEYYON_ARTIFACTS_DIR.startsWith(" + JSON.stringify(artifactsDir) + ")]" }, "js-tool")
      expect(env.text).toBe("[ undefined, 'yes', true ]")
      const fresh = await tool.ok({ language: "js", code: "typeof kept", reset: true }, "js-tool")
      expect(fresh).toMatchObject({ text: "'undefined'", executionCount: 1 })
      const stuck = await tool.ok({ language: "js", code: "await new Promise(() => {})", timeout: 1 }, "js-tool")
      expect(stuck).toMatchObject({ cancelled: true, timedOut: true, killed: false })
      expect(stuck.text).toContain("eval cell timed out after 1s")
      const loud = await tool.ok({ language: "js", code: "for (let i = 0; i < 500; i++) console.log('line ' + i)" }, "js-tool")
      expect(loud.truncation).toBeDefined()
      expect(loud.artifactIds.length).toBeGreaterThan(0)
      const failed = await tool.ok({ language: "js", code: "throw new RangeError('too far')" }, "js-tool")
      expect(failed).toMatchObject({ status: "error", error: { ename: "RangeError", evalue: "too far" } })
      expect(failed.text).toContain("RangeError: too far")
    } finally {
      delete process.env.VEYYON_TEST_VISIBLE
      if (secret === undefined) delete process.env.VEYYON_TEST_API_KEY
      else process.env.VEYYON_TEST_API_KEY = secret
    }
  })
})
