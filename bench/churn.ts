/**
 * Cluster churn, measured: runners joining while new sessions start, and fail-over after
 * `kill -9`. `node --import tsx bench/churn.ts [joins] [kills]` (needs PostgreSQL and
 * `dist/`, so `npm run build` first). For each join a runner is added to a cluster of two
 * while a new session starts every 250 ms; it prints each new session's first-cell
 * latency, how many sessions moved (and how many moved twice: a session moved more than
 * once by one join), and whether every moved session's first cell carried the notice.
 * The added runner is then stopped with SIGTERM. For each kill the runner holding a
 * session gets `kill -9` and the time to that session's next answer is printed.
 */
import { Effect } from "effect"
import { PgClient } from "@effect/sql-pg"
import { Redacted, ManagedRuntime } from "effect"
import { REHOMED_NOTICE } from "../src/cluster/LedgerDecision.ts"
import { LEDGER_TABLE } from "../src/cluster/SessionLedger.ts"
import { EvalTool } from "../src/services/tool/EvalTool.ts"
import { spawn } from "node:child_process"
import { LOCK_EXPIRATION_MS, startCluster, type TestCluster, type TestRunner } from "../test/cluster/support.ts"
import { quantile } from "./stats.ts"

const hashString = (str: string) => {
  let h = 5381
  let i = str.length
  while (i) h = (h * 33) ^ str.charCodeAt(--i)
  return (h & 0xbfffffff) | ((h >>> 1) & 0x40000000)
}
/** The shard a session id lands on (the library's hash, 300 shards). */
const shardOf = (sessionId: string) => Math.abs(hashString(sessionId) % 300) + 1

const joins = Number(process.argv[2] ?? 4)
const kills = Number(process.argv[3] ?? 3)

const cell = (cluster: TestCluster, sessionId: string, code: string) =>
  cluster.client.runPromise(EvalTool.use((tool) => tool.run({ language: "py", code }, { sessionId, cwd: cluster.dir })))

const generations = async (sql: ManagedRuntime.ManagedRuntime<PgClient.PgClient, unknown>) =>
  new Map(
    (await sql.runPromise(Effect.gen(function*() {
      const db = yield* PgClient.PgClient
      return yield* db<{ session_id: string; generation: string }>`SELECT session_id, generation FROM ${db(LEDGER_TABLE)}`
    }))).map((row) => [row.session_id, Number(row.generation)])
  )

const join = async (cluster: TestCluster, sql: ManagedRuntime.ManagedRuntime<PgClient.PgClient, unknown>, trial: number) => {
  const old = Array.from({ length: 8 }, (_, index) => `old-${trial}-${index}`)
  for (const sessionId of old) await cell(cluster, sessionId, "x = 1")
  const before = await generations(sql)
  // Busy sessions: a cell runs on them while the runner joins (their shards may move).
  const busy = old.slice(0, 4).map((sessionId) => cell(cluster, sessionId, "import time\ntime.sleep(10)\nx = 1"))
  const firsts: Array<{ sessionId: string; ms: number; at: number }> = []
  const joinStart = performance.now()
  const adding = cluster.addRunner()
  adding.then(() => console.log(`  the runner serves after ${(performance.now() - joinStart).toFixed(0)} ms`))
  let stop = false
  adding.then(() => setTimeout(() => (stop = true), 6000))
  const starts: Array<Promise<void>> = []
  for (let index = 0; !stop && index < 200; index++) {
    const sessionId = `new-${trial}-${index}`
    starts.push((async () => {
      const start = performance.now()
      const result = await cell(cluster, sessionId, "x = 1")
      if (result.notice !== undefined) console.log(`  ${sessionId}: first cell with a notice: ${result.notice}`)
      const ms = performance.now() - start
      const at = start - joinStart
      firsts.push({ sessionId, ms, at })
      if (ms > 2000) {
        const sharing = old.slice(0, 4).filter((busyId) => shardOf(busyId) === shardOf(sessionId))
        console.log(`  ${sessionId} (shard ${shardOf(sessionId)}${sharing.length > 0 ? `, shared with busy ${sharing.join(",")}` : ""}) sent at +${at.toFixed(0)} ms took ${ms.toFixed(0)} ms`)
      }
    })())
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  const added = await adding
  await Promise.all(starts)
  for (const [index, answer] of (await Promise.all(busy)).entries()) {
    if (answer.notice !== undefined || answer.status !== "ok") console.log(`  busy ${old[index]}: ${answer.status} ${answer.notice ?? ""}`)
  }
  await cluster.settled()
  await new Promise((resolve) => setTimeout(resolve, 4000))
  // Every session's next cell: a moved one must say so (variables gone), a kept one has x.
  let moved = 0
  let movedNew = 0
  let wrong = 0
  for (const sessionId of [...old, ...firsts.map((first) => first.sessionId)]) {
    const answer = await cell(cluster, sessionId, "print(globals().get('x'))")
    const lost = answer.text.includes("None")
    if (lost) moved++
    if (lost && sessionId.startsWith("new")) movedNew++
    if (lost !== (answer.notice === REHOMED_NOTICE)) wrong++
  }
  const after = await generations(sql)
  let twice = 0
  for (const [sessionId, generation] of after) {
    const was = before.get(sessionId) ?? 1
    if (sessionId.includes(`-${trial}-`) && generation - was > 1) twice++
  }
  const ms = firsts.map((first) => first.ms)
  console.log(
    `join ${trial}: ${firsts.length} new sessions, first cell p50 ${quantile(ms, 0.5).toFixed(0)} ms, max ${Math.max(...ms).toFixed(0)} ms, ` +
      `over 2 s: ${ms.filter((value) => value > 2000).length}; moved ${moved} (of them new ${movedNew}), moved twice ${twice}, wrong notice ${wrong}`
  )
  added.child.kill("SIGTERM")
  await added.exited
  reportLogs(cluster.runners)
  await cluster.settled()
  return { maxMs: Math.max(...ms), slow: ms.filter((value) => value > 2000).length, twice, wrong }
}

let warnings = 0
const reported = new Map<TestRunner, number>()
/** Prints the warnings and errors runners logged since the last report. */
const reportLogs = (runners: ReadonlyArray<TestRunner>) => {
  for (const runner of runners) {
    const log = runner.log()
    const from = reported.get(runner) ?? 0
    reported.set(runner, log.length)
    for (const line of log.slice(from).split("\n")) {
      if (/level=ERROR/.test(line)) console.log(`  ${runner.address}: ${line.slice(0, 300)}`)
      else if (/level=WARN/.test(line)) {
        warnings++
        if (process.env.CHURN_VERBOSE !== undefined) console.log(`  ${runner.address}: ${line.slice(0, 300)}`)
      } else if (process.env.CHURN_VERBOSE !== undefined && /level=INFO/.test(line)) console.log(`  ${runner.address}: ${line.slice(0, 300)}`)
    }
  }
}

/** CPU hogs for a loaded machine (CHURN_LOAD=N busy processes). */
const hogs = Array.from({ length: Number(process.env.CHURN_LOAD ?? 0) }, () =>
  spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" }))
process.once("exit", () => hogs.forEach((hog) => hog.kill("SIGKILL")))

const failover = async (cluster: TestCluster, trial: number) => {
  const sessionId = `kill-${trial}`
  await cell(cluster, sessionId, "y = 1")
  const owner = (await cluster.owners()).get(sessionId)
  const victim = cluster.runners.find((runner) => runner.address === owner)!
  const start = performance.now()
  victim.child.kill("SIGKILL")
  const answer = await cell(cluster, sessionId, "y = 2")
  const ms = performance.now() - start
  console.log(`kill ${trial}: answered elsewhere after ${ms.toFixed(0)} ms (lock expiry ${LOCK_EXPIRATION_MS} ms), notice: ${answer.notice !== undefined}`)
  await victim.exited
  await cluster.addRunner()
  await cluster.settled()
  return ms
}

const expiry = process.env.CHURN_EXPIRY_MS
const cluster = await startCluster(2, expiry === undefined ? {} : { runnerEnv: { VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS: expiry } })
const sql = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(cluster.pg.url) }))
try {
  const results = []
  for (let trial = 0; trial < joins; trial++) results.push(await join(cluster, sql, trial))
  const failovers = []
  for (let trial = 0; trial < kills; trial++) failovers.push(await failover(cluster, trial))
  console.log(JSON.stringify({
    joins: results,
    joinsWithStall: results.filter((result) => result.slow > 0).length,
    failoverMs: failovers.map((ms) => Math.round(ms)),
    warnings,
    failoverMedianMs: failovers.length === 0 ? null : Math.round(quantile(failovers, 0.5))
  }))
} finally {
  reportLogs(cluster.runners)
  for (const hog of hogs) hog.kill("SIGKILL")
  await sql.dispose()
  await cluster.stop()
}
