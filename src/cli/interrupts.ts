/**
 * Ctrl-C while a command runs cells. The runtime's own SIGINT handler interrupts the
 * whole program; commands that run cells take SIGINT over for their scope so the first
 * Ctrl-C stops the running cell instead, and hand it back when they are done.
 */
import { Effect, type Scope } from "effect"

/** Calls `onSigint` for every SIGINT while the scope is open; `passOn` forwards one to the handlers it displaced. */
export const takeOverSigint = (
  onSigint: (passOn: () => void) => void
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const displaced = process.listeners("SIGINT")
      const passOn = () => {
        for (const listener of displaced) listener("SIGINT")
      }
      const listener = () => onSigint(passOn)
      process.removeAllListeners("SIGINT")
      process.on("SIGINT", listener)
      return { displaced, listener }
    }),
    ({ displaced, listener }) =>
      Effect.sync(() => {
        process.removeListener("SIGINT", listener)
        for (const previous of displaced) {
          if (!process.listeners("SIGINT").includes(previous)) process.on("SIGINT", previous)
        }
      })
  ).pipe(Effect.asVoid)
