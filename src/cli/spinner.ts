/**
 * A progress spinner on stderr for slow steps (a kernel starting): it appears only when
 * the step takes longer than `SPINNER_DELAY_MS` and stderr is a terminal, and it erases
 * itself when the step ends, however it ends.
 */
import { Effect } from "effect"
import { dumbTerminal } from "./color.ts"

/** How long a step may take before the spinner shows. */
export const SPINNER_DELAY_MS = 300

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
const FRAME_MS = 80

/** Whether this process's stderr can show a spinner. */
export const stderrIsTerminal = (): boolean => process.stderr.isTTY === true && !dumbTerminal()

const start = (label: string) =>
  Effect.sync(() => {
    let frame = 0
    let shown = false
    let ticker: ReturnType<typeof setInterval> | undefined
    const paint = () => {
      shown = true
      process.stderr.write(`\r${FRAMES[frame++ % FRAMES.length]} ${label}`)
    }
    const delay = setTimeout(() => {
      paint()
      ticker = setInterval(paint, FRAME_MS)
    }, SPINNER_DELAY_MS)
    return () => {
      clearTimeout(delay)
      if (ticker !== undefined) clearInterval(ticker)
      if (shown) process.stderr.write("\r\u001b[K")
    }
  })

/** Runs `effect` with a spinner labelled `label` when `enabled` (by default: when stderr is a terminal). */
export const withSpinner = (label: string, enabled: boolean = stderrIsTerminal()) =>
<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  enabled ? Effect.acquireUseRelease(start(label), () => effect, (stop) => Effect.sync(stop)) : effect
