import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer } from "effect"
import { KernelTimings } from "../../src/kernel/KernelTimings.ts"
import type { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { NodeKernelSpawnerLive } from "../../src/layers/NodeKernelSpawner.ts"
import { AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"
import { isRunning } from "../support/process.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()
const runnerPath = path.resolve(import.meta.dirname, "../../runner/python/runner.py")

const layer = Layer.mergeAll(
  NodeKernelSpawnerLive,
  AgentBridgeNotConfigured,
  Layer.succeed(KernelTimings, {
    interruptEscalation: Duration.millis(1500),
    shutdownGrace: Duration.millis(500),
    startTimeout: Duration.seconds(30)
  })
)

const start = () =>
  Kernel.make({
    command: python!,
    args: ["-u", runnerPath],
    cwd: process.cwd(),
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", PYTHONUNBUFFERED: "1", PYTHONIOENCODING: "utf-8" }
  })

const stdoutOf = (outputs: ReadonlyArray<KernelOutput>) =>
  outputs.flatMap((o) => (o._tag === "Stdout" ? [o.text] : [])).join("")
const doneOf = (outputs: ReadonlyArray<KernelOutput>) => {
  const done = outputs[outputs.length - 1]
  if (done?._tag !== "Done") throw new Error("the last output is not Done")
  return done
}
const eventually = (check: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100; i++) {
      if (check()) return
      yield* Effect.sleep(Duration.millis(50))
    }
    throw new Error(`timed out waiting for ${what}`)
  })

describe.skipIf(!integrationEnabled() || python === undefined)(titled("Kernel with a real Python", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  it.live("runs cells and keeps state", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      yield* Kernel.executeCollect(kernel, { code: "x = 41" })
      const outputs = yield* Kernel.executeCollect(kernel, { code: "print(x + 1)" })
      expect(stdoutOf(outputs)).toBe("42\n")
      expect(doneOf(outputs)).toMatchObject({ status: "ok", cancelled: false })
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a handler's synchronous path takes stream text beside its effect path, in order and whole; a throw there fails only that call", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      const seen: Array<string> = []
      let offered = 0
      let declined = 0
      const handler = Kernel.outputHandler(
        (output) => Effect.sync(() => seen.push(output._tag === "Stdout" || output._tag === "Stderr" ? output.text : output._tag)),
        (output) => {
          if (output._tag !== "Stdout" && output._tag !== "Stderr") throw new Error("only stream text is offered")
          if (offered++ % 2 === 1) {
            declined++
            return false
          }
          seen.push(output.text)
          return true
        }
      )
      const code = "import sys\nfor i in range(300):\n    print(str(i) * 500, flush=i % 7 == 0)\n    if i % 50 == 0: print('e', i, file=sys.stderr, flush=True)"
      const outcome = yield* kernel.run({ code }, handler)
      expect(outcome.status).toBe("ok")
      const expected = Array.from({ length: 300 }, (_, i) => `${i === 0 ? "e 0\n" : ""}${String(i).repeat(500)}\n${i % 50 === 0 && i > 0 ? `e ${i}\n` : ""}`)
      expect(offered).toBeGreaterThan(1)
      expect(declined).toBeGreaterThan(0)
      const stdout = seen.join("").split("\n").filter((line) => !line.startsWith("e ")).join("\n")
      expect(stdout).toBe(expected.join("").split("\n").filter((line) => !line.startsWith("e ")).join("\n"))
      expect(seen.join("").split("\n").filter((line) => line.startsWith("e ")).length).toBe(6)
      const broken = yield* Effect.exit(kernel.run({ code: "print('boom', flush=True)" }, Kernel.outputHandler(() => Effect.void, () => {
        throw new Error("handler bug")
      })))
      expect(Exit.isFailure(broken) && String(broken.cause)).toContain("handler bug")
      expect(stdoutOf(yield* Kernel.executeCollect(kernel, { code: "print('fine')" }))).toBe("fine\n")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("cancel interrupts time.sleep; the kernel keeps its state", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      yield* Kernel.executeCollect(kernel, { code: "kept = 'yes'" })
      const cancel = yield* Deferred.make<void>()
      const fiber = yield* Effect.forkChild(
        Kernel.executeCollect(kernel, { code: "import time\nprint('sleeping', flush=True)\ntime.sleep(60)", cancel: Deferred.await(cancel) })
      )
      yield* Effect.sleep(Duration.millis(300))
      yield* Deferred.succeed(cancel, undefined)
      const outputs = yield* Fiber.join(fiber)
      expect(outputs.some((o) => o._tag === "Error" && o.ename === "KeyboardInterrupt")).toBe(true)
      expect(doneOf(outputs)).toMatchObject({ status: "error", cancelled: true, killed: false })
      expect(stdoutOf(yield* Kernel.executeCollect(kernel, { code: "print(kept)" }))).toBe("yes\n")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a cancel that arrives before the cell starts still interrupts it, without a kill", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      const outputs = yield* Kernel.executeCollect(kernel, { code: "import time\ntime.sleep(30)", cancel: Effect.void })
      expect(outputs.some((o) => o._tag === "Error" && o.ename === "KeyboardInterrupt")).toBe(true)
      expect(doneOf(outputs)).toMatchObject({ cancelled: true, killed: false })
      expect(yield* kernel.isAlive).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a timed-out cell is interrupted and annotated", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      const done = doneOf(yield* Kernel.executeCollect(kernel, { code: "import time\ntime.sleep(30)", timeoutSeconds: 1 }))
      expect(done).toMatchObject({ cancelled: true, timedOut: true, killed: false })
      expect(done.notice).toContain("eval cell timed out after 1s; kernel interrupted but remains running.")
      expect(yield* kernel.isAlive).toBe(true)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a cell that swallows SIGINT is killed after the escalation delay", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      const code = "import signal\nsignal.signal(signal.SIGINT, lambda *a: None)\nwhile True:\n    pass"
      const done = doneOf(yield* Kernel.executeCollect(kernel, { code, timeoutSeconds: 1 }))
      expect(done).toMatchObject({ timedOut: true, killed: true })
      expect(yield* kernel.isAlive).toBe(false)
      expect(isRunning(kernel.pid)).toBe(false)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("children a cell spawned die with the kernel", () =>
    Effect.gen(function*() {
      let child = 0
      yield* Effect.scoped(
        Effect.gen(function*() {
          const kernel = yield* start()
          const outputs = yield* Kernel.executeCollect(kernel, {
            code: "import subprocess\np = subprocess.Popen(['sleep', '1000'])\nprint(p.pid)"
          })
          child = Number(stdoutOf(outputs).trim())
          expect(isRunning(child)).toBe(true)
        })
      )
      yield* eventually(() => !isRunning(child), "the child to exit")
    }).pipe(Effect.provide(layer)))

  it.live("os._exit mid-cell is reported as kernel death with the exit code", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      const exit = yield* Effect.exit(Kernel.executeCollect(kernel, { code: "import os\nos._exit(3)" }))
      expect(Kernel.isKernelDeath(exit)).toBe(true)
      if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("exit code 3")
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("a spoofed frame printed by the cell is only text", () =>
    Effect.gen(function*() {
      const kernel = yield* start()
      const fake = JSON.stringify({ type: "done", id: "r2", status: "ok", executionCount: 99 })
      const outputs = yield* Kernel.executeCollect(kernel, {
        code: [
          "import os, shlex",
          `fake = ${JSON.stringify(fake)}`,
          "print(fake)",
          "os.write(1, (fake + '\\n').encode())",
          "os.system('echo ' + shlex.quote(fake))",
          "print('after')"
        ].join("\n")
      })
      const lines = stdoutOf(outputs).split("\n").filter((l) => l.length > 0).sort()
      expect(lines, JSON.stringify(outputs)).toEqual(["after", fake, fake, fake].sort())
      expect(outputs.filter((o) => o._tag === "Done")).toHaveLength(1)
      expect(doneOf(outputs).executionCount).not.toBe(99)
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("shutdown leaves no process behind", () =>
    Effect.gen(function*() {
      let pid = 0
      yield* Effect.scoped(
        Effect.gen(function*() {
          const kernel = yield* start()
          pid = kernel.pid
          yield* Kernel.executeCollect(kernel, { code: "1 + 1" })
        })
      )
      expect(isRunning(pid)).toBe(false)
    }).pipe(Effect.provide(layer)))
})
