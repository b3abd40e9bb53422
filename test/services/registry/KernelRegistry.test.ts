import * as os from "node:os"
import { describe, expect, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Duration, Effect, Exit, Layer, Logger, Schedule, Scope, Stream } from "effect"
import { KernelTimings } from "../../../src/kernel/KernelTimings.ts"
import type { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import { allExited, makeScriptedSpawner } from "../../../src/layers/ScriptedKernelSpawner.ts"
import { TracingLive } from "../../../src/layers/Tracing.ts"
import { AgentBridgeNotConfigured } from "../../../src/kernel/AgentBridge.ts"
import { KernelRegistry, RESTART_STATUS_OP, type RegistryRequest } from "../../../src/services/registry/KernelRegistry.ts"
import { KernelSpawner, type SpawnSpec } from "../../../src/kernel/KernelProcess.ts"
import { PythonRuntime, PythonUnavailable } from "../../../src/backends/python/PythonRuntime.ts"
import { RunnerCache } from "../../../src/services/storage/RunnerCache.ts"
import { Settings, type SettingsInput } from "../../../src/services/config/Settings.ts"
import { testSettings } from "../../support/settings.ts"

const interpreter = { executable: "/fake/python3", foundAt: "/fake/python3", rule: "PATH" as const, version: undefined, checked: false, skipped: [] }
const runnerFiles = { folder: "python", dir: "/fake", sources: new Map([["boot.py", ""], ["prelude.py", "print prelude"]]), hash: "abc", wrote: false }

const jsFiles = { folder: "js", dir: "/fake-js", sources: new Map([["runner.mjs", ""], ["prelude.mjs", ""]]), hash: "def", wrote: false }

const setup = (input: SettingsInput = {}) => {
  const scripted = makeScriptedSpawner()
  const deps = Layer.mergeAll(
    scripted.layer,
    AgentBridgeNotConfigured,
    PythonRuntime.fixed(interpreter),
    RunnerCache.fixed({ python: runnerFiles, js: jsFiles }),
    Settings.value(testSettings(input)),
    Layer.succeed(KernelTimings, { interruptEscalation: Duration.millis(50), shutdownGrace: Duration.millis(20), startTimeout: Duration.seconds(5) })
  )
  return { spawns: scripted.spawns, layer: KernelRegistry.layer.pipe(Layer.provideMerge(deps)) }
}

const cwd = os.tmpdir()
const run = (request: Partial<RegistryRequest> & { code: string }) =>
  Effect.flatMap(KernelRegistry, (registry) =>
    Stream.runCollect(registry.execute({ sessionId: "s1", cwd, ...request }))
  )
const done = (outputs: ReadonlyArray<KernelOutput>) => {
  const last = outputs[outputs.length - 1]
  if (last?._tag !== "Done") throw new Error("no Done")
  return last
}

describe("KernelRegistry (session mode)", () => {
  it.live("reuses one kernel per session and keeps its state", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      expect(done(yield* run({ code: "print a" })).executionCount).toBe(1)
      expect(done(yield* run({ code: "print b" })).executionCount).toBe(2)
      expect(spawns.records).toHaveLength(1)
      expect(done(yield* run({ code: "print c", sessionId: "s2" })).executionCount).toBe(1)
      expect(spawns.records).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.live("reset replaces the kernel before the cell", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      yield* run({ code: "print a" })
      expect(done(yield* run({ code: "print b", reset: true })).executionCount).toBe(1)
      expect(spawns.records).toHaveLength(2)
      expect(spawns.records[0]!.exit).toBeDefined()
      const registry = yield* KernelRegistry
      yield* registry.reset("s1")
      expect(spawns.records[1]!.exit).toBeDefined()
      expect(yield* registry.keys).toHaveLength(0)
    }).pipe(Effect.provide(layer))
  })

  it.live("a kernel that died mid-cell is replaced and the cell retried once, saying so and keeping the first attempt's output", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const outputs = yield* run({ code: "print first;crash-once 9;print ok" })
      expect(outputs.map((o) => o._tag)).toEqual(["Stdout", "Status", "Stdout", "Stdout", "Done"])
      expect(outputs[0]!._tag === "Stdout" && outputs[0]!.text).toContain("first")
      const status = outputs[1]!
      expect(status._tag === "Status" && status.op).toBe(RESTART_STATUS_OP)
      expect(status._tag === "Status" && String(status.fields.reason)).toContain("exit code 9")
      expect(status._tag === "Status" && status.fields.exit).toBe("exit code 9")
      const outcome = done(outputs)
      expect(outcome.status).toBe("ok")
      expect(outcome.retried).toBe(true)
      expect(outcome.notice).toContain("ran again in a fresh kernel")
      expect(outcome.notice).toContain("may have happened twice")
      expect(spawns.records).toHaveLength(2)
      expect(done(yield* run({ code: "print later" })).retried).toBeUndefined()
    }).pipe(Effect.provide(layer))
  })

  it.live("a second death ends the cell with an error outcome holding the exit, not a failure", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const outputs = yield* run({ code: "exit 4" })
      expect(outputs.map((o) => o._tag)).toEqual(["Status", "Error", "Done"])
      const error = outputs[1]!
      expect(error._tag === "Error" && error.ename).toBe("KernelDied")
      expect(error._tag === "Error" && error.evalue).toContain("exit code 4")
      const outcome = done(outputs)
      expect(outcome).toMatchObject({ status: "error", retried: true, kernelExit: { code: 4, signal: null } })
      expect(outcome.notice).toContain("twice")
      expect(spawns.records).toHaveLength(2)
      expect(done(yield* run({ code: "print fine" })).status).toBe("ok")
      expect(spawns.records).toHaveLength(3)
    }).pipe(Effect.provide(layer))
  })

  it.live("per-call mode retries and reports the same way", () => {
    const { spawns, layer } = setup({ python: { kernelMode: "per-call" } })
    return Effect.gen(function*() {
      expect(done(yield* run({ code: "crash-once 9;print ok" })).retried).toBe(true)
      expect(done(yield* run({ code: "exit 5" }))).toMatchObject({ status: "error", kernelExit: { code: 5, signal: null } })
      expect(spawns.records).toHaveLength(4)
    }).pipe(Effect.provide(layer))
  })

  it.live("a backend's own kernel mode and idle time-to-live apply to its kernels only", () => {
    const { spawns, layer } = setup({ kernel: { backends: { js: { mode: "per-call" }, py: { idleTtlMs: 50 } } } })
    return Effect.gen(function*() {
      yield* run({ code: "print a", language: "js" })
      yield* run({ code: "print b", language: "js" })
      expect(spawns.records).toHaveLength(2)
      expect(spawns.records.every((record) => record.exit !== undefined)).toBe(true)
      yield* run({ code: "print c" })
      expect(done(yield* run({ code: "print d" })).executionCount).toBe(2)
      expect(spawns.records).toHaveLength(3)
      yield* Effect.sleep(Duration.millis(300))
      expect(spawns.records[2]!.exit).toBeDefined()
    }).pipe(Effect.provide(layer))
  })

  it.live("a jl cell fails saying no Julia runtime is available, and starts nothing", () => {
    const { spawns, layer } = setup({ eval: { jl: true } })
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(run({ code: "1 + 1", language: "jl" }))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("no Julia runtime is available here")
      expect(spawns.records).toHaveLength(0)
      expect(done(yield* run({ code: "print a" })).status).toBe("ok")
    }).pipe(Effect.provide(layer))
  })

  it.live("a killed kernel is replaced on the next call", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      expect(done(yield* run({ code: "hang-hard", timeoutSeconds: 0.05 })).killed).toBe(true)
      expect(done(yield* run({ code: "print again" })).executionCount).toBe(1)
      expect(spawns.records).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.live("a kernel killed from outside is evicted at once, with a log line and a span event, and the next cell runs in a new one", () => {
    const { spawns, layer } = setup()
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => logged.push(String(message)))
    const exporter = new InMemorySpanExporter()
    const observed = Layer.merge(
      Logger.layer([logger]),
      TracingLive({ spanProcessor: new SimpleSpanProcessor(exporter) })
    )
    return Effect.gen(function*() {
      const registry = yield* KernelRegistry
      expect(done(yield* run({ code: "print a" })).executionCount).toBe(1)
      expect(yield* registry.keys).toHaveLength(1)
      yield* spawns.records[0]!.killFromOutside("SIGKILL")
      const gone = yield* registry.keys.pipe(
        Effect.repeat({ until: (keys) => keys.length === 0, schedule: Schedule.spaced(Duration.millis(5)) }),
        Effect.timeoutOption(Duration.seconds(30))
      )
      expect(gone._tag).toBe("Some")
      const line = logged.find((text) => text.includes("died"))
      expect(line).toContain("its process exited (signal SIGKILL)")
      const evicted = exporter.getFinishedSpans().find((span) => span.name === "kernel.evicted")
      expect(evicted?.attributes).toMatchObject({ "kernel.death": "Exited", "kernel.pid": spawns.records[0]!.pid })
      expect(evicted?.events.map((event) => event.name)).toContain("kernel.died")
      const next = done(yield* run({ code: "print b" }))
      expect(next.executionCount).toBe(1)
      expect(next.retried).toBeUndefined()
      expect(spawns.records).toHaveLength(2)
    }).pipe(Effect.provide(layer), Effect.provide(observed))
  })

  it.live("a kernel shut down on request is not reported as a death", () => {
    const { layer } = setup()
    const logged: Array<string> = []
    const logger = Logger.make(({ message }) => logged.push(String(message)))
    return Effect.gen(function*() {
      const registry = yield* KernelRegistry
      yield* run({ code: "print a" })
      yield* registry.reset("s1")
      yield* Effect.sleep(Duration.millis(50))
      expect(logged.filter((text) => text.includes("died"))).toEqual([])
    }).pipe(Effect.provide(layer), Effect.provide(Logger.layer([logger])))
  })

  it.live("an idle kernel is shut down after its time-to-live", () => {
    const { spawns, layer } = setup({ python: { idleTtlMs: 50 } })
    return Effect.gen(function*() {
      yield* run({ code: "print a" })
      expect(spawns.records[0]!.exit).toBeUndefined()
      yield* Effect.sleep(Duration.millis(300))
      expect(spawns.records[0]!.exit).toBeDefined()
    }).pipe(Effect.provide(layer))
  })

  it.live("closing the registry shuts every kernel down", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(layer, scope)
      yield* Effect.all(["a", "b", "c"].map((s) => run({ code: "print x", sessionId: s })), { concurrency: 3 }).pipe(
        Effect.provide(context)
      )
      expect(spawns.records).toHaveLength(3)
      yield* Scope.close(scope, Exit.void)
      expect(allExited(spawns)).toBe(true)
    })
  })

  it.live("checks the interpreter only when its kernel fails to start, and then says what is wrong with it", () => {
    const scripted = makeScriptedSpawner()
    let checks = 0
    const tooOld = new PythonUnavailable({ reason: "too-old", detail: "/fake/python3 (picked by PATH) is Python 3.7.9", tried: [], fix: "install Python 3.8" })
    const layerWith = (check: PythonUnavailable | undefined) =>
      KernelRegistry.layer.pipe(Layer.provideMerge(Layer.mergeAll(
        scripted.layer,
        AgentBridgeNotConfigured,
        Layer.succeed(PythonRuntime, {
          locate: () => Effect.succeed(interpreter),
          resolve: () => Effect.suspend(() => {
            checks++
            return check === undefined ? Effect.succeed(interpreter) : Effect.fail(check)
          }),
          kernelEnv: () => ({})
        }),
        RunnerCache.fixed({ python: { ...runnerFiles, sources: new Map([["boot.py", ""], ["prelude.py", "exit 3"]]) } }),
        Settings.value(testSettings()),
        Layer.succeed(KernelTimings, { interruptEscalation: Duration.millis(50), shutdownGrace: Duration.millis(20), startTimeout: Duration.seconds(5) })
      )))
    return Effect.gen(function*() {
      const explained = yield* Effect.flip(run({ code: "print a" }).pipe(Effect.provide(layerWith(tooOld))))
      expect(explained).toBe(tooOld)
      expect(checks).toBe(1)
      const standing = yield* Effect.flip(run({ code: "print a" }).pipe(Effect.provide(layerWith(undefined))))
      expect(standing._tag).toBe("KernelStartError")
      expect(standing.message).toContain("exit code 3")
      expect(checks).toBe(2)
      expect(allExited(scripted.spawns)).toBe(true)
    })
  })

  it.live("starts a session's kernel again at its next call after a start failed, instead of repeating the failure", () => {
    const sources = new Map([["boot.py", ""], ["prelude.py", "exit 3"]])
    const scripted = makeScriptedSpawner()
    const layer = KernelRegistry.layer.pipe(Layer.provideMerge(Layer.mergeAll(
      scripted.layer,
      AgentBridgeNotConfigured,
      PythonRuntime.fixed(interpreter),
      RunnerCache.fixed({ python: { ...runnerFiles, sources } }),
      Settings.value(testSettings()),
      Layer.succeed(KernelTimings, { interruptEscalation: Duration.millis(50), shutdownGrace: Duration.millis(20), startTimeout: Duration.seconds(5) })
    )))
    return Effect.gen(function*() {
      expect((yield* Effect.flip(run({ code: "print a" })))._tag).toBe("KernelStartError")
      sources.set("prelude.py", "print prelude")
      expect(done(yield* run({ code: "print b" })).status).toBe("ok")
      expect(scripted.spawns.records).toHaveLength(2)
    }).pipe(Effect.provide(layer))
  })

  it.live("does not run the interpreter check for a kernel that starts", () => {
    const scripted = makeScriptedSpawner()
    let checks = 0
    const layer = KernelRegistry.layer.pipe(Layer.provideMerge(Layer.mergeAll(
      scripted.layer,
      AgentBridgeNotConfigured,
      Layer.succeed(PythonRuntime, {
        locate: () => Effect.succeed(interpreter),
        resolve: () => Effect.sync(() => (checks++, interpreter)),
        kernelEnv: () => ({})
      }),
      RunnerCache.fixed({ python: runnerFiles }),
      Settings.value(testSettings()),
      Layer.succeed(KernelTimings, { interruptEscalation: Duration.millis(50), shutdownGrace: Duration.millis(20), startTimeout: Duration.seconds(5) })
    )))
    return Effect.gen(function*() {
      expect(done(yield* run({ code: "print a" })).status).toBe("ok")
      expect(done(yield* run({ code: "print b", sessionId: "s2" })).status).toBe("ok")
      expect(checks).toBe(0)
    }).pipe(Effect.provide(layer))
  })

  it.live("resolves a session's interpreter at its first cell and again only after reset: true or the kernel's end", () => {
    const scripted = makeScriptedSpawner()
    let resolves = 0
    let current = "/fake/python3"
    const resolve = () => Effect.sync(() => {
      resolves++
      return { ...interpreter, executable: current, foundAt: current }
    })
    const runtime = Layer.succeed(PythonRuntime, { resolve, locate: resolve, kernelEnv: () => ({}) })
    const layer = KernelRegistry.layer.pipe(Layer.provideMerge(Layer.mergeAll(
      scripted.layer,
      AgentBridgeNotConfigured,
      runtime,
      RunnerCache.fixed({ python: runnerFiles }),
      Settings.value(testSettings()),
      Layer.succeed(KernelTimings, { interruptEscalation: Duration.millis(50), shutdownGrace: Duration.millis(20), startTimeout: Duration.seconds(5) })
    )))
    return Effect.gen(function*() {
      yield* run({ code: "print a" })
      yield* run({ code: "print b" })
      expect(resolves).toBe(1)
      current = "/fake/venv/bin/python"
      expect(done(yield* run({ code: "print c" })).executionCount).toBe(3)
      expect(resolves).toBe(1)
      yield* run({ code: "print d", reset: true })
      expect(resolves).toBe(2)
      expect(scripted.spawns.records.map((r) => r.command)).toEqual(["/fake/python3", "/fake/venv/bin/python"])
      current = "/fake/other/python"
      expect(done(yield* run({ code: "hang-hard", timeoutSeconds: 0.05 })).killed).toBe(true)
      yield* run({ code: "print e" })
      expect(resolves).toBe(3)
      expect(scripted.spawns.records.map((r) => r.command).at(-1)).toBe("/fake/other/python")
    }).pipe(Effect.provide(layer))
  })

  it.live("a cwd that does not exist is a clear error", () => {
    const { layer } = setup()
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(run({ code: "print a", cwd: "/definitely/not/here" }))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("does not exist")
    }).pipe(Effect.provide(layer))
  })

  it.live("many sessions run side by side without cross-talk", () => {
    const { spawns, layer } = setup()
    return Effect.gen(function*() {
      const sessions = Array.from({ length: 16 }, (_, i) => `s${i}`)
      yield* Effect.all(
        sessions.map((sessionId) =>
          Effect.gen(function*() {
            for (let cell = 0; cell < 20; cell++) {
              const outputs = yield* run({ code: `print ${sessionId}-${cell}`, sessionId })
              expect(outputs.flatMap((o) => (o._tag === "Stdout" ? [o.text] : []))).toEqual([`${sessionId}-${cell}\n`])
              expect(done(outputs).executionCount).toBe(cell + 1)
            }
          })
        ),
        { concurrency: "unbounded" }
      )
      expect(spawns.records).toHaveLength(16)
    }).pipe(Effect.provide(layer))
  })
})

describe("KernelRegistry (per-call mode)", () => {
  it.live("starts a fresh kernel per request and shuts it down after", () => {
    const { spawns, layer } = setup({ python: { kernelMode: "per-call" } })
    return Effect.gen(function*() {
      expect(done(yield* run({ code: "print a" })).executionCount).toBe(1)
      expect(done(yield* run({ code: "print b" })).executionCount).toBe(1)
      expect(spawns.records).toHaveLength(2)
      expect(allExited(spawns)).toBe(true)
    }).pipe(Effect.provide(layer))
  })
})

describe("KernelRegistry (JavaScript)", () => {

  /** The registry over a scripted spawner that records what it was asked to spawn, with no usable Python. */
  const jsSetup = () => {
    const scripted = makeScriptedSpawner()
    const specs: Array<SpawnSpec> = []
    const recording = Layer.effect(
      KernelSpawner,
      Effect.map(KernelSpawner, (inner) => ({
        spawn: (spec: SpawnSpec) => Effect.suspend(() => {
          specs.push(spec)
          return inner.spawn(spec)
        })
      }))
    ).pipe(Layer.provide(scripted.layer))
    const noPython = new PythonUnavailable({ reason: "not-found", detail: "no Python interpreter found", tried: [], fix: "install one" })
    const deps = Layer.mergeAll(
      recording,
      AgentBridgeNotConfigured,
      PythonRuntime.fixed(noPython),
      RunnerCache.fixed({ python: runnerFiles, js: jsFiles }),
      Settings.value(testSettings()),
      Layer.succeed(KernelTimings, { interruptEscalation: Duration.millis(50), shutdownGrace: Duration.millis(20), startTimeout: Duration.seconds(5) })
    )
    return { spawns: scripted.spawns, specs, layer: KernelRegistry.layer.pipe(Layer.provideMerge(deps)) }
  }

  it.live("spawns this process's Node on the cached runner.mjs over fd 3, without resolving Python", () => {
    const { specs, layer } = jsSetup()
    return Effect.gen(function*() {
      expect(done(yield* run({ code: "print a", language: "js" })).executionCount).toBe(1)
      expect(done(yield* run({ code: "print b", language: "js" })).executionCount).toBe(2)
      expect(specs).toHaveLength(1)
      expect(specs[0]).toMatchObject({ command: process.execPath, args: ["/fake-js/runner.mjs"], channel: "fd3" })
      expect(specs[0]!.env.VEYYON_ARTIFACTS_DIR).toBeUndefined() // the session's entries come with init
      const registry = yield* KernelRegistry
      expect((yield* registry.keys).map((key) => key.language)).toEqual(["js"])
      const exit = yield* Effect.exit(run({ code: "print c" }))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("Python backend not available")
    }).pipe(Effect.provide(layer))
  })

  it.live("keeps one kernel per language; reset and reset: true touch only the language asked for", () => {
    const { spawns, layer } = jsSetup()
    return Effect.gen(function*() {
      const registry = yield* KernelRegistry
      yield* run({ code: "print a", language: "js" })
      yield* run({ code: "print b", language: "js", sessionId: "s2" })
      expect(done(yield* run({ code: "print c", language: "js", reset: true })).executionCount).toBe(1)
      expect(spawns.records).toHaveLength(3)
      expect(spawns.records[1]!.exit).toBeUndefined()
      yield* registry.reset("s2", undefined, "py")
      expect(spawns.records[1]!.exit).toBeUndefined()
      yield* registry.reset("s2", undefined, "js")
      expect(spawns.records[1]!.exit).toBeDefined()
    }).pipe(Effect.provide(layer))
  })

  it.live("a missing runner.mjs fails js cells with the reinstall hint", () => {
    const scripted = makeScriptedSpawner()
    const layer = KernelRegistry.layer.pipe(Layer.provideMerge(Layer.mergeAll(
      scripted.layer,
      AgentBridgeNotConfigured,
      PythonRuntime.fixed(interpreter),
      RunnerCache.fixed({ python: runnerFiles }),
      Settings.value(testSettings())
    )))
    return Effect.gen(function*() {
      const exit = yield* Effect.exit(run({ code: "print a", language: "js" }))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("runner/js/")
      expect(done(yield* run({ code: "print b" })).status).toBe("ok")
    }).pipe(Effect.provide(layer))
  })
})
