/**
 * Runners started together on a fresh database: three `veyyon runner` processes started at
 * the same moment, five rounds, each round on a new empty database of one private
 * PostgreSQL. Every runner must come up (none exits on a race creating the cluster's or our
 * own tables), the three must share the shards, and cells must run through a client.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { Effect, Exit, ManagedRuntime, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DEFAULT_SHARDS } from "../../src/cluster/ClusterSettings.ts"
import { ensureArtifactTables } from "../../src/cluster/PgArtifactRows.ts"
import { evalClusterLayer } from "../../src/cluster/EvalClusterLayer.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { childEnv, cliEntry } from "../cli/support.ts"
import { freePort, postgresSkipReason, startPostgres, type TestPostgres } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { LOCK_EXPIRATION_MS } from "./support.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()
if (skipReason !== undefined) console.log(`skipping the runners-started-together test: ${skipReason}`)

const ROUNDS = 5
const RUNNERS = 3

interface Started {
  readonly child: ChildProcess
  readonly log: () => string
  readonly exited: Promise<number | string>
}

const databaseUrl = (serverUrl: string, database: string): string => {
  const url = new URL(serverUrl)
  url.pathname = `/${database}`
  return url.toString()
}

describe.skipIf(skipReason !== undefined)("runners started together", () => {
  let pg: TestPostgres | undefined
  let dir: string
  let admin: ManagedRuntime.ManagedRuntime<PgClient.PgClient, unknown>
  const started: Array<Started> = []

  beforeAll(async () => {
    pg = await startPostgres()
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-together-"))
    fs.chmodSync(dir, 0o700)
    admin = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(pg.url) }))
  }, 180_000)

  afterAll(async () => {
    for (const runner of started) runner.child.kill("SIGKILL")
    await Promise.all(started.map((runner) => runner.exited))
    await admin?.dispose()
    await pg?.stop()
    if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  const sql = <A, E>(effect: (db: PgClient.PgClient) => Effect.Effect<A, E>): Promise<A> =>
    admin.runPromise(Effect.flatMap(PgClient.PgClient, effect))

  it("our tables are created by many connections at once on a fresh database without a clash, 5 rounds", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const database = `schema_${round}`
      await sql((db) => db.unsafe(`CREATE DATABASE ${database}`))
      const clients = Array.from({ length: 8 }, () => ManagedRuntime.make(PgClient.layer({ url: Redacted.make(databaseUrl(pg!.url, database)), maxConnections: 1 })))
      try {
        await Promise.all(clients.map((client) => client.runPromise(Effect.asVoid(PgClient.PgClient))))
        const results = await Promise.all(clients.map((client) => client.runPromiseExit(ensureArtifactTables)))
        for (const result of results) expect(Exit.isSuccess(result), String(Exit.isFailure(result) ? result.cause : "")).toBe(true)
      } finally {
        await Promise.all(clients.map((client) => client.dispose()))
      }
    }
  }, 120_000)

  it(`${RUNNERS} runners started at once on a fresh database all come up and serve, ${ROUNDS} rounds`, async () => {
    const secret = randomBytes(32).toString("hex")
    const secretFile = path.join(dir, "cluster-secret")
    fs.writeFileSync(secretFile, `${secret}\n`, { mode: 0o600, flag: "wx" })
    for (let round = 0; round < ROUNDS; round++) {
      const database = `together_${round}`
      await sql((db) => db.unsafe(`CREATE DATABASE ${database}`))
      const url = databaseUrl(pg!.url, database)
      const artifactsDir = path.join(dir, `artifacts-${round}`)
      fs.mkdirSync(artifactsDir, { mode: 0o700 })
      const env = childEnv(artifactsDir, {
        VEYYON_CLUSTER_POSTGRES_URL: url,
        VEYYON_CLUSTER_SECRET_FILE: secretFile,
        VEYYON_RUNNER_WORKSPACE: path.join(dir, `workspaces-${round}`),
        VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS: String(LOCK_EXPIRATION_MS),
        VEYYON_SANDBOX: "off"
      })
      const ports = await Promise.all(Array.from({ length: RUNNERS }, () => freePort()))
      const runners = ports.map((port): Started => {
        const child = spawn(cliEntry.command, [...cliEntry.args, "runner", "--listen", `127.0.0.1:${port}`], { env, stdio: ["ignore", "ignore", "pipe"] })
        let log = ""
        child.stderr?.on("data", (chunk: Buffer) => (log = (log + chunk.toString("utf8")).slice(-20_000)))
        const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "?")))
        const runner = { child, log: () => log, exited }
        started.push(runner)
        return runner
      })
      const deadline = Date.now() + 120_000
      for (;;) {
        for (const [index, runner] of runners.entries()) {
          if (runner.child.exitCode !== null || runner.child.signalCode !== null) {
            throw new Error(`round ${round}: runner ${index} exited (${runner.child.exitCode ?? runner.child.signalCode}):\n${runner.log()}`)
          }
        }
        const serving = runners.filter((runner) => /serving sessions/.test(runner.log())).length
        const holders: ReadonlyArray<{ pid: number; locks: string }> = await sql((db) =>
          db<{ pid: number; locks: string }>`SELECT l.pid, count(*) AS locks FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND l.granted AND d.datname = ${database} GROUP BY l.pid`
        )
        const total = holders.reduce((sum, holder) => sum + Number(holder.locks), 0)
        if (serving === RUNNERS && holders.length === RUNNERS && total === DEFAULT_SHARDS) break
        if (Date.now() > deadline) throw new Error(`round ${round}: the runners did not all serve within 120 s (${serving} serving, ${holders.length} holding ${total} shards)`)
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
      const client = ManagedRuntime.make(evalClusterLayer({
        cluster: { postgresUrl: url, secret, shardLockExpirationMs: LOCK_EXPIRATION_MS },
        settings: { artifactsDir },
        env: false
      }))
      try {
        const results = await Promise.all(Array.from({ length: 6 }, (_, index) =>
          client.runPromiseExit(Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code: `print(${index} * 7)` }, { sessionId: `together-${round}-${index}`, cwd: dir })))
        ))
        results.forEach((result, index) => {
          if (!Exit.isSuccess(result)) throw new Error(`round ${round}: a cell failed: ${String(result.cause)}`)
          expect(result.value.text.trim()).toBe(String(index * 7))
        })
      } finally {
        await client.dispose()
      }
      for (const runner of runners) {
        expect(runner.log()).not.toMatch(/internal error|duplicate key/i)
        runner.child.kill("SIGKILL")
      }
      await Promise.all(runners.map((runner) => runner.exited))
    }
  }, 600_000)
})
