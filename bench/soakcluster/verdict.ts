/**
 * The soak's checks over what the agents saw: how many times each call's cell ran (its
 * lines in the counter file) against what its answer said, the acknowledged kv keys
 * against what the session reads back, and each runner fault's fail-over time.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Agent, CallRecord, Outcome } from "./agent.ts"
import type { Fault } from "./faults.ts"

/** How many times a cell may have run, given its answer: [least, most]. */
const runsAllowed: Record<Outcome, readonly [number, number]> = {
  "ok": [1, 1],
  "rehomed": [1, 1],
  "already-ran": [1, 1],
  "lost": [0, 1],
  "database-did-not-run": [0, 0],
  "database-may-have-run": [0, 1],
  "failed": [0, 1],
  "unanswered": [0, 1]
}

/** The problems of one agent's calls: unanswered or failed calls, cells run a wrong number of times, ids never sent. */
export const callProblems = (agent: Agent, shared: string): Array<string> => {
  const problems: Array<string> = []
  const file = path.join(shared, agent.counterFile)
  const lines = fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "") : []
  const runs = new Map<string, number>()
  for (const line of lines) runs.set(line, (runs.get(line) ?? 0) + 1)
  const sent = new Set(agent.calls.map((call) => call.id))
  if (sent.size !== agent.calls.length) problems.push(`agent ${agent.index} sent a call id twice`)
  for (const id of runs.keys()) if (!sent.has(id)) problems.push(`agent ${agent.index}: ${id} ran but was never sent`)
  for (const call of agent.calls) {
    const count = runs.get(call.id) ?? 0
    const [least, most] = runsAllowed[call.outcome]
    if (call.outcome === "failed" || call.outcome === "unanswered") problems.push(`${call.id} (${call.language}) ${call.outcome}: ${call.detail.slice(0, 400)}`)
    if (count < least || count > most) problems.push(`${call.id} (${call.language}) answered ${call.outcome} but its cell ran ${count} times`)
  }
  return problems
}

/** The acknowledged kv keys an agent's session did not read back. */
export const kvProblems = (agent: Agent, read: Set<string> | string): Array<string> => {
  if (typeof read === "string") return [`agent ${agent.index}: ${read}`]
  const missing = agent.acknowledged.filter((key) => !read.has(key))
  return missing.length === 0 ? [] : [`agent ${agent.index}: ${missing.length} acknowledged kv writes lost (${missing.slice(0, 5).join(", ")})`]
}

/** Calls by outcome over every agent. */
export const outcomes = (agents: ReadonlyArray<Agent>): Record<string, number> => {
  const counts: Record<string, number> = {}
  for (const call of agents.flatMap((agent) => agent.calls)) counts[call.outcome] = (counts[call.outcome] ?? 0) + 1
  return counts
}

/** A fault's fail-over: for each agent it hit, the time from the fault to that agent's first answer that did not come from the runner hit. */
export interface Failover {
  readonly fault: Fault
  readonly agents: number
  readonly ms: ReadonlyArray<number>
}

/**
 * The fail-over of a fault (`start`: the mix's start, epoch ms). A kill or stop hits the
 * agents whose last answer before it came from its runner (`owners`, as the fault came);
 * a Postgres restart hits every agent.
 */
export const failover = (fault: Fault, start: number, owners: ReadonlyMap<number, string | undefined>, agents: ReadonlyArray<Agent>): Failover => {
  const at = start + fault.at
  const hit = agents.filter((agent) => fault.kind === "postgres" || owners.get(agent.index) === fault.runner)
  const ms: Array<number> = []
  for (const agent of hit) {
    const next = agent.calls.find((call: CallRecord) => call.answeredAt > at && call.runner !== undefined && call.runner !== fault.runner)
    if (next !== undefined) ms.push(next.answeredAt - at)
  }
  return { fault, agents: hit.length, ms }
}
