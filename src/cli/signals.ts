/**
 * Which signal stopped the program, for its exit code: the runtime interrupts the
 * program on SIGINT and SIGTERM alike (its finalizers end every kernel), and the process
 * then exits as a shell reports a process a signal ended, 128 + the signal's number:
 * 130 for Ctrl-C, 143 for the SIGTERM a service manager sends.
 */
import { constants } from "node:os"

/** The signals that stop the program. */
export const STOP_SIGNALS: ReadonlyArray<NodeJS.Signals> = ["SIGINT", "SIGTERM"]

/** The exit code of a run `signal` stopped: 128 + its number. */
export const signalExitCode = (signal: NodeJS.Signals): number => 128 + constants.signals[signal]

/**
 * Starts listening for the first stop signal and answers a function that says which one
 * came (undefined before any). It listens only until then, so a second signal still has
 * whatever effect the other listeners (or Node's default) give it.
 */
export const watchStopSignal = (target: NodeJS.EventEmitter = process): (() => NodeJS.Signals | undefined) => {
  let received: NodeJS.Signals | undefined
  const listener = (signal: NodeJS.Signals) => {
    received ??= signal
    for (const name of STOP_SIGNALS) target.removeListener(name, listener)
  }
  for (const name of STOP_SIGNALS) target.on(name, listener)
  return () => received
}
