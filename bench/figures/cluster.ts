/**
 * Figure: the cluster. A warm trivial cell through the cluster (client -> runner ->
 * kernel, on loopback, the session ledger in a local PostgreSQL) against the same cell
 * in-process, and the fail-over time: from `kill -9` of the runner holding a session (or
 * its SIGTERM) until the next cell on that session is answered by another runner, with
 * the shard lock expiry the test cluster uses. Needs PostgreSQL (`initdb`) and `dist/`.
 */
import { EvalTool } from "../../dist/services/tool/EvalTool.js"
import { LOCK_EXPIRATION_MS, startCluster, type TestCluster } from "../../test/cluster/support.ts"
import { postgresSkipReason } from "../../test/support/postgres.ts"
import type { BenchContext, FigureResult } from "../context.ts"
import { quantile } from "../stats.ts"
import type { Row } from "../table.ts"
import { runCell } from "../veyyon.ts"

const CODE = "x = 1 + 1"

const samplesOf = async (once: () => Promise<unknown>, cells: number, warmup: number): Promise<Array<number>> => {
  for (let i = 0; i < warmup; i++) await once()
  const samples: Array<number> = []
  for (let i = 0; i < cells; i++) {
    const start = performance.now()
    await once()
    samples.push((performance.now() - start) * 1000)
  }
  return samples
}

const clusterCell = (cluster: TestCluster, sessionId: string, code: string) =>
  cluster.client.runPromise(EvalTool.use((tool) => tool.run({ language: "py", code }, { sessionId, cwd: cluster.dir })))

/**
 * Milliseconds from stopping the runner that holds `sessionId` (with `signal`) until a
 * cell on it is answered by another runner. After SIGTERM the runner still serves while it
 * hands off, so the next cell is sent once it has exited.
 */
const failover = async (cluster: TestCluster, sessionId: string, signal: "SIGKILL" | "SIGTERM"): Promise<number> => {
  await clusterCell(cluster, sessionId, "y = 1")
  const owner = (await cluster.owners()).get(sessionId)
  const victim = cluster.runners.find((runner) => runner.address === owner)
  if (victim === undefined) throw new Error(`no live owner for ${sessionId}`)
  const start = performance.now()
  victim.child.kill(signal)
  if (signal === "SIGTERM") await victim.exited
  const answer = await clusterCell(cluster, sessionId, "y = 2")
  const ms = performance.now() - start
  if (answer.notice === undefined) throw new Error(`the moved session's first cell carried no notice: ${answer.text}`)
  await victim.exited
  await cluster.addRunner()
  await cluster.settled()
  return ms
}

/** Measures the cluster figure. */
export const cluster = async (context: BenchContext): Promise<FigureResult> => {
  const skip = postgresSkipReason()
  if (skip !== undefined) throw new Error(`cluster figure skipped: ${skip}`)
  const cells = context.quick ? 30 : 500
  // A cluster runs long: its steady state, after the JIT has seen the path, is what a user meets.
  const warmup = context.quick ? 5 : 1000
  const trials = context.quick ? 1 : 3
  const inProcess = await samplesOf(
    () => context.veyyon.runPromise(runCell({ code: CODE }, { sessionId: "bench-cluster-local", cwd: context.workDir })),
    cells,
    warmup
  )
  const test = await startCluster(2)
  try {
    const through = await samplesOf(() => clusterCell(test, "bench-cluster", CODE), cells, warmup)
    const killed: Array<number> = []
    const terminated: Array<number> = []
    for (let trial = 0; trial < trials; trial++) killed.push(await failover(test, `bench-kill-${trial}`, "SIGKILL"))
    for (let trial = 0; trial < trials; trial++) terminated.push(await failover(test, `bench-term-${trial}`, "SIGTERM"))
    const figure = "cluster"
    const p = (samples: ReadonlyArray<number>, q: number) => quantile(samples, q)
    const rows: Array<Row> = [
      { figure, measure: "p50, warm cell in-process (EvalTool.run)", unit: "us", veyyon: p(inProcess, 0.5), floor: null, jupyter: null },
      { figure, measure: "p50, warm cell through the cluster (client -> runner -> kernel)", unit: "us", veyyon: p(through, 0.5), floor: null, jupyter: null },
      { figure, measure: "p99, warm cell in-process (EvalTool.run)", unit: "us", veyyon: p(inProcess, 0.99), floor: null, jupyter: null },
      { figure, measure: "p99, warm cell through the cluster", unit: "us", veyyon: p(through, 0.99), floor: null, jupyter: null },
      { figure, measure: `fail-over after kill -9, median of ${trials} (shard lock expiry ${LOCK_EXPIRATION_MS} ms)`, unit: "ms", veyyon: p(killed, 0.5), floor: null, jupyter: null },
      { figure, measure: `hand-off after SIGTERM (idle session): signal to the runner's exit and the next cell answered elsewhere, median of ${trials}`, unit: "ms", veyyon: p(terminated, 0.5), floor: null, jupyter: null }
    ]
    return {
      id: "cluster",
      title: `the cluster: a warm \`${CODE}\` through client -> runner -> kernel vs in-process (${cells} cells after ${warmup} warm-up), and fail-over`,
      rows,
      details: { cells, warmup, trials, lockExpirationMs: LOCK_EXPIRATION_MS, killedMs: killed, terminatedMs: terminated },
      notes: [
        `two \`veyyon runner\` processes and the client on one machine over loopback, PostgreSQL local; fail-over is bounded below by the shard lock expiry (35 s by default, ${LOCK_EXPIRATION_MS / 1000} s here)`
      ]
    }
  } finally {
    await test.stop()
  }
}
