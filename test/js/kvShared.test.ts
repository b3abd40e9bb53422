/**
 * kv across runtimes: a Python cell and a JavaScript cell of one session read and write
 * the same entries, through the real tool with both kernels.
 */
import * as fs from "node:fs"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ManagedRuntime } from "effect"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { tempDir } from "../support/tempDirs.ts"

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(titled("kv shared by Python and JavaScript cells", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const artifactsDir = tempDir("veyyon-js-kv-shared-")
  const runtime = ManagedRuntime.make(evalLayer({ env: false, settings: { artifactsDir, python: { interpreter: python! } } }))
  afterAll(async () => {
    await runtime.dispose()
    fs.rmSync(artifactsDir, { recursive: true, force: true })
  })
  const text = async (language: "py" | "js", code: string) => {
    const result = await runtime.runPromise(EvalTool.use((tool) => tool.run({ language, code }, { sessionId: "kv-both", cwd: process.cwd() })))
    expect(result.error).toBeUndefined()
    return result.text
  }

  it("a key written by one runtime is read by the other, both ways", async () => {
    const long = "k".repeat(256)
    await text("py", `kv.set("from-py", {"n": [1, 2.5, None], "s": "é✓", "ok": True})\nkv.set(${JSON.stringify(long)}, "long")\nkv.set("gone", 1);`)
    expect(await text("js", "JSON.stringify(kv.get('from-py'))")).toBe(`'{"n":[1,2.5,null],"s":"é✓","ok":true}'`)
    expect(await text("js", `kv.get(${JSON.stringify(long)})`)).toBe("'long'")
    await text("js", "kv.set('from-js', { list: [1, 'two', { three: false }], unicode: 'ü\\u2028' }); kv.delete('gone')")
    expect(await text("py", "import json\nprint(json.dumps(kv.get('from-js'), ensure_ascii=True, sort_keys=True))")).toBe(
      '{"list": [1, "two", {"three": false}], "unicode": "\\u00fc\\u2028"}'
    )
    expect(await text("py", "kv.get('gone', 'absent')")).toBe("'absent'")
    const pyKeys = await text("py", "print(json.dumps(kv.list()))")
    const jsKeys = await text("js", "console.log(JSON.stringify(kv.list()))")
    expect(JSON.parse(jsKeys)).toEqual(JSON.parse(pyKeys))
    expect(JSON.parse(jsKeys)).toEqual(["from-js", "from-py", long])
  })
})
