/**
 * The cluster's warm cell beside the in-process one, rounds alternated, with the parts
 * between them timed in the same run: a bare Postgres round trip (`SELECT 1`), and the
 * session ledger's two steps per cell (`beginExecute`, `finishExecute`) driven from this
 * process against the cluster's own database, as a runner makes them. Two `veyyon runner`
 * processes and a PostgreSQL on loopback; the client and the in-process tool are the built
 * package (`npm run build` first). With `CLUSTERWARM_PROFILE=dir` the runners write a CPU
 * profile each into `dir` (`node --cpu-prof`) when the script stops them. With
 * `CLUSTERWARM_GAP_MS=n` each call starts n ms after the previous answer, as an agent's
 * calls come (the answer's latency alone, not the work a runner does after it);
 * `CLUSTERWARM_CODE` replaces the cell (`x = 1 + 1`).
 * `node --import tsx bench/clusterwarm.ts [rounds] [cells]`
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { evalClusterLayer } from "../dist/cluster/EvalClusterLayer.js"
import { SessionLedger } from "../dist/cluster/SessionLedger.js"
import { EvalTool } from "../dist/services/tool/EvalTool.js"
import { LOCK_EXPIRATION_MS, startCluster } from "../test/cluster/support.ts"
import { postgresSkipReason } from "../test/support/postgres.ts"
import { benchInterpreter } from "./python.ts"
import { quantile } from "./stats.ts"
import { makeVeyyon } from "./veyyon.ts"

const CODE = process.env.CLUSTERWARM_CODE ?? "x = 1 + 1"
const rounds = Number(process.argv[2] ?? 3)
const cells = Number(process.argv[3] ?? 500)
const warmup = Number(process.env.CLUSTERWARM_WARMUP ?? 1000)
const profileDir = process.env.CLUSTERWARM_PROFILE
const gapMs = Number(process.env.CLUSTERWARM_GAP_MS ?? 0)

const timed = async (once: () => Promise<unknown>, count: number): Promise<Array<number>> => {
  const samples: Array<number> = []
  for (let i = 0; i < count; i++) {
    if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs))
    const start = performance.now()
    await once()
    samples.push((performance.now() - start) * 1000)
  }
  return samples
}

const p50 = (samples: ReadonlyArray<number>) => Math.round(quantile(samples, 0.5))

const main = async () => {
  const skip = postgresSkipReason()
  if (skip !== undefined) throw new Error(`needs PostgreSQL: ${skip}`)
  const python = benchInterpreter()
  if (python === undefined) throw new Error("no python3 on PATH")
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-clusterwarm-"))
  fs.chmodSync(scratch, 0o700)
  if (profileDir !== undefined) fs.mkdirSync(profileDir, { recursive: true })
  const cluster = await startCluster(2, profileDir === undefined ? {} : { runnerEnv: { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${path.resolve(profileDir)}` } })
  const local = makeVeyyon(python.executable, path.join(scratch, "artifacts"))
  const client = ManagedRuntime.make(evalClusterLayer({
    cluster: { postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS },
    settings: { artifactsDir: path.join(scratch, "client") },
    env: false
  }))
  const pg = Layer.fresh(PgClient.layer({ url: Redacted.make(cluster.pg.url) }))
  const db = ManagedRuntime.make(Layer.provideMerge(SessionLedger.layer("bench-incarnation", "127.0.0.1:1"), pg))
  try {
    const inProcess = () => local.runPromise(EvalTool.use((tool) => tool.run({ language: "py", code: CODE }, { sessionId: "warm-local", cwd: scratch })))
    const through = () => client.runPromise(EvalTool.use((tool) => tool.run({ language: "py", code: CODE }, { sessionId: "warm-cluster", cwd: scratch })))
    const select = () => db.runPromise(PgClient.PgClient.use((sql) => sql`SELECT 1`))
    let call = 0
    const ledgerCell = () =>
      db.runPromise(SessionLedger.use((ledger) => {
        const callId = `bench-${call++}`
        return Effect.andThen(ledger.beginExecute("warm-ledger", "py", callId), ledger.finishExecute("warm-ledger", "py", callId, null))
      }))
    for (let i = 0; i < warmup; i++) {
      await inProcess()
      await through()
      await select()
      await ledgerCell()
    }
    console.log(`load ${os.loadavg().map((value) => value.toFixed(2)).join(" ")}; ${cells} cells per block, p50 in us`)
    for (let round = 0; round < rounds; round++) {
      const a = p50(await timed(inProcess, cells))
      const b = p50(await timed(through, cells))
      const c = p50(await timed(select, cells))
      const d = p50(await timed(ledgerCell, cells))
      console.log(`round ${round + 1}: in-process ${a}, cluster ${b} (+${b - a}), SELECT 1 ${c}, ledger begin+finish ${d}`)
    }
    console.log(`load ${os.loadavg().map((value) => value.toFixed(2)).join(" ")}`)
  } finally {
    await client.dispose().catch(() => undefined)
    await db.dispose().catch(() => undefined)
    await local.dispose().catch(() => undefined)
    if (profileDir !== undefined) {
      for (const runner of cluster.runners) runner.child.kill("SIGTERM")
      await Promise.all(cluster.runners.map((runner) => runner.exited))
    }
    await cluster.stop()
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

await main()
