import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Effect, Logger, References, Result, Schema, Stream } from "effect"
import {
  BridgeResultFrame,
  encodeHostLine,
  ExecuteRequestFrame,
  ExitRequestFrame,
  HostFrame,
  RunnerFrame
} from "../../src/kernel/Frame.ts"
import { decodeFrames, decodeRunnerLine } from "../../src/kernel/FrameDecoder.ts"
import { binaryText, constantFrom, dictionary, integer, oneOf, record } from "./arbitraries.ts"

const bytes = (...parts: Array<string>) => Stream.fromIterable(parts.map((p) => new TextEncoder().encode(p)))

describe("decodeFrames", () => {
  it.effect("decodes frames split across chunks", () =>
    Effect.gen(function*() {
      const frames = yield* decodeFrames(
        bytes('{"type":"started","id":"r1"}\n{"type":"stdout","id":"r1",', '"data":"hi\\n"}\n{"type":"done","id":"r1","status":"ok","executionCount":1}\n')
      ).pipe(Stream.runCollect)
      expect(frames.map((f) => f.type)).toEqual(["started", "stdout", "done"])
      const done = frames[frames.length - 1]!
      expect(done.type === "done" && done.cancelled).toBe(false)
    }))

  it.effect("logs and skips malformed lines without ending the stream", () =>
    Effect.gen(function*() {
      const logged: Array<string> = []
      const logger = Logger.make(({ message }) => logged.push(String(message)))
      const frames = yield* decodeFrames(
        bytes("not json\n", '{"type":"nope"}\n', '{"type":"stdout","id":"r1"}\n', '{"type":"stderr","id":"r1","data":"x"}\n')
      ).pipe(
        Stream.runCollect,
        Effect.provide(Logger.layer([logger])),
        Effect.provideService(References.MinimumLogLevel, "Debug")
      )
      expect(frames.map((f) => f.type)).toEqual(["stderr"])
      expect(logged.filter((m) => m.startsWith("skipped a runner line"))).toHaveLength(3)
    }))

  it.effect("skips a line longer than the bound", () =>
    Effect.gen(function*() {
      const frames = yield* decodeFrames(
        bytes(`{"type":"stdout","id":"r1","data":"${"x".repeat(100)}"}\n`, '{"type":"started","id":"r2"}\n'),
        { maxLineBytes: 64 }
      ).pipe(Stream.runCollect)
      expect(frames.map((f) => f.type)).toEqual(["started"])
    }))

  it.effect("decodes a final line without a newline", () =>
    Effect.gen(function*() {
      const frames = yield* decodeFrames(bytes('{"type":"started","id":"r9"}')).pipe(Stream.runCollect)
      expect(frames).toHaveLength(1)
    }))
})

describe("decodeRunnerLine", () => {
  const schemaDecode = Schema.decodeUnknownResult(Schema.fromJsonString(RunnerFrame))
  const text = binaryText()
  const int = integer(-0x80000000, 0x7fffffff)
  const anyValue = oneOf<unknown>(text, int, Arbitrary.schema(Schema.Boolean), Arbitrary.Constant(null), Arbitrary.Constant(undefined))
  const frameLike = record(
    { type: constantFrom("stdout", "stderr", "started", "done", "display", "result", "nope") },
    {
      id: oneOf<unknown>(text, int),
      data: oneOf(text, anyValue),
      status: oneOf(constantFrom("ok", "error", "maybe"), anyValue),
      executionCount: oneOf(int, anyValue),
      cancelled: anyValue,
      bundle: oneOf<unknown>(dictionary(Arbitrary.schema(Schema.String), anyValue), Arbitrary.array(anyValue), anyValue),
      extra: anyValue
    }
  )

  it.prop("agrees with the schema on every frame-like line, hot path or not", [frameLike], ([frame]) => {
    const line = JSON.stringify(frame)
    const fast = decodeRunnerLine(line)
    const slow = schemaDecode(line)
    expect(Result.isSuccess(fast)).toBe(Result.isSuccess(slow))
    if (Result.isSuccess(fast) && Result.isSuccess(slow)) {
      expect({ ...fast.success }).toEqual({ ...slow.success })
      expect(fast.success.constructor).toBe(slow.success.constructor)
    }
  })

  it("reports a line that is not JSON with the schema's message", () => {
    const result = decodeRunnerLine("{not json")
    expect(Result.isFailure(result)).toBe(true)
  })
})

describe("encodeHostLine", () => {
  it("writes exactly the schema's encoding, one line", () => {
    const encode = Schema.encodeSync(HostFrame)
    const frames = [
      new ExecuteRequestFrame({ id: "r1", code: "x = 1\n", silent: false, storeHistory: true }),
      new ExecuteRequestFrame({ id: "r2", code: "", silent: true, storeHistory: false, cwd: "/tmp", env: { A: "1" } }),
      new ExitRequestFrame({ type: "exit" }),
      new BridgeResultFrame({ type: "bridge_result", callId: "c1", ok: true, value: { text: "é\u2028", n: [1, null] } }),
      new BridgeResultFrame({ type: "bridge_result", callId: "c2", ok: false, error: { name: "N", message: "m" } })
    ]
    for (const frame of frames) {
      const line = encodeHostLine(frame)
      expect(line.endsWith("\n")).toBe(true)
      expect(line.slice(0, -1)).not.toContain("\n")
      expect(JSON.parse(line)).toEqual(encode(frame))
    }
  })
})
