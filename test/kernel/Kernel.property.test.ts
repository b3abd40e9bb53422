import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Deferred, Duration, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { KernelTimings } from "../../src/kernel/KernelTimings.ts"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { allExited, makeScriptedSpawner } from "../../src/layers/ScriptedKernelSpawner.ts"
import { AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"
import { constantFrom } from "./arbitraries.ts"

type Op = "ok" | "error" | "cancel" | "timeout" | "stuck" | "die" | "abandon" | "pair"
const op = constantFrom<Op>("ok", "error", "cancel", "timeout", "stuck", "die", "abandon", "pair")

const timings = Layer.succeed(KernelTimings, {
  interruptEscalation: Duration.millis(60),
  shutdownGrace: Duration.millis(20),
  startTimeout: Duration.seconds(5)
})

const spec: Kernel.KernelLaunch = { command: "fake", args: ["-u", "runner.py"], cwd: "/", env: {}, skipCheck: true }

/** Every execute ends in exactly one outcome: a Done as its last output, or a typed failure. */
const expectOneOutcome = (exit: Exit.Exit<ReadonlyArray<{ _tag: string }>, unknown>) => {
  if (Exit.isSuccess(exit)) {
    expect(exit.value.filter((o) => o._tag === "Done")).toHaveLength(1)
    expect(exit.value[exit.value.length - 1]!._tag).toBe("Done")
  }
}

describe("Kernel lifecycle against a model", () => {
  it.live.prop(
    "any sequence of executes, interrupts, deaths, timeouts and shutdown keeps the invariants",
    [Arbitrary.array(op, { minLength: 1, maxLength: 8 })],
    ([ops]) => {
      const scripted = makeScriptedSpawner()
      return Effect.gen(function*() {
        const scope = yield* Scope.make()
        const start = Kernel.make(spec).pipe(Scope.provide(scope))
        let kernel = yield* start
        const pids = new Set<number>([kernel.pid])
        for (const step of ops) {
          if (!(yield* kernel.isAlive)) {
            const previous = kernel.pid
            kernel = yield* start
            expect(kernel.pid).not.toBe(previous)
            expect(scripted.spawns.records.find((r) => r.pid === previous)?.exit).toBeDefined()
            pids.add(kernel.pid)
          }
          const run = (code: string, extra: Partial<Kernel.ExecuteRequest> = {}) =>
            Effect.exit(Kernel.executeCollect(kernel, { code, ...extra }))
          switch (step) {
            case "ok":
              expectOneOutcome(yield* run("print x"))
              break
            case "error":
              expectOneOutcome(yield* run("raise boom"))
              break
            case "cancel": {
              const cancel = yield* Deferred.make<void>()
              const fiber = yield* Effect.forkChild(run("sleep", { cancel: Deferred.await(cancel) }))
              yield* Effect.sleep(Duration.millis(3))
              yield* Deferred.succeed(cancel, undefined)
              expectOneOutcome(yield* Fiber.join(fiber))
              break
            }
            case "timeout":
              expectOneOutcome(yield* run("sleep", { timeoutSeconds: 0.02 }))
              break
            case "stuck": {
              const exit = yield* run("hang-hard", { timeoutSeconds: 0.02 })
              expectOneOutcome(exit)
              expect(Exit.isSuccess(exit) && exit.value.some((o) => o._tag === "Done" && o.killed)).toBe(true)
              expect(yield* kernel.isAlive).toBe(false)
              break
            }
            case "die":
              expect(Kernel.isKernelDeath(yield* run("print bye;exit 3"))).toBe(true)
              break
            case "abandon": {
              const fiber = yield* Effect.forkChild(run("sleep"))
              yield* Effect.sleep(Duration.millis(3))
              yield* Fiber.interrupt(fiber)
              break
            }
            case "pair": {
              const both = yield* Effect.all([run("print a;wait 2;print b"), run("print c")], { concurrency: 2 })
              both.forEach(expectOneOutcome)
              break
            }
          }
          for (const record of scripted.spawns.records) {
            expect(record.idleSignals.filter((s) => s === "SIGINT")).toEqual([])
            expect(record.overlaps).toBe(0)
          }
        }
        yield* Scope.close(scope, Exit.void)
        expect(allExited(scripted.spawns)).toBe(true)
        expect(scripted.spawns.records.map((r) => r.pid).every((pid) => pids.has(pid))).toBe(true)
      }).pipe(Effect.provide(Layer.mergeAll(scripted.layer, AgentBridgeNotConfigured, timings)))
    },
    { timeout: 120_000, arbitrary: { runs: 25 } }
  )
})
