/**
 * The delays a kernel waits before escalating, as a context reference so tests and
 * embedders can shorten or lengthen them.
 */
import { Context, Duration } from "effect"

/** Delays of interrupt and shutdown escalation. */
export interface Timings {
  /** How long after SIGINT a cell may take to send `done` before the kernel is killed. */
  readonly interruptEscalation: Duration.Duration
  /** How long after the exit request before SIGTERM, and after SIGTERM before SIGKILL. */
  readonly shutdownGrace: Duration.Duration
  /** How long start-up (spawn, init, prelude) may take. */
  readonly startTimeout: Duration.Duration
}

/** INTERRUPT_ESCALATION_MS of the seed. */
export const INTERRUPT_ESCALATION_MS = 5_000
/** SHUTDOWN_GRACE_MS of the seed, per escalation step. */
export const SHUTDOWN_GRACE_MS = 1_000

/** The kernel delays in force; defaults to the seed's values. */
export const KernelTimings = Context.Reference<Timings>("veyyon/KernelTimings", {
  defaultValue: () => ({
    interruptEscalation: Duration.millis(INTERRUPT_ESCALATION_MS),
    shutdownGrace: Duration.millis(SHUTDOWN_GRACE_MS),
    startTimeout: Duration.seconds(60)
  })
})
