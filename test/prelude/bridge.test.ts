/**
 * agent() / completion() / parallel() end to end: the real runner and prelude, the host
 * kernel actor, and AgentBridge test layers.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer } from "effect"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { AgentBridgeError, AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"
import { integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import {
  baseLayer,
  bridgeLayer,
  doneOf,
  errorOf,
  python,
  resultOf,
  run,
  startKernel,
  statusesOf,
  stdoutOf,
  tempDir
} from "./kernel.ts"

const promptOf = (params: unknown): string => String((params as { prompt?: unknown }).prompt)

describe.skipIf(!integrationEnabled() || python === undefined)(titled("prelude bridge helpers", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  it.live("a bridge call longer than the cell timeout does not time the cell out", () =>
    Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-bridge-"))
      const outputs = yield* run(kernel, "print(agent('take your time'))", 1)
      expect(doneOf(outputs)).toMatchObject({ status: "ok", cancelled: false, timedOut: false })
      expect(stdoutOf(outputs)).toBe("slow answer to: take your time\n")
      expect(statusesOf(outputs, "timeout").map((f) => f.action)).toEqual(["pause", "resume"])
    }).pipe(
      Effect.scoped,
      Effect.provide(Layer.merge(
        baseLayer,
        bridgeLayer((call) =>
          Effect.sleep(Duration.millis(2500)).pipe(Effect.as({ text: `slow answer to: ${promptOf(call.params)}`, id: "a1" }))
        )
      ))
    ))

  it.live("overlapping parallel calls keep the watchdog paused until the last one returns", () => {
    const delays: Record<string, number> = { a: 2500, b: 300, c: 1500 }
    let inFlight = 0
    let peak = 0
    const bridge = bridgeLayer((call) =>
      Effect.gen(function*() {
        inFlight++
        peak = Math.max(peak, inFlight)
        yield* Effect.sleep(Duration.millis(delays[promptOf(call.params)] ?? 0))
        inFlight--
        return { text: promptOf(call.params).toUpperCase(), id: `id-${promptOf(call.params)}` }
      })
    )
    return Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-bridge-"))
      const outputs = yield* run(kernel, "parallel(agent.defer('a'), agent.defer('b'), completion.defer('c'))", 1)
      expect(doneOf(outputs)).toMatchObject({ status: "ok", timedOut: false })
      expect(resultOf(outputs)).toBe("['A', 'B', 'C']")
      expect(peak).toBe(3)
      const actions = statusesOf(outputs, "timeout").map((f) => f.action)
      expect(actions.filter((a) => a === "pause")).toHaveLength(3)
      expect(actions.filter((a) => a === "resume")).toHaveLength(3)
      expect(statusesOf(outputs, "parallel")).toEqual([{ count: 3, failed: 0 }])
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(baseLayer, bridge)))
  })

  it.live("a failing bridge raises BridgeError with the host's message; parallel keeps the other results", () => {
    const bridge = bridgeLayer((call) =>
      promptOf(call.params) === "bad"
        ? Effect.fail(new AgentBridgeError({ name: "AgentFailed", message: "the subagent crashed" }))
        : Effect.succeed(`ok ${promptOf(call.params)}`)
    )
    return Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-bridge-"))
      const raised = yield* run(kernel, "agent('bad')")
      expect(errorOf(raised)).toEqual({ ename: "BridgeError", evalue: "AgentFailed: the subagent crashed" })
      expect(doneOf(raised)).toMatchObject({ status: "error", cancelled: false })

      const caught = yield* run(kernel, [
        "try:",
        "    completion('bad')",
        "except Exception as exc:",
        "    print(type(exc).__name__, exc.name, '|', exc.message)"
      ].join("\n"))
      expect(stdoutOf(caught)).toBe("BridgeError AgentFailed | the subagent crashed\n")

      const mixed = yield* run(kernel, "r = parallel([agent.defer('one'), agent.defer('bad'), completion.defer('two')])\nprint(r)")
      expect(stdoutOf(mixed)).toBe("['ok one', BridgeError('AgentFailed', 'the subagent crashed'), 'ok two']\n")
      expect(statusesOf(mixed, "parallel")).toEqual([{ count: 3, failed: 1 }])
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(baseLayer, bridge)))
  })

  it.live("without a configured bridge the default error reaches Python", () =>
    Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-bridge-"))
      const outputs = yield* run(kernel, "agent('hello')")
      expect(errorOf(outputs)).toEqual({
        ename: "BridgeError",
        evalue: "AgentBridgeUnavailable: no agent bridge configured: agent() needs the host application to provide an AgentBridge layer"
      })
      const second = yield* run(kernel, "print(parallel(completion.defer('x'))[0])")
      expect(stdoutOf(second)).toContain("no agent bridge configured: completion()")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(baseLayer, AgentBridgeNotConfigured))))

  it.live("schema answers are parsed, and a handle node names the agent", () => {
    const bridge = bridgeLayer((call) =>
      Effect.succeed(
        promptOf(call.params) === "shape"
          ? { text: "```json\n{\"files\": [\"a.py\"], \"count\": \"one\"}\n```", id: "s1" }
          : { text: "{\"files\": [\"a.py\"], \"count\": 1}", id: "n7", agent: (call.params as { agent: string }).agent }
      )
    )
    return Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-bridge-"))
      yield* run(kernel, "S = {'type': 'object', 'required': ['files', 'count'], 'properties': {'files': {'type': 'array', 'items': {'type': 'string'}}, 'count': {'type': 'integer'}}}")
      const node = yield* run(kernel, "n = agent('list', agent='explore', schema=S, handle=True)\nprint(n['handle'], n['agent'], n['data'])")
      expect(stdoutOf(node)).toBe("agent://n7 explore {'files': ['a.py'], 'count': 1}\n")
      const bad = yield* run(kernel, "agent('shape', schema=S)")
      expect(errorOf(bad)).toEqual({
        ename: "SchemaError",
        evalue: "agent() output does not match the schema: $.count: expected integer, got string"
      })
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(baseLayer, bridge)))
  })

  it.live("cancelling a cell mid-parallel interrupts the host calls; the kernel carries on", () => {
    let started = 0
    let interrupted = 0
    const bridge = bridgeLayer(() =>
      Effect.sync(() => started++).pipe(
        Effect.andThen(Effect.never),
        Effect.onInterrupt(() => Effect.sync(() => interrupted++))
      )
    )
    return Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-bridge-"))
      const cancel = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        Kernel.executeCollect(kernel, {
          code: "parallel(agent.defer('x'), agent.defer('y'))",
          cancel: Deferred.await(cancel)
        })
      )
      for (let i = 0; i < 200 && started < 2; i++) yield* Effect.sleep(Duration.millis(25))
      expect(started).toBe(2)
      yield* Deferred.succeed(cancel, undefined)
      const outputs = yield* Fiber.join(fiber)
      expect(errorOf(outputs)?.ename).toBe("KeyboardInterrupt")
      expect(doneOf(outputs)).toMatchObject({ cancelled: true, killed: false })
      for (let i = 0; i < 200 && interrupted < 2; i++) yield* Effect.sleep(Duration.millis(25))
      expect(interrupted).toBe(2)
      const after = yield* run(kernel, "import threading\nprint(sorted(t.name for t in threading.enumerate() if t.name.startswith('veyyon-parallel')))")
      expect(stdoutOf(after)).toBe("[]\n")
    }).pipe(Effect.scoped, Effect.provide(Layer.merge(baseLayer, bridge)))
  })
})
