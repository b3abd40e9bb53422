/**
 * The kv store of a cluster, in Postgres: one row per key (`veyyon_kv`) and one running
 * total per session (`veyyon_kv_usage`), so every runner and client reads and writes the
 * same store and a session's kv outlives the runner that wrote it.
 *
 * Same API and limits as the file store (`src/services/storage/KvStore.ts`): keys 1-256 code
 * points without `/`, `\` or NUL, one value's JSON at most 256 KiB, at most 4 MiB per
 * session counted as the file store counts it (the bytes of `{"key":...,"value":...}`).
 * A write is one transaction that first locks the session's usage row, so writers of one
 * session are serialized across processes and hosts, the limit holds under any number of
 * them, and each key is replaced or removed atomically. The space is the session id.
 *
 * Kernels read through the host: the store's `kernelEnv` sets `VEYYON_KV_READS=host`, so the
 * preludes send `get`/`list` over the `kv` bridge method instead of reading local files.
 * kv is kept until it is deleted (as the file store keeps a session's kv directory).
 *
 * A kernel waits for these calls with its cell timeout paused, so each is bounded: a write
 * waits at most `KV_LOCK_TIMEOUT` for the session's lock (Postgres' `lock_timeout`) and any
 * operation fails after `KV_OPERATION_TIMEOUT` with a `KvWriteFailed`/`KvReadFailed` that
 * says so, instead of holding the cell while the database is unreachable. Within that
 * bound an operation that finds the database unreachable (a restart: refused or dropped
 * connections) is tried again, as the session ledger's calls are; each is idempotent.
 */
import { Duration, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import {
  answerKvCall,
  checkedKvKey,
  compareCodePoints,
  KV_READS_ENV,
  KV_STORE_MAX,
  kvEntryBytes,
  KvRefused,
  KvStore,
  type KvStoreService,
  kvStoreFull,
  validKvValue
} from "../services/storage/KvStore.ts"
import { waitOutOutage } from "./DatabaseOutage.ts"
import { ensureSchema, sessionIdProblem, sqlProblem } from "./PgSchema.ts"

/** The longest a write waits for another writer of the session to finish. */
export const KV_LOCK_TIMEOUT = Duration.seconds(20)
/** The longest any kv operation may take before it fails. */
export const KV_OPERATION_TIMEOUT = Duration.seconds(30)

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS veyyon_kv (
    session_id text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    bytes integer NOT NULL,
    PRIMARY KEY (session_id, key)
  )`,
  `CREATE TABLE IF NOT EXISTS veyyon_kv_usage (
    session_id text PRIMARY KEY,
    bytes bigint NOT NULL
  )`
]

const failed = (name: "KvWriteFailed" | "KvReadFailed") => (error: SqlError.SqlError) =>
  new KvRefused({ name, reason: `the cluster's kv store (Postgres) failed: ${sqlProblem(error)}` })

/** How long the store waits; the defaults are `KV_LOCK_TIMEOUT` and `KV_OPERATION_TIMEOUT`. */
export interface PgKvStoreOptions {
  readonly lockTimeout?: Duration.Input
  readonly operationTimeout?: Duration.Input
}

const checkedSpace = (sessionId: string): Effect.Effect<string, KvRefused> => {
  const problem = sessionIdProblem(sessionId)
  return problem === undefined ? Effect.succeed(sessionId) : Effect.fail(new KvRefused({ name: "KvInvalid", reason: problem }))
}

/** Builds the store on the `SqlClient` in context, creating its tables when they are missing. */
export const makePgKvStore: (options?: PgKvStoreOptions) => Effect.Effect<KvStoreService, SqlError.SqlError, SqlClient.SqlClient> = Effect.fnUntraced(function*(options: PgKvStoreOptions = {}) {
  const sql = yield* SqlClient.SqlClient
  yield* ensureSchema(SCHEMA)
  const lockTimeout = `${Duration.toMillis(Duration.fromInputUnsafe(options.lockTimeout ?? KV_LOCK_TIMEOUT))}ms`
  const operationTimeout = Duration.fromInputUnsafe(options.operationTimeout ?? KV_OPERATION_TIMEOUT)

  /** `query`, tried again while the database cannot be reached, within the operation's bound. */
  const ridden = <A, E = never>(query: Effect.Effect<A, E | SqlError.SqlError>) => waitOutOutage(query, "the cluster's kv store (Postgres)", operationTimeout)

  const bounded = (name: "KvWriteFailed" | "KvReadFailed") => <A>(effect: Effect.Effect<A, KvRefused>): Effect.Effect<A, KvRefused> =>
    Effect.timeoutOrElse(effect, {
      duration: operationTimeout,
      orElse: () => Effect.fail(new KvRefused({ name, reason: `the cluster's kv store (Postgres) did not answer within ${Duration.format(operationTimeout)}` }))
    })

  /** Locks the session's usage row (creating it) and answers its bytes; only inside a transaction. */
  const lockUsage = Effect.fnUntraced(function*(space: string) {
    yield* sql`SELECT set_config('lock_timeout', ${lockTimeout}, true)`
    yield* sql`INSERT INTO veyyon_kv_usage (session_id, bytes) VALUES (${space}, 0) ON CONFLICT (session_id) DO NOTHING`
    const rows = yield* sql<{ readonly bytes: number }>`SELECT bytes::float8 AS bytes FROM veyyon_kv_usage WHERE session_id = ${space} FOR UPDATE`
    return rows[0]?.bytes ?? 0
  })

  const storedBytes = (space: string, key: string) =>
    Effect.map(
      sql<{ readonly bytes: number }>`SELECT bytes FROM veyyon_kv WHERE session_id = ${space} AND key = ${key}`,
      (rows) => rows[0]?.bytes ?? 0
    )

  const set = Effect.fnUntraced(function*(sessionId: string, key: string, valueJson: string) {
    const space = yield* checkedSpace(sessionId)
    const valid = yield* checkedKvKey(key)
    const value = validKvValue(valid, valueJson)
    if (value instanceof KvRefused) return yield* value
    const bytes = kvEntryBytes(valid, value).length
    yield* ridden(sql.withTransaction(Effect.gen(function*() {
      const used = yield* lockUsage(space)
      const old = yield* storedBytes(space, valid)
      if (used - old + bytes > KV_STORE_MAX) return yield* kvStoreFull(used - old, bytes)
      yield* sql`INSERT INTO veyyon_kv (session_id, key, value, bytes) VALUES (${space}, ${valid}, ${value}, ${bytes})
        ON CONFLICT (session_id, key) DO UPDATE SET value = excluded.value, bytes = excluded.bytes`
      yield* sql`UPDATE veyyon_kv_usage SET bytes = bytes + ${bytes - old} WHERE session_id = ${space}`
    }))).pipe(Effect.catchTag("SqlError", (error) => Effect.fail(failed("KvWriteFailed")(error))))
  }, bounded("KvWriteFailed"))

  const remove = Effect.fnUntraced(function*(sessionId: string, key: string) {
    const space = yield* checkedSpace(sessionId)
    const valid = yield* checkedKvKey(key)
    return yield* ridden(sql.withTransaction(Effect.gen(function*() {
      yield* lockUsage(space)
      const removed = yield* sql<{ readonly bytes: number }>`DELETE FROM veyyon_kv WHERE session_id = ${space} AND key = ${valid} RETURNING bytes`
      const bytes = removed[0]?.bytes
      if (bytes === undefined) return false
      yield* sql`UPDATE veyyon_kv_usage SET bytes = bytes - ${bytes} WHERE session_id = ${space}`
      return true
    }))).pipe(Effect.mapError(failed("KvWriteFailed")))
  }, bounded("KvWriteFailed"))

  const get = Effect.fnUntraced(function*(sessionId: string, key: string) {
    const space = yield* checkedSpace(sessionId)
    const valid = yield* checkedKvKey(key)
    const rows = yield* ridden(sql<{ readonly value: string }>`SELECT value FROM veyyon_kv WHERE session_id = ${space} AND key = ${valid}`).pipe(
      Effect.mapError(failed("KvReadFailed"))
    )
    return rows[0]?.value
  }, bounded("KvReadFailed"))

  const list = Effect.fnUntraced(function*(sessionId: string) {
    const space = yield* checkedSpace(sessionId)
    const rows = yield* ridden(sql<{ readonly key: string }>`SELECT key FROM veyyon_kv WHERE session_id = ${space}`).pipe(
      Effect.mapError(failed("KvReadFailed"))
    )
    return rows.map((row) => row.key).sort(compareCodePoints)
  }, bounded("KvReadFailed"))

  const size = Effect.fnUntraced(function*(sessionId: string) {
    const space = yield* checkedSpace(sessionId)
    const rows = yield* ridden(sql<{ readonly bytes: number }>`SELECT bytes::float8 AS bytes FROM veyyon_kv_usage WHERE session_id = ${space}`).pipe(
      Effect.mapError(failed("KvReadFailed"))
    )
    return rows[0]?.bytes ?? 0
  }, bounded("KvReadFailed"))

  const operations = { set, get, list, delete: remove }
  const service: KvStoreService = {
    spaceOf: (sessionId) => sessionId,
    kernelEnv: { [KV_READS_ENV]: "host" },
    ...operations,
    size,
    answer: (space, params) => answerKvCall(operations, space, params)
  }
  return service
})

/** The `KvStore` in Postgres with `options`, on the `SqlClient` in context; creates its tables as it starts. */
export const pgKvStoreLayer = (options: PgKvStoreOptions = {}): Layer.Layer<KvStore, SqlError.SqlError, SqlClient.SqlClient> =>
  Layer.effect(KvStore, makePgKvStore(options))

/** The `KvStore` in Postgres, on the `SqlClient` in context (e.g. `PgClient.layer`); creates its tables as it starts. */
export const PgKvStoreLive: Layer.Layer<KvStore, SqlError.SqlError, SqlClient.SqlClient> = pgKvStoreLayer()
