/**
 * Turns the runner's stdout bytes into frames. A line that is not a valid frame is
 * logged and skipped; it never ends the stream.
 */
import { Effect, Result, type Schema, Stream } from "effect"
import { decodeChunkLine, decodeRunnerLineWithSchema, decodeRunnerValue, type RunnerFrame } from "./Frame.ts"
import { decodeStreamLine } from "./StreamLine.ts"
import { LineSplitter } from "./LineSplitter.ts"

/** Lines longer than this are first tried as a snapshot chunk read without the JSON parser. */
const CHUNK_LINE_MIN = 64 * 1024

/** Decodes one NDJSON line into a runner frame, never throwing. */
export const decodeRunnerLine = (line: string): Result.Result<RunnerFrame, Schema.SchemaError> => {
  const stream = decodeStreamLine(line)
  if (stream !== undefined) return Result.succeed(stream)
  if (line.length > CHUNK_LINE_MIN) {
    const chunk = decodeChunkLine(line)
    if (chunk !== undefined) return Result.succeed(chunk)
  }
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return decodeRunnerLineWithSchema(line)
  }
  return decodeRunnerValue(value)
}

/** The longest frame line kept in memory: 256 MiB, well past any real display bundle. */
export const DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024

/** Options of the decoder. */
export interface FrameDecoderOptions {
  readonly maxLineBytes?: number
  readonly trace?: boolean
}

const preview = (line: string): string => (line.length > 200 ? `${line.slice(0, 200)}…` : line)

/** Decodes runner stdout bytes into frames, skipping (and logging) malformed and overlong lines. */
export const decodeFrames = <E, R>(
  bytes: Stream.Stream<Uint8Array, E, R>,
  options: FrameDecoderOptions = {}
): Stream.Stream<RunnerFrame, E, R> =>
  Stream.suspend(() => {
    const splitter = new LineSplitter(options.maxLineBytes ?? DEFAULT_MAX_FRAME_BYTES)
    const trace = options.trace === true
    const decodeLines = (lines: ReadonlyArray<string>, overlong: number) => {
      const frames: Array<RunnerFrame> = []
      const warnings: Array<string> = []
      for (const line of lines) {
        if (line.length === 0) continue
        const decoded = decodeRunnerLine(line)
        if (Result.isSuccess(decoded)) {
          frames.push(decoded.success)
        } else {
          warnings.push(`skipped a runner line that is not a frame: ${preview(line)} (${decoded.failure.message})`)
        }
      }
      if (overlong > 0) warnings.push(`skipped ${overlong} runner line(s) longer than ${splitter.maxLineBytes} bytes`)
      const emit: readonly [ReadonlyArray<RunnerFrame>] = [frames]
      if (warnings.length === 0 && !trace) return Effect.succeed(emit)
      return Effect.gen(function*() {
        if (trace) for (const line of lines) yield* Effect.logInfo(`ipc <- ${preview(line)}`)
        for (const warning of warnings) yield* Effect.logWarning(warning)
        return emit
      })
    }
    return bytes.pipe(
      Stream.mapArrayEffect((chunk) => {
        const lines: Array<string> = []
        let overlong = 0
        for (const bytesChunk of chunk) {
          const split = splitter.push(bytesChunk)
          for (const line of split.lines) lines.push(line)
          overlong += split.overlong
        }
        return decodeLines(lines, overlong)
      }),
      Stream.concat(
        Stream.suspend(() => {
          const tail = splitter.flush()
          return tail === undefined
            ? Stream.empty
            : Stream.fromEffect(decodeLines([tail], 0)).pipe(Stream.flattenIterable)
        })
      ),
      Stream.flattenIterable
    )
  })
