import { describe, expect, it } from "@effect/vitest"
import { SpanStatusCode } from "@opentelemetry/api"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Deferred, Duration, Effect, Fiber, Layer } from "effect"
import { KernelTimings } from "../../src/kernel/KernelTimings.ts"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { makeScriptedSpawner } from "../../src/layers/ScriptedKernelSpawner.ts"
import { TracingLive } from "../../src/layers/Tracing.ts"
import { AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"

describe("kernel spans", () => {
  it.live("reach an OpenTelemetry exporter with their attributes and escalation events", () => {
    const exporter = new InMemorySpanExporter()
    const scripted = makeScriptedSpawner()
    const layer = Layer.mergeAll(
      scripted.layer,
      AgentBridgeNotConfigured,
      TracingLive({ spanProcessor: new SimpleSpanProcessor(exporter) }),
      Layer.succeed(KernelTimings, {
        interruptEscalation: Duration.millis(50),
        shutdownGrace: Duration.millis(20),
        startTimeout: Duration.seconds(5)
      })
    )
    return Effect.gen(function*() {
      yield* Effect.scoped(
        Effect.gen(function*() {
          const kernel = yield* Kernel.make({ command: "fake", args: ["-u", "r.py"], cwd: "/", env: {}, skipCheck: true, key: "s1" })
          yield* Kernel.executeCollect(kernel, { code: "print hi" })
          const cancel = yield* Deferred.make<void>()
          const fiber = yield* Effect.forkChild(Kernel.executeCollect(kernel, { code: "sleep", cancel: Deferred.await(cancel) }))
          yield* Effect.sleep(Duration.millis(10))
          yield* Deferred.succeed(cancel, undefined)
          yield* Fiber.join(fiber)
          yield* Kernel.executeCollect(kernel, { code: "hang-hard", timeoutSeconds: 0.02 })
        })
      )
      yield* Effect.scoped(
        Effect.gen(function*() {
          const kernel = yield* Kernel.make({ command: "fake", args: ["-u", "r.py"], cwd: "/", env: {}, skipCheck: true, key: "s2" })
          yield* Kernel.executeCollect(kernel, { code: "raise boom" })
          yield* Kernel.executeCollect(kernel, { code: "sleep", timeoutSeconds: 0.02 })
        })
      )
      const spans = exporter.getFinishedSpans()
      const names = spans.map((s) => s.name)
      expect(names).toContain("kernel.start")
      expect(names).toContain("kernel.interrupt")
      expect(names).toContain("kernel.shutdown")
      const executes = spans.filter((s) => s.name === "kernel.execute")
      expect(executes).toHaveLength(5)
      expect(executes.map((s) => s.status)).toEqual([
        { code: SpanStatusCode.UNSET },
        { code: SpanStatusCode.ERROR, message: "the cell was cancelled" },
        { code: SpanStatusCode.ERROR, message: "the cell timed out and its kernel was killed" },
        { code: SpanStatusCode.ERROR, message: "the cell raised an error" },
        { code: SpanStatusCode.ERROR, message: "the cell timed out" }
      ])
      expect(executes[3]!.attributes).toMatchObject({ "kernel.status": "error", "kernel.cancelled": false })
      expect(executes[0]!.attributes).toMatchObject({
        "kernel.key": "s1",
        "kernel.status": "ok",
        "kernel.execution_count": 1,
        "kernel.cancelled": false,
        "kernel.timed_out": false,
        "kernel.output_bytes": 3
      })
      expect(executes[0]!.attributes["kernel.request_id"]).toBeTypeOf("string")
      expect(executes[1]!.attributes).toMatchObject({ "kernel.cancelled": true })
      expect(executes[2]!.attributes).toMatchObject({ "kernel.timed_out": true, "kernel.killed": true })
      const shutdowns = spans.filter((s) => s.name === "kernel.shutdown").map((s) => s.events.map((e) => e.name))
      // The killed kernel's cell still runs, and the runner answers it before an exit request: no exit request then.
      expect(shutdowns[0]).toEqual(["SIGTERM", "SIGKILL"])
      expect(shutdowns).toContainEqual(["exit-request"])
    }).pipe(Effect.provide(layer))
  })
})
