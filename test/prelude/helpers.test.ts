/**
 * defs(), env() and loading the prelude twice, in a real kernel.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"
import { integrationEnabled } from "../support/python.ts"
import { baseLayer, doneOf, preludeSource, python, resultOf, run, startKernel, stdoutOf, tempDir } from "./kernel.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const layer = Layer.merge(baseLayer, AgentBridgeNotConfigured)

describe.skipIf(!integrationEnabled() || python === undefined)(titled("prelude defs() and env()", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  it.live("defs() lists what cells defined, with shapes, and leaves the prelude out", () =>
    Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-helpers-"))
      expect(resultOf(yield* run(kernel, "defs()"))).toBe("(no user definitions)")
      yield* run(kernel, [
        "def helper(x):",
        "    return x",
        "data = [1, 2, 3]",
        "class DataFrame:",
        "    shape = (2, 1)",
        "df = DataFrame()",
        "import json",
        "limit = 5"
      ].join("\n"))
      expect(resultOf(yield* run(kernel, "defs()"))).toBe(
        ["DataFrame: class", "data: list[3]", "df: DataFrame(2x1)", "helper: function(x)", "json: module json", "limit: int = 5"]
          .join("\n")
      )
      expect(stdoutOf(yield* run(kernel, "%who"))).toBe("DataFrame  data  df  helper  json  limit\n")
      const reset = yield* run(kernel, "%reset -f\nprint(repr(defs()), callable(agent), kv.list())")
      expect(stdoutOf(reset)).toBe("(no user definitions) True []\n")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("env() reads and sets like %env", () =>
    Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-helpers-"))
      const set = yield* run(kernel, "env('VEYYON_PRELUDE_DEMO', 'on')")
      expect(stdoutOf(set)).toBe("env: VEYYON_PRELUDE_DEMO=on\n")
      const read = yield* run(kernel, [
        "from_magic = %env VEYYON_PRELUDE_DEMO",
        "everything = %env",
        "env('VEYYON_PRELUDE_DEMO'), from_magic, env() == everything"
      ].join("\n"))
      expect(resultOf(read)).toBe("('on', 'on', True)")
      const missing = yield* run(kernel, "env('VEYYON_PRELUDE_UNSET')")
      expect(doneOf(missing).status).toBe("error")
      expect(missing.find((o) => o._tag === "Error")).toMatchObject({
        ename: "KeyError",
        evalue: "'environment variable VEYYON_PRELUDE_UNSET is not set'"
      })
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("running the prelude again changes nothing", () =>
    Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-helpers-"))
      yield* run(kernel, "before = (agent, completion, parallel, kv, defs, env)\njson = 'mine'")
      const again = yield* Kernel.executeCollect(kernel, { code: preludeSource, silent: true, storeHistory: false })
      expect(doneOf(again).status).toBe("ok")
      const check = yield* run(kernel, "all(a is b for a, b in zip(before, (agent, completion, parallel, kv, defs, env))), json, sorted(defs())")
      expect(resultOf(check)).toBe("(True, 'mine', ['before', 'json'])")
    }).pipe(Effect.scoped, Effect.provide(layer)))
})
