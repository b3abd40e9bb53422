/**
 * Process checks for tests that must prove nothing is left running.
 */
import { Duration, Effect } from "effect"
import * as fs from "node:fs"

/** Whether a process with this pid exists (signal 0 probes without delivering anything). */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Polls `check` every 50 ms for up to `ms`; resolves with its last answer. */
export const waitUntil = async (check: () => boolean, ms: number): Promise<boolean> => {
  for (let waited = 0; waited < ms && !check(); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50))
  return check()
}

/** What /proc says of a process: its state letter and process group; undefined when it is gone. */
export const procStat = (pid: number): { readonly state: string; readonly pgrp: number } | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const [state = "", , pgrp = "0"] = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { state, pgrp: Number(pgrp) }
  } catch {
    return undefined
  }
}

/** Whether a process exists and is not a zombie (a zombie has ended; only its entry waits to be reaped). */
export const isLive = (pid: number): boolean => {
  const stat = procStat(pid)
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X"
}

const allPids = (): Array<number> => fs.readdirSync("/proc").filter((entry) => /^\d+$/.test(entry)).map(Number)

/** The live processes whose command line holds `mark`. */
export const liveWithMark = (mark: string): Array<number> =>
  allPids().filter((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(mark) && isLive(pid)
    } catch {
      return false
    }
  })

/** The live members of process group `pgrp`. */
export const liveInGroup = (pgrp: number): Array<number> => allPids().filter((pid) => procStat(pid)?.pgrp === pgrp && isLive(pid))

/** A `sleep` duration no other process uses, so a test can find the sleepers it started by their command line. */
export const uniqueSleep = (): string => `600.${process.pid}${Math.floor(Math.random() * 1e6)}`

/** Waits, polling every 20 ms for up to 20 s, until `check` holds; fails naming `what` otherwise. */
export const eventually = (check: () => boolean, what: string): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let waited = 0; waited < 20_000; waited += 20) {
      if (check()) return
      yield* Effect.sleep(Duration.millis(20))
    }
    throw new Error(`timed out waiting for ${what}`)
  })
