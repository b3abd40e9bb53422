/**
 * A cluster on loopback for multi-process tests: a private PostgreSQL, a random cluster
 * secret (in a 0600 file the runners read), `veyyon runner`
 * processes as users start them (`bin/veyyon.mjs`), a client layer in the test process,
 * and the session ledger read straight from the database. `stop` kills every runner and
 * the database and removes every directory, also after a failure.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, ManagedRuntime } from "effect"
import { PgClient } from "@effect/sql-pg"
import { Redacted } from "effect"
import { evalClusterLayer, type EvalClusterServices } from "../../src/cluster/EvalClusterLayer.ts"
import { DEFAULT_SHARDS, MIN_LOCK_OPERATION_MS } from "../../src/cluster/ClusterSettings.ts"
import { LEDGER_TABLE } from "../../src/cluster/SessionLedger.ts"
import { childEnv, cliEntry } from "../cli/support.ts"
import { freePort, startPostgres, type TestPostgres } from "../support/postgres.ts"

/** The shard lock expiry the test cluster runs with: the least the settings allow (each lock operation gets a third). */
export const LOCK_EXPIRATION_MS = 3 * MIN_LOCK_OPERATION_MS

/** One runner process. */
export interface TestRunner {
  readonly address: string
  readonly child: ChildProcess
  readonly log: () => string
  /** Resolves with the exit code or signal once the process has exited. */
  readonly exited: Promise<number | string>
}

/** A cluster under test. */
export interface TestCluster {
  readonly pg: TestPostgres
  readonly dir: string
  /** The cluster secret (also in the file the runners read, `VEYYON_CLUSTER_SECRET_FILE` of `env`). */
  readonly secret: string
  /** The environment runners start with. */
  readonly env: Record<string, string>
  readonly runners: Array<TestRunner>
  readonly client: ManagedRuntime.ManagedRuntime<EvalClusterServices, unknown>
  /** Starts one more runner (with `env` on top of the cluster's, on `port` or a free one) and waits until it serves. */
  readonly addRunner: (env?: Readonly<Record<string, string>>, port?: number) => Promise<TestRunner>
  /** The runner address the ledger names as each session's owner (null when released). */
  readonly owners: () => Promise<Map<string, string | null>>
  /** Resolves once the live runners hold every shard, each some. */
  readonly settled: () => Promise<void>
  /** Resolves once the session's snapshot of `language` in Postgres is as of cell `cell` or later (snapshots are saved off the answer's path). */
  readonly snapshotSaved: (sessionId: string, cell: number, language?: string) => Promise<void>
  readonly stop: () => Promise<void>
}

const waitForLine = (runner: { readonly log: () => string; readonly exited: Promise<number | string> }, pattern: RegExp) =>
  new Promise<void>((resolve, reject) => {
    let done = false
    const timer = setInterval(() => {
      if (pattern.test(runner.log())) {
        done = true
        clearInterval(timer)
        resolve()
      }
    }, 50)
    runner.exited.then((code) => {
      if (done) return
      clearInterval(timer)
      reject(new Error(`the runner exited (${code}) before serving:\n${runner.log()}`))
    })
  })

/** How a test cluster runs. */
export interface TestClusterOptions {
  /** Runners and client without the cluster secret (`--insecure-no-auth`), as a control for the attacks the secret stops. */
  readonly insecure?: boolean
  /** More environment for the runners (`VEYYON_RUNNER_ALLOWED_ROOTS`, say). */
  readonly runnerEnv?: Readonly<Record<string, string>>
  /** Receives every chunk a runner writes to stderr (the kept `log` is only its tail). */
  readonly onRunnerLog?: (address: string, chunk: string) => void
}

/** Starts PostgreSQL, `count` runners and a client; always call `stop`. */
export const startCluster = async (count: number, options: TestClusterOptions = {}): Promise<TestCluster> => {
  const pg = await startPostgres()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-cluster-"))
  fs.chmodSync(dir, 0o700)
  const artifactsDir = path.join(dir, "sessions")
  fs.mkdirSync(artifactsDir, { mode: 0o700 })
  const secret = randomBytes(32).toString("hex")
  const secretFile = path.join(dir, "cluster-secret")
  fs.writeFileSync(secretFile, `${secret}\n`, { mode: 0o600, flag: "wx" })
  const runners: Array<TestRunner> = []
  const env = childEnv(artifactsDir, {
    VEYYON_CLUSTER_POSTGRES_URL: pg.url,
    ...(options.insecure === true ? {} : { VEYYON_CLUSTER_SECRET_FILE: secretFile }),
    VEYYON_RUNNER_WORKSPACE: path.join(dir, "workspaces"),
    VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS: String(LOCK_EXPIRATION_MS),
    VEYYON_SANDBOX: "off",
    ...options.runnerEnv
  })
  const addRunner = async (more: Readonly<Record<string, string>> = {}, chosen?: number): Promise<TestRunner> => {
    const port = chosen ?? await freePort()
    const args = [...cliEntry.args, "runner", "--listen", `127.0.0.1:${port}`, ...(options.insecure === true ? ["--insecure-no-auth"] : [])]
    const child = spawn(cliEntry.command, args, { env: { ...env, ...more }, stdio: ["ignore", "ignore", "pipe"] })
    let log = ""
    child.stderr?.on("data", (chunk: Buffer) => {
      const text = chunk.toString("utf8")
      log = (log + text).slice(-20_000)
      options.onRunnerLog?.(`127.0.0.1:${port}`, text)
    })
    const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "?")))
    const runner = { address: `127.0.0.1:${port}`, child, log: () => log, exited }
    runners.push(runner)
    await waitForLine(runner, /serving sessions/)
    return runner
  }
  const sql = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(pg.url) }))
  const client = ManagedRuntime.make(evalClusterLayer({
    cluster: { postgresUrl: pg.url, ...(options.insecure === true ? { insecureNoAuth: true } : { secret }), shardLockExpirationMs: LOCK_EXPIRATION_MS },
    settings: { artifactsDir },
    env: false
  }))
  const stop = async () => {
    await client.dispose().catch(() => undefined)
    await sql.dispose().catch(() => undefined)
    for (const runner of runners) runner.child.kill("SIGKILL")
    await Promise.all(runners.map((runner) => runner.exited))
    await pg.stop()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  /**
   * Waits until the live runners hold every shard between them, each some (their shard
   * locks are Postgres advisory locks, one reserved connection per runner): then no
   * rebalance is under way to move a session between two cells of a test.
   */
  const settled = async () => {
    const live = () => runners.filter((runner) => runner.child.exitCode === null && runner.child.signalCode === null).length
    const deadline = Date.now() + 120_000
    while (Date.now() < deadline) {
      const holders = await sql.runPromise(Effect.gen(function*() {
        const db = yield* PgClient.PgClient
        return yield* db<{ pid: number; locks: string }>`SELECT pid, count(*) AS locks FROM pg_locks WHERE locktype = 'advisory' AND granted GROUP BY pid`
      }))
      const total = holders.reduce((sum, holder) => sum + Number(holder.locks), 0)
      if (holders.length === live() && total === DEFAULT_SHARDS) return
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
    throw new Error("the cluster's shards did not settle on its runners within 120 s")
  }
  try {
    for (let index = 0; index < count; index++) await addRunner()
    await settled()
  } catch (error) {
    await stop()
    throw error
  }
  const owners = () =>
    sql.runPromise(Effect.gen(function*() {
      const db = yield* PgClient.PgClient
      const rows = yield* db<{ session_id: string; owner_address: string | null }>`SELECT session_id, owner_address FROM ${db(LEDGER_TABLE)}`
      return new Map(rows.map((row) => [row.session_id, row.owner_address]))
    }))
  const snapshotSaved = async (sessionId: string, cell: number, language = "py") => {
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      const metas = await sql.runPromise(Effect.gen(function*() {
        const db = yield* PgClient.PgClient
        return yield* db<{ meta: string }>`SELECT meta FROM veyyon_snapshots WHERE session_id = ${sessionId} AND language = ${language}`
      })).catch(() => [])
      if (metas.some((row) => (JSON.parse(row.meta) as { asOfCell: number }).asOfCell >= cell)) return
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    throw new Error(`no snapshot of session ${sessionId} as of cell ${cell} in Postgres within 60 s`)
  }
  return { pg, dir, secret, env, runners, client, addRunner, owners, settled, snapshotSaved, stop }
}
