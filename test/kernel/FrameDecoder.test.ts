import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Logger, LogLevel, Stream } from "effect"
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
