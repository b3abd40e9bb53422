import { getEventListeners } from "node:events"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Scope } from "effect"
import { KernelTimings } from "../../src/kernel/KernelTimings.ts"
import type { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { allExited, lastSpawn, makeScriptedSpawner } from "../../src/layers/ScriptedKernelSpawner.ts"
import { AgentBridge, AgentBridgeError, AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"

const spec: Kernel.KernelLaunch = {
  command: "fake-python",
  args: ["-u", "runner.py"],
  cwd: "/",
  env: {},
  prelude: "print prelude",
  skipCheck: true
}

const fastTimings = Layer.succeed(KernelTimings, {
  interruptEscalation: Duration.millis(100),
  shutdownGrace: Duration.millis(50),
  startTimeout: Duration.seconds(5)
})

const setup = (bridge: Layer.Layer<AgentBridge> = AgentBridgeNotConfigured) => {
  const scripted = makeScriptedSpawner()
  return { spawns: scripted.spawns, layer: Layer.mergeAll(scripted.layer, bridge, fastTimings) }
}

const run = (kernel: Kernel.Kernel, code: string, extra: Partial<Kernel.ExecuteRequest> = {}) =>
  Kernel.executeCollect(kernel, { code, ...extra })

const last = (outputs: ReadonlyArray<KernelOutput>) => outputs[outputs.length - 1]!
const doneOf = (outputs: ReadonlyArray<KernelOutput>) => {
  const done = last(outputs)
  if (done._tag !== "Done") throw new Error(`expected Done last, got ${done._tag}`)
  return done
}

describe("Kernel with a scripted process", () => {
  it.live("starts with the prelude (sent at spawn) and init, then runs cells in order", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const outputs = yield* run(kernel, "print hello;display pic")
      expect(outputs.map((o) => o._tag)).toEqual(["Stdout", "Display", "Done"])
      expect(doneOf(outputs)).toMatchObject({ status: "ok", executionCount: 1, cancelled: false, killed: false })
      expect(doneOf(yield* run(kernel, "print again")).executionCount).toBe(2)
      expect(Option.getOrThrow(lastSpawn(spawns)).requests).toEqual(["print prelude", "", "print hello;display pic", "print again"])
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("a spawned runner runs the prelude before it is bound; binding sends only init", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const pending = yield* Kernel.spawn(spec)
      const requests = () => Option.getOrThrow(lastSpawn(spawns)).requests
      yield* Effect.sleep(Duration.millis(20)).pipe(Effect.repeat({ until: () => requests().length > 0 }))
      expect(requests()).toEqual(["print prelude"])
      const kernel = yield* pending.start({ cwd: "/tmp" })
      expect(requests()).toEqual(["print prelude", ""])
      expect(doneOf(yield* run(kernel, "print hello")).executionCount).toBe(1)
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("run hands outputs to the handler in order; a handler that throws fails that call, not the kernel", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const seen: Array<string> = []
      const outcome = yield* kernel.run({ code: "print one;print two" }, (output) => Effect.sync(() => seen.push(output._tag)))
      expect(seen).toEqual(["Stdout", "Stdout"])
      expect(outcome).toMatchObject({ status: "ok", executionCount: 1, cancelled: false })
      const broken = yield* Effect.exit(kernel.run({ code: "print boom;sleep 50;print after" }, () => {
        throw new Error("handler bug")
      }))
      expect(Exit.isFailure(broken) && String(broken.cause)).toContain("handler bug")
      const again = yield* kernel.run({ code: "print fine" }, () => Effect.void)
      expect(again.status).toBe("ok")
      expect(Option.getOrThrow(lastSpawn(spawns)).exit).toBeUndefined()
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("queues concurrent executes so they never interleave", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const results = yield* Effect.all(
        Array.from({ length: 5 }, (_, i) => run(kernel, `print a${i};wait 5;print b${i}`)),
        { concurrency: "unbounded" }
      )
      for (const [i, outputs] of results.entries()) {
        expect(outputs.filter((o) => o._tag === "Stdout").map((o) => o.text)).toEqual([`a${i}\n`, `b${i}\n`])
      }
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("cancel sends SIGINT and the cell ends cancelled with its outputs", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const cancel = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(run(kernel, "print before;sleep", { cancel: Deferred.await(cancel) }))
      yield* Effect.sleep(Duration.millis(20))
      yield* Deferred.succeed(cancel, undefined)
      const outputs = yield* Fiber.join(fiber)
      expect(outputs.map((o) => o._tag)).toEqual(["Stdout", "Error", "Done"])
      expect(doneOf(outputs)).toMatchObject({ status: "error", cancelled: true, timedOut: false, killed: false })
      const record = Option.getOrThrow(lastSpawn(spawns))
      expect(record.signals).toEqual(["SIGINT"])
      expect(record.idleSignals).toEqual([])
      expect(doneOf(yield* run(kernel, "print still here")).status).toBe("ok")
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("a cancel that comes before the cell started waits for it, then interrupts it", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const outputs = yield* run(kernel, "sleep", { cancel: Effect.void })
      expect(doneOf(outputs)).toMatchObject({ cancelled: true, killed: false })
      expect(Option.getOrThrow(lastSpawn(spawns)).idleSignals).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("an AbortSignal stops the cell like cancel, before or during it, and its listener goes with the cell", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const during = new AbortController()
      const fiber = yield* Effect.forkChild(run(kernel, "print before;sleep", { signal: during.signal }))
      for (let waited = 0; getEventListeners(during.signal, "abort").length === 0 && waited < 30_000; waited += 10) {
        yield* Effect.sleep(Duration.millis(10))
      }
      expect(getEventListeners(during.signal, "abort")).toHaveLength(1)
      during.abort()
      const outputs = yield* Fiber.join(fiber)
      expect(outputs.map((o) => o._tag)).toEqual(["Stdout", "Error", "Done"])
      expect(doneOf(outputs)).toMatchObject({ status: "error", cancelled: true, timedOut: false, killed: false })
      const before = new AbortController()
      before.abort()
      expect(doneOf(yield* run(kernel, "sleep", { signal: before.signal }))).toMatchObject({ cancelled: true, killed: false })
      const unused = new AbortController()
      expect(doneOf(yield* run(kernel, "print still here", { signal: unused.signal })).status).toBe("ok")
      expect(getEventListeners(unused.signal, "abort")).toHaveLength(0)
      const record = Option.getOrThrow(lastSpawn(spawns))
      expect(record.signals).toEqual(["SIGINT", "SIGINT"])
      expect(record.idleSignals).toEqual([])
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("a timeout interrupts the cell and says so", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const done = doneOf(yield* run(kernel, "sleep", { timeoutSeconds: 1 }))
      expect(done).toMatchObject({ cancelled: true, timedOut: true, killed: false })
      expect(done.notice).toBe(
        "eval cell timed out after 1s; kernel interrupted but remains running. Reset the kernel via { reset: true } if state appears corrupted."
      )
      expect(yield* kernel.isAlive).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("timeout status events pause the watchdog", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const done = doneOf(yield* run(kernel, "pause;wait 1500;resume;print ok", { timeoutSeconds: 1 }))
      expect(done).toMatchObject({ status: "ok", timedOut: false })
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("a cell that ignores SIGINT gets the kernel killed; the next call fails so the owner replaces it", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const done = doneOf(yield* run(kernel, "hang-hard", { timeoutSeconds: 1 }))
      expect(done).toMatchObject({ cancelled: true, timedOut: true, killed: true })
      expect(done.notice).toContain("was killed")
      const record = Option.getOrThrow(lastSpawn(spawns))
      expect(record.signals).toEqual(["SIGINT", "SIGTERM", "SIGKILL"])
      expect(record.exit).toEqual({ code: null, signal: "SIGKILL" })
      expect(yield* kernel.isAlive).toBe(false)
      expect((yield* kernel.dead)._tag).toBe("Killed")
      const next = yield* Effect.exit(run(kernel, "print x"))
      expect(Exit.isFailure(next)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("interrupting the consumer delivers SIGINT and waits for the cell to stop", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const fiber = yield* Effect.forkChild(run(kernel, "sleep"))
      yield* Effect.sleep(Duration.millis(20))
      yield* Fiber.interrupt(fiber)
      const record = Option.getOrThrow(lastSpawn(spawns))
      expect(record.signals).toEqual(["SIGINT"])
      expect(doneOf(yield* run(kernel, "print next")).status).toBe("ok")
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("a process that dies mid-cell fails the cell with KernelDied", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const exit = yield* Effect.exit(run(kernel, "print bye;exit 3"))
      expect(Kernel.isKernelDeath(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("exit code 3")
      const again = yield* Effect.exit(run(kernel, "print x"))
      expect(Kernel.isKernelDeath(again)).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("a process that dies during start-up fails make with a KernelStartError", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(Kernel.make({ ...spec, prelude: "exit 7" }))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("did not start")
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("bridge calls reach the AgentBridge and answer the cell", () => {
    const bridge = Layer.succeed(AgentBridge, {
      call: (call) =>
        call.method === "agent"
          ? Effect.succeed({ answer: 42, method: call.method })
          : Effect.fail(new AgentBridgeError({ name: "Nope", message: "no completions" }))
    })
    const { layer } = setup(bridge)
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const outputs = yield* run(kernel, "bridge agent;bridge completion")
      const texts = outputs.filter((o) => o._tag === "Stdout").map((o) => o.text)
      expect(texts).toEqual([`{"answer":42,"method":"agent"}\n`, `{"name":"Nope","message":"no completions"}\n`])
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("the default bridge answers with a clear error", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const kernel = yield* Kernel.make(spec)
      const outputs = yield* run(kernel, "bridge agent")
      const text = outputs.find((o) => o._tag === "Stdout")
      expect(text?._tag === "Stdout" && text.text).toContain("no agent bridge configured")
    }).pipe(Effect.scoped, Effect.provide(layer))
  })

  it.live("closing the scope shuts down every process, also mid-cell", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const scope = yield* Scope.make()
      const kernel = yield* Kernel.make(spec).pipe(Scope.provide(scope))
      const fiber = yield* Effect.forkChild(Effect.exit(run(kernel, "hang")))
      yield* Effect.sleep(Duration.millis(20))
      yield* Scope.close(scope, Exit.void)
      const exit = yield* Fiber.join(fiber)
      expect(Exit.isFailure(exit)).toBe(true)
      expect(allExited(spawns)).toBe(true)
    }).pipe(Effect.provide(layer))
  })

  it.live("a graceful shutdown uses the exit request and sends no SIGINT", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      yield* Effect.scoped(Effect.flatMap(Kernel.make(spec), (kernel) => run(kernel, "print x")))
      const record = Option.getOrThrow(lastSpawn(spawns))
      expect(record.exit).toEqual({ code: 0, signal: null })
      expect(record.signals).toEqual([])
    }).pipe(Effect.provide(layer))
  })
})
