import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, FastCheck, Logger, LogLevel, Schema, Stream } from "effect"
import {
  BridgeResultFrame,
  decodeRunnerLine,
  encodeHostLine,
  ExecuteRequestFrame,
  ExitRequestFrame,
  HostFrame,
  RunnerFrame
} from "../../src/kernel/Frame.ts"
import { decodeFrames } from "../../src/kernel/FrameDecoder.ts"

const bytes = (...parts: Array<string>) => Stream.fromIterable(parts.map((p) => new TextEncoder().encode(p)))

describe("decodeFrames", () => {
  it.effect("decodes frames split across chunks", () =>
    Effect.gen(function*() {
      const frames = yield* decodeFrames(
        bytes('{"type":"started","id":"r1"}\n{"type":"stdout","id":"r1",', '"data":"hi\\n"}\n{"type":"done","id":"r1","status":"ok","executionCount":1}\n')
      ).pipe(Stream.runCollect)
      expect(Chunk.toArray(frames).map((f) => f.type)).toEqual(["started", "stdout", "done"])
      const done = Chunk.unsafeLast(frames)
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
        Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
        Logger.withMinimumLogLevel(LogLevel.Debug)
      )
      expect(Chunk.toArray(frames).map((f) => f.type)).toEqual(["stderr"])
      expect(logged.filter((m) => m.startsWith("skipped a runner line"))).toHaveLength(3)
    }))

  it.effect("skips a line longer than the bound", () =>
    Effect.gen(function*() {
      const frames = yield* decodeFrames(
        bytes(`{"type":"stdout","id":"r1","data":"${"x".repeat(100)}"}\n`, '{"type":"started","id":"r2"}\n'),
        { maxLineBytes: 64 }
      ).pipe(Stream.runCollect)
      expect(Chunk.toArray(frames).map((f) => f.type)).toEqual(["started"])
    }))

  it.effect("decodes a final line without a newline", () =>
    Effect.gen(function*() {
      const frames = yield* decodeFrames(bytes('{"type":"started","id":"r9"}')).pipe(Stream.runCollect)
      expect(Chunk.size(frames)).toBe(1)
    }))
})

describe("decodeRunnerLine", () => {
  const schemaDecode = Schema.decodeUnknownEither(Schema.parseJson(RunnerFrame))
  const text = FastCheck.string({ unit: "binary" })
  const anyValue = FastCheck.oneof(text, FastCheck.integer(), FastCheck.boolean(), FastCheck.constant(null), FastCheck.constant(undefined))
  const frameLike = FastCheck.record(
    {
      type: FastCheck.constantFrom("stdout", "stderr", "started", "done", "display", "result", "nope"),
      id: FastCheck.oneof(text, FastCheck.integer()),
      data: FastCheck.oneof(text, anyValue),
      status: FastCheck.oneof(FastCheck.constantFrom("ok", "error", "maybe"), anyValue),
      executionCount: FastCheck.oneof(FastCheck.integer(), anyValue),
      cancelled: anyValue,
      bundle: FastCheck.oneof(FastCheck.dictionary(FastCheck.string(), anyValue), FastCheck.array(anyValue), anyValue),
      extra: anyValue
    },
    { requiredKeys: ["type"] }
  )

  it.prop("agrees with the schema on every frame-like line, hot path or not", [frameLike], ([frame]) => {
    const line = JSON.stringify(frame)
    const fast = decodeRunnerLine(line)
    const slow = schemaDecode(line)
    expect(Either.isRight(fast)).toBe(Either.isRight(slow))
    if (Either.isRight(fast) && Either.isRight(slow)) {
      expect({ ...fast.right }).toEqual({ ...slow.right })
      expect(fast.right.constructor).toBe(slow.right.constructor)
    }
  })

  it("reports a line that is not JSON with the schema's message", () => {
    const result = decodeRunnerLine("{not json")
    expect(Either.isLeft(result)).toBe(true)
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
