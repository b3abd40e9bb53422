import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Logger } from "effect"
import type { RunnerFrame } from "../../src/kernel/Frame.ts"
import * as FrameInbox from "../../src/kernel/FrameInbox.ts"
import type { ByteListener } from "../../src/kernel/KernelProcess.ts"

const bytes = (text: string) => new TextEncoder().encode(text)
const line = (frame: unknown) => JSON.stringify(frame) + "\n"

/** A channel the test feeds by hand, counting pauses and resumes. */
const channel = () => {
  let listener: ByteListener | undefined
  const flow = { pauses: 0, resumes: 0 }
  return {
    flow,
    listen: (l: ByteListener) => {
      listener = l
      return { pause: () => void flow.pauses++, resume: () => void flow.resumes++ }
    },
    send: (text: string) => listener!.onBytes(bytes(text)),
    end: () => listener!.onEnd()
  }
}

describe("FrameInbox", () => {
  it.effect("takes hot frames in the callback when nothing is queued, and routes the rest in order", () =>
    Effect.gen(function*() {
      const ch = channel()
      const seen: Array<string> = []
      const gate = yield* Deferred.make<void>()
      const drained = yield* FrameInbox.make(ch.listen, {
        trace: false,
        takeNow: (frame) => {
          if (frame.type !== "done") return false
          seen.push(`now:${frame.type}`)
          return true
        },
        route: (frame: RunnerFrame) =>
          Effect.andThen(
            frame.type === "stdout" && frame.data === "slow" ? Deferred.await(gate) : Effect.void,
            Effect.sync(() => seen.push(`routed:${frame.type}:${"data" in frame ? frame.data : ""}`))
          )
      })
      ch.send(line({ type: "done", id: "r1", status: "ok", executionCount: 1 }))
      expect(seen).toEqual(["now:done"])
      ch.send(line({ type: "stdout", id: "r2", data: "slow" }))
      yield* Effect.yieldNow
      ch.send(line({ type: "stdout", id: "r2", data: "after" }) + line({ type: "done", id: "r2", status: "ok", executionCount: 2 }))
      expect(seen).toEqual(["now:done"])
      yield* Deferred.succeed(gate, undefined)
      ch.end()
      yield* drained
      expect(seen).toEqual(["now:done", "routed:stdout:slow", "routed:stdout:after", "routed:done:"])
    }))

  it.effect("joins a frame split across chunks and flushes a last line without a newline", () =>
    Effect.gen(function*() {
      const ch = channel()
      const seen: Array<string> = []
      const drained = yield* FrameInbox.make(ch.listen, {
        trace: false,
        takeNow: () => false,
        route: (frame) => Effect.sync(() => seen.push("data" in frame ? String(frame.data) : frame.type))
      })
      const whole = line({ type: "stdout", id: "r1", data: "héllo" })
      ch.send(whole.slice(0, 20))
      ch.send(whole.slice(20))
      ch.send(JSON.stringify({ type: "stderr", id: "r1", data: "tail" }))
      ch.end()
      yield* drained
      expect(seen).toEqual(["héllo", "tail"])
    }))

  const logged: Array<string> = []
  it.effect("logs and skips a line that is not a frame", () =>
    Effect.gen(function*() {
      const ch = channel()
      const seen: Array<string> = []
      const drained = yield* FrameInbox.make(ch.listen, {
        trace: false,
        takeNow: () => false,
        route: (frame) => Effect.sync(() => seen.push(frame.type))
      })
      ch.send("not json\n" + line({ type: "started", id: "r1" }))
      ch.end()
      yield* drained
      expect(seen).toEqual(["started"])
      expect(logged).toHaveLength(1)
      expect(logged[0]).toContain("skipped a runner line that is not a frame: not json")
    }).pipe(Effect.provide(Logger.layer([Logger.make(({ message }) => logged.push(String(message)))]))))

  it.effect("pauses the channel when the queue grows long and resumes it once drained", () =>
    Effect.gen(function*() {
      const ch = channel()
      const gate = yield* Deferred.make<void>()
      let routed = 0
      const drained = yield* FrameInbox.make(ch.listen, {
        trace: false,
        takeNow: () => false,
        route: () => Effect.andThen(Deferred.await(gate), Effect.sync(() => void routed++))
      })
      ch.send(line({ type: "stdout", id: "r1", data: "first" }))
      yield* Effect.yieldNow
      ch.send(Array.from({ length: 300 }, (_, i) => line({ type: "stdout", id: "r1", data: String(i) })).join(""))
      expect(ch.flow.pauses).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      ch.end()
      yield* drained
      expect(routed).toBe(301)
      expect(ch.flow.resumes).toBe(1)
    }))

  it.effect("pauses the channel when a few large frames are queued", () =>
    Effect.gen(function*() {
      const ch = channel()
      const gate = yield* Deferred.make<void>()
      const drained = yield* FrameInbox.make(ch.listen, {
        trace: false,
        takeNow: () => false,
        route: () => Deferred.await(gate)
      })
      ch.send(line({ type: "stdout", id: "r1", data: "first" }))
      yield* Effect.yieldNow
      const big = "x".repeat(64 * 1024)
      for (let i = 0; i < 15; i++) ch.send(line({ type: "stdout", id: "r1", data: big }))
      expect(ch.flow.pauses).toBe(0)
      for (let i = 0; i < 2; i++) ch.send(line({ type: "stdout", id: "r1", data: big }))
      expect(ch.flow.pauses).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      ch.end()
      yield* drained
      expect(ch.flow.resumes).toBe(1)
    }))
})
