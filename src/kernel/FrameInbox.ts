/**
 * Frames taken from the process's data callback. Each chunk is split into lines and
 * decoded right there; a frame the kernel can take at once (`takeNow`: a cell's `started`,
 * a plain `done`) is handled in the callback when nothing is queued before it, so a quiet
 * cell wakes its caller without a reader fiber in between. Any other frame is queued, in
 * order, for one reader fiber that runs the kernel's effects (outputs, bridge calls); a
 * long queue pauses the channel until the reader catches up. A line that is not a frame
 * is logged and skipped.
 */
import { Deferred, Effect, Exit, Result, type Scope } from "effect"
import type { RunnerFrame } from "./Frame.ts"
import { decodeRunnerLine } from "./FrameDecoder.ts"
import { DEFAULT_MAX_FRAME_BYTES } from "./FrameDecoder.ts"
import type { ByteFlow, ByteListener } from "./KernelProcess.ts"
import { LineSplitter } from "./LineSplitter.ts"

/** How the inbox hands frames to its kernel. */
export interface InboxOptions {
  /** Handles `frame` synchronously if it can; false queues it for `route`. */
  readonly takeNow: (frame: RunnerFrame) => boolean
  /** Handles one queued frame. */
  readonly route: (frame: RunnerFrame) => Effect.Effect<void>
  /** Log every line received. */
  readonly trace: boolean
  readonly maxLineBytes?: number
}

type Item = { readonly frame: RunnerFrame } | { readonly warning: string } | { readonly traced: string }

/** Queued items, or queued line bytes, beyond which the channel is paused. */
const HIGH_WATER_ITEMS = 256
const HIGH_WATER_BYTES = 1024 * 1024

const preview = (line: string): string => (line.length > 200 ? `${line.slice(0, 200)}…` : line)

/**
 * Listens on a frame channel (`listen` is the process's `listenFrames`) and runs the reader
 * fiber in the current scope; the returned effect completes once the channel ended and
 * every frame before its end was handled.
 */
export const make = Effect.fnUntraced(function*(
  listen: (listener: ByteListener) => ByteFlow,
  options: InboxOptions
): Effect.fn.Return<Effect.Effect<void>, never, Scope.Scope> {
  const splitter = new LineSplitter(options.maxLineBytes ?? DEFAULT_MAX_FRAME_BYTES)
  let queue: Array<Item> = []
  let queuedBytes = 0
  let ended = false
  let busy = false
  let paused = false
  let wake: Deferred.Deferred<void> | undefined
  const drained = yield* Deferred.make<void>()

  const signal = () => {
    const waiting = wake
    wake = undefined
    if (waiting !== undefined) Deferred.doneUnsafe(waiting, Exit.void)
  }
  const accept = (line: string) => {
    if (line.length === 0) return
    if (options.trace) queue.push({ traced: `ipc <- ${preview(line)}` })
    const decoded = decodeRunnerLine(line)
    if (Result.isFailure(decoded)) {
      queue.push({ warning: `skipped a runner line that is not a frame: ${preview(line)} (${decoded.failure.message})` })
      return
    }
    if (queue.length === 0 && !busy && options.takeNow(decoded.success)) return
    queue.push({ frame: decoded.success })
    queuedBytes += line.length
  }

  const flow = listen({
    onBytes: (bytes) => {
      const split = splitter.push(bytes)
      for (const line of split.lines) accept(line)
      if (split.overlong > 0) queue.push({ warning: `skipped ${split.overlong} runner line(s) longer than ${splitter.maxLineBytes} bytes` })
      if ((queue.length > HIGH_WATER_ITEMS || queuedBytes > HIGH_WATER_BYTES) && !paused) {
        paused = true
        flow.pause()
      }
      if (queue.length > 0) signal()
    },
    onEnd: () => {
      const tail = splitter.flush()
      if (tail !== undefined) accept(tail)
      ended = true
      signal()
    }
  })

  const handle = (item: Item): Effect.Effect<void> =>
    "frame" in item
      ? options.route(item.frame)
      : "warning" in item
      ? Effect.logWarning(item.warning)
      : Effect.logInfo(item.traced)

  const reader = Effect.gen(function*() {
    while (true) {
      if (queue.length === 0) {
        if (paused) {
          paused = false
          flow.resume()
        }
        if (ended) return
        const waiting = Deferred.makeUnsafe<void>()
        wake = waiting
        yield* Deferred.await(waiting)
        continue
      }
      const items = queue
      queue = []
      queuedBytes = 0
      busy = true
      for (const item of items) yield* handle(item)
      busy = false
    }
  })
  yield* reader.pipe(Effect.ensuring(Deferred.succeed(drained, undefined)), Effect.forkScoped)
  return Deferred.await(drained)
})
