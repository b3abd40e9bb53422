/**
 * The soak's faults: a schedule drawn from the seed (a gap of 20-40 s before each, one
 * Postgres restart near the middle), the kind of each runner fault drawn when it comes
 * (kill -9, SIGTERM, or a runner joining; never the first runner, which stays as the
 * long-lived one whose RSS is watched; never past the most).
 */
import { random } from "../soak.ts"

/** What a fault does. */
export type FaultKind = "kill" | "stop" | "join" | "postgres"

/** One fault as injected, and what it did. */
export interface Fault {
  readonly kind: FaultKind
  /** Milliseconds since the mix started. */
  readonly at: number
  /** The runner it hit or added (host:port). */
  readonly runner?: string
  /** How long the fault itself took: the stopped runner's exit, the joining runner's start, Postgres down and up. */
  readonly tookMs: number
  /** The stopped runner's exit code or signal. */
  readonly exit?: number | string
}

/** The instants (ms into the mix) of the faults, and which of them restarts Postgres. */
export interface Schedule {
  readonly at: ReadonlyArray<number>
  readonly postgresIndex: number
}

/** Draws the schedule of a mix of `mixMs`, leaving the last `quietMs` without faults. */
export const schedule = (seed: number, mixMs: number, quietMs: number): Schedule => {
  const rand = random(seed)
  const at: Array<number> = []
  for (let t = 20_000 + rand() * 20_000; t < mixMs - quietMs; t += 20_000 + rand() * 20_000) at.push(Math.round(t))
  const middle = at.findIndex((t) => t >= mixMs / 3)
  return { at, postgresIndex: middle < 0 ? at.length - 1 : middle }
}

/** Picks a runner fault's kind given how many runners live, how many of them may be hit, and the most allowed. */
export const runnerFaultKind = (rand: () => number, live: number, hittable: number, most: number): Exclude<FaultKind, "postgres"> => {
  if (hittable === 0) return "join"
  const kinds: ReadonlyArray<Exclude<FaultKind, "postgres">> = live >= most ? ["kill", "stop"] : ["kill", "stop", "join"]
  return kinds[Math.floor(rand() * kinds.length)]!
}
