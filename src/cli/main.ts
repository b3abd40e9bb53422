/**
 * The `veyyon` executable: runs the command line on `NodeRuntime.runMain` and exits
 * with its code once stdout has drained; stopped by SIGINT or SIGTERM, it ends its
 * kernels and exits 130 or 143 (see `signals.ts`). A reader that goes away (`veyyon eval … | head`,
 * an MCP client that closed) does not crash the process: output to it is dropped and
 * the command still ends normally, shutting its kernels down.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Exit } from "effect"
import { program } from "./cli.ts"
import { ExitCode } from "./exitCodes.ts"
import { signalExitCode, watchStopSignal } from "./signals.ts"

const stopSignal = watchStopSignal()

const teardown = <E, A>(exit: Exit.Exit<E, A>, onExit: (code: number) => void): void => {
  const code = Exit.isSuccess(exit) && typeof exit.value === "number"
    ? exit.value
    : Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)
    ? signalExitCode(stopSignal() ?? "SIGINT")
    : ExitCode.CellFailed
  process.exitCode = code
  if (process.stdout.destroyed || process.stdout.writableEnded) onExit(code)
  else process.stdout.write("", () => onExit(code))
}

const GONE_READER_ERRORS: ReadonlySet<string | undefined> = new Set(["EPIPE", "ERR_STREAM_DESTROYED"])

process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (!GONE_READER_ERRORS.has(error.code)) throw error
})

NodeRuntime.runMain(program(process.argv), { disableErrorReporting: true, teardown })
