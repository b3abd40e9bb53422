/**
 * Progress for a long `tools/call`: while the cell runs, a `notifications/progress`
 * at a fixed interval (at most 5 s apart), so a client that resets its request timeout
 * on progress waits for the whole cell budget. progress = seconds elapsed, total = the
 * cell's timeout, message = the latest line the cell printed, clamped.
 */
import { Duration, Effect, Fiber, Schedule } from "effect"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { type JsonRpcId, type JsonRpcOut, notification } from "./JsonRpc.ts"

/** The longest gap between two progress notifications the server promises. */
export const MAX_PROGRESS_INTERVAL_MS = 5_000

/** The interval used unless a shorter one is configured: a margin under the promise for a busy event loop. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 4_000

/** The longest progress message, in characters. */
export const MAX_PROGRESS_MESSAGE_CHARS = 200

/** An interval from the environment (`VEYYON_MCP_PROGRESS_INTERVAL_MS`), kept within 100 ms..the promise. */
export const progressIntervalMs = (raw: string | undefined): number => {
  const value = raw === undefined ? NaN : Number(raw)
  if (!Number.isFinite(value)) return DEFAULT_PROGRESS_INTERVAL_MS
  return Math.min(MAX_PROGRESS_INTERVAL_MS, Math.max(100, Math.round(value)))
}

/** The last non-blank line of `text`, clamped, or undefined when it has none. */
export const lastLine = (text: string): string | undefined => {
  const lines = text.split(/\r?\n|\r/)
  for (let i = lines.length - 1; i >= 0; i--) {
    const line = lines[i]!.trim()
    if (line.length > 0) return line.length > MAX_PROGRESS_MESSAGE_CHARS ? `${line.slice(0, MAX_PROGRESS_MESSAGE_CHARS - 1)}…` : line
  }
  return undefined
}

/** The notification for `elapsedMs` into a cell with a `totalSeconds` budget. */
export const progressNotification = (
  progressToken: JsonRpcId,
  elapsedMs: number,
  totalSeconds: number,
  message: string | undefined
): JsonRpcOut =>
  notification("notifications/progress", {
    progressToken,
    progress: Math.round(elapsedMs / 100) / 10,
    total: totalSeconds,
    ...(message === undefined ? {} : { message })
  })

/** Tracks the latest output line of a running cell. */
export const makeLineTracker = () => {
  let latest: string | undefined
  return {
    onEvent: (output: KernelOutput): void => {
      if (output._tag === "Stdout" || output._tag === "Stderr") latest = lastLine(output.text) ?? latest
    },
    latest: (): string | undefined => latest
  }
}

/**
 * Runs `effect` while sending progress every `intervalMs` through `notify`; the ticker
 * stops before the effect's result is returned, so no progress follows the answer.
 */
export const withProgress = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  options: {
    readonly token: JsonRpcId
    readonly totalSeconds: number
    readonly intervalMs: number
    readonly latest: () => string | undefined
    readonly notify: (message: JsonRpcOut) => Effect.Effect<void>
  }
): Effect.Effect<A, E, R> =>
  Effect.gen(function*() {
    const started = Date.now()
    let last = 0
    const tick = Effect.suspend(() => {
      const elapsed = Math.max(Date.now() - started, last + 100)
      last = elapsed
      return options.notify(progressNotification(options.token, elapsed, options.totalSeconds, options.latest()))
    })
    const ticker = yield* Effect.forkChild(
      Effect.andThen(Effect.sleep(Duration.millis(options.intervalMs)), Effect.repeat(tick, Schedule.spaced(Duration.millis(options.intervalMs))))
    )
    return yield* Effect.ensuring(effect, Fiber.interrupt(ticker))
  })
