/**
 * The JavaScript prelude in a real kernel: kv files in the shared format, defs(), env(),
 * and agent()/completion() over the bridge frames with the watchdog paused meanwhile.
 */
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { AgentBridgeError, type BridgeCall } from "../../src/kernel/AgentBridge.ts"
import {
  bridgeLayer,
  doneOf,
  errorOf,
  jsLayer,
  resultOf,
  run,
  startJsKernel,
  statusesOf,
  stdoutOf,
  tempDir
} from "./support.ts"

describe("JavaScript prelude", () => {
  it.live("kv writes the Python prelude's file format and checks keys and values", () =>
    Effect.gen(function*() {
      const artifactsDir = yield* tempDir("veyyon-js-kv-")
      const kernel = yield* startJsKernel({ artifactsDir })
      const set = yield* run(kernel, "kv.set('cursor', { id: 'callback-17', n: 1.5, ok: [true, null] }); kv.set('é/ü'.replace('/', '-'), 'x')")
      expect(errorOf(set)).toBeUndefined()
      const file = path.join(artifactsDir, "kv", NodeCrypto.createHash("sha256").update("cursor").digest("hex") + ".json")
      expect(NodeFs.readFileSync(file, "utf8")).toBe('{"key":"cursor","value":{"id":"callback-17","n":1.5,"ok":[true,null]}}')
      expect(resultOf(yield* run(kernel, "[kv.get('cursor').id, kv.get('missing'), kv.get('missing', 7), kv.has('cursor'), kv.list()]")))
        .toBe("[ 'callback-17', undefined, 7, true, [ 'cursor', 'é-ü' ] ]")
      expect(resultOf(yield* run(kernel, "[await kv.delete('cursor'), await kv.delete('cursor'), kv.list().length]"))).toBe("[ true, false, 1 ]")
      yield* run(kernel, "await kv.set('\\u{1F600}', 1); await kv.set('\\uFFFD', 2)")
      expect(resultOf(yield* run(kernel, "JSON.stringify(kv.list())"))).toBe(`'["é-ü","\uFFFD","\u{1F600}"]'`)
      yield* run(kernel, "await kv.delete('\\u{1F600}'); await kv.delete('\\uFFFD')")
      expect(NodeFs.readdirSync(path.join(artifactsDir, "kv")).filter((name) => name.endsWith(".tmp"))).toEqual([])

      const refused = (code: string) => Effect.map(run(kernel, code), (outputs) => errorOf(outputs)?.evalue)
      expect(yield* refused("kv.set('a/b', 1)")).toContain('may not contain "/"')
      expect(yield* refused("kv.set('', 1)")).toContain("1 to 256 characters")
      expect(yield* refused("kv.set('k', new Date())")).toContain("not a plain object")
      expect(yield* refused("kv.set('k', { n: NaN })")).toContain("value.n is NaN")
      expect(yield* refused("kv.set('k', [undefined])")).toContain("value[0] is undefined")
      expect(yield* refused("kv.set('k', 'x'.repeat(300 * 1024))")).toContain("256 KiB")
      expect(resultOf(yield* run(kernel, "kv"))).toBe("<kv store: 1 key>")
    }).pipe(Effect.scoped, Effect.provide(jsLayer())))

  it.live("defs() lists what cells defined with a shape each; env() reads and sets variables", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      yield* run(kernel, "let rows = [1, 2, 3]\nconst label = 'x'\nvar count = 5\nfunction helper(a, b = 2) {}\nclass Model {}\nconst load = async (path) => path\nglobalThis.flag = true\nlet pending\nlet kv = 'mine'")
      const defs = resultOf(yield* run(kernel, "defs()"))
      expect(defs?.split("\n")).toEqual([
        "Model: class",
        "count: number = 5",
        "flag: boolean = true",
        "helper: function(a, b = 2)",
        "kv: string[4]",
        "label: string[1]",
        "load: async function(path)",
        "pending: undefined",
        "rows: Array[3]"
      ])
      const env = yield* run(kernel, "env('VEYYON_JS_TEST', 'on'); [env('VEYYON_JS_TEST'), process.env.VEYYON_JS_TEST, typeof env()]")
      expect(stdoutOf(env)).toBe("env: VEYYON_JS_TEST=on\n")
      expect(resultOf(env)).toBe("[ 'on', 'on', 'object' ]")
      expect(errorOf(yield* run(kernel, "env('NOT_SET_ANYWHERE')"))?.evalue).toContain("is not set")
      const applied = yield* run(kernel, "[process.env.FROM_REQUEST, process.env.PATH === undefined]", { env: { FROM_REQUEST: "yes" } })
      expect(resultOf(applied)).toBe("[ 'yes', false ]")
    }).pipe(Effect.scoped, Effect.provide(jsLayer())))

  it.live("agent() and completion() send the Python prelude's bridge params and pause the watchdog while waiting", () => {
    const calls: Array<BridgeCall> = []
    const bridge = bridgeLayer((call) =>
      Effect.gen(function*() {
        calls.push(call)
        const prompt = String((call.params as { prompt: unknown }).prompt)
        if (prompt === "fail") return yield* new AgentBridgeError({ name: "QuotaExceeded", message: "no budget left" })
        yield* Effect.sleep(Duration.millis(prompt === "slow" ? 1600 : 10))
        if (call.method === "completion") return '```json\n{"score": 3}\n```'
        return { text: `done: ${prompt}`, id: "a7", agent: "deep" }
      })
    )
    return Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const slow = yield* run(kernel, "await agent('slow')", { timeoutSeconds: 1 })
      expect(doneOf(slow)).toMatchObject({ status: "ok", timedOut: false })
      expect(resultOf(slow)).toBe("'done: slow'")
      expect(statusesOf(slow, "timeout").map((fields) => fields.action)).toEqual(["pause", "resume"])
      expect(calls[0]).toMatchObject({
        method: "agent",
        params: { prompt: "slow", agent: "deep", model: null, label: null, schema: null, isolated: null, apply: null, merge: null }
      })

      const many = yield* run(kernel, "await Promise.all([agent('a', { handle: true, label: 'first' }), completion('c', { schema: { type: 'object', required: ['score'] } })])")
      expect(resultOf(many)).toContain("handle: 'agent://a7'")
      expect(resultOf(many)).toContain("{ score: 3 }")
      expect(statusesOf(many, "timeout")).toHaveLength(4)
      expect(calls[2]).toMatchObject({ method: "completion", params: { prompt: "c", model: null, schema: { type: "object", required: ["score"] } } })

      const failed = errorOf(yield* run(kernel, "await agent('fail')"))
      expect(failed).toMatchObject({ ename: "BridgeError", evalue: "QuotaExceeded: no budget left" })
      const caught = yield* run(kernel, "try { await agent('fail') } catch (e) { [e.name, e.code, e instanceof Error] }")
      expect(resultOf(caught)).toBe("[ 'BridgeError', 'QuotaExceeded', true ]")
      const schema = errorOf(yield* run(kernel, "await completion('x', { schema: { type: 'array' } })"))
      expect(schema).toMatchObject({ ename: "SchemaError" })
      expect(schema?.evalue).toContain("$: expected array, got object")
      expect(errorOf(yield* run(kernel, "await agent('x', { modle: 'typo' })"))?.evalue).toContain('no option "modle"')
    }).pipe(Effect.scoped, Effect.provide(jsLayer(bridge)))
  })

  it.live("without an embedder's bridge, agent() rejects with the default bridge's explanation", () =>
    Effect.gen(function*() {
      const kernel = yield* startJsKernel()
      const outputs = yield* run(kernel, "await agent('anything')")
      expect(errorOf(outputs)?.evalue).toContain("AgentBridgeUnavailable: no agent bridge configured")
      expect(statusesOf(outputs, "timeout").map((fields) => fields.action)).toEqual(["pause", "resume"])
    }).pipe(Effect.scoped, Effect.provide(jsLayer())))
})
