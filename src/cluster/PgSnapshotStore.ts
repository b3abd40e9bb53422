/**
 * Session snapshots in the cluster's Postgres (`veyyon_snapshots`), so any runner can
 * restore any session. Only the session's current owner writes: a write lands only while
 * the ledger row names this runner incarnation as the owner at the generation it holds,
 * so an old owner finishing a cell during a hand-off cannot overwrite what the new owner
 * restored (or saved since). Snapshots are sealed with a key derived from the cluster
 * secret (a cluster without one keeps none). Rows last written longer ago than the
 * retention are removed when a runner starts.
 */
import { createHmac } from "node:crypto"
import { Duration, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import { SnapshotStore, SnapshotStoreError, type SnapshotStoreService } from "../services/snapshots/SnapshotStore.ts"
import { ensureSchema, sessionIdProblem, sqlProblem } from "./PgSchema.ts"
import { LEDGER_TABLE, SessionLedger } from "./SessionLedger.ts"

/** The snapshots' table. */
export const SNAPSHOT_TABLE = "veyyon_snapshots"

/** The longest a snapshot statement may take (a large payload on a slow link included). */
export const SNAPSHOT_CALL_TIMEOUT = Duration.minutes(2)

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS ${SNAPSHOT_TABLE} (
  session_id text NOT NULL,
  language text NOT NULL,
  meta text NOT NULL,
  mac text NOT NULL,
  digest text NOT NULL,
  payload bytea NOT NULL,
  generation bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (session_id, language)
)`
]

/** The key snapshots are sealed with on a cluster: derived from its secret, never the secret itself. */
export const snapshotKeyOf = (secret: string): Uint8Array => createHmac("sha256", secret).update("veyyon session snapshots v1").digest()

interface Row {
  readonly meta: string
  readonly mac: string
  readonly payload: Uint8Array
}

/** The store on the `SqlClient` and `SessionLedger` in context, sealing with `key`, removing rows older than `maxAgeMs` as it opens. */
export const makePgSnapshotStore = (
  key: Uint8Array,
  maxAgeMs: number
): Effect.Effect<SnapshotStoreService, SqlError.SqlError, SqlClient.SqlClient | SessionLedger> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ledger = yield* SessionLedger
    yield* ensureSchema(SCHEMA)
    yield* sql`DELETE FROM ${sql(SNAPSHOT_TABLE)} WHERE updated_at < now() - make_interval(secs => ${maxAgeMs / 1000})`
    const table = sql(SNAPSHOT_TABLE)
    const sessions = sql(LEDGER_TABLE)
    const me = ledger.incarnation

    const run = <A>(what: string, effect: Effect.Effect<A, SqlError.SqlError | SnapshotStoreError>) =>
      effect.pipe(
        Effect.timeoutOrElse({
          duration: SNAPSHOT_CALL_TIMEOUT,
          orElse: () => Effect.fail(new SnapshotStoreError({ reason: `${what}: the database did not answer within ${Duration.format(SNAPSHOT_CALL_TIMEOUT)}` }))
        }),
        Effect.mapError((error) => error._tag === "SnapshotStoreError" ? error : new SnapshotStoreError({ reason: `${what}: ${sqlProblem(error)}` }))
      )

    const checked = (sessionId: string) => {
      const problem = sessionIdProblem(sessionId)
      return problem === undefined ? Effect.void : Effect.fail(new SnapshotStoreError({ reason: problem }))
    }

    return {
      key,
      write: (sessionId, language, sealed, digest, payload) =>
        run("writing a snapshot", Effect.gen(function*() {
          yield* checked(sessionId)
          const generation = ledger.ownedGeneration(sessionId)
          if (generation === undefined) return yield* new SnapshotStoreError({ reason: "this runner does not own the session" })
          const written = payload === undefined
            ? yield* sql<{ readonly session_id: string }>`UPDATE ${table} SET meta = ${sealed.text}, mac = ${sealed.mac}, generation = ${generation}, updated_at = now()
                WHERE session_id = ${sessionId} AND language = ${language} AND digest = ${digest}
                  AND EXISTS (SELECT 1 FROM ${sessions} WHERE session_id = ${sessionId} AND owner = ${me} AND generation = ${generation})
                RETURNING session_id`
            : yield* sql<{ readonly session_id: string }>`INSERT INTO ${table} (session_id, language, meta, mac, digest, payload, generation, updated_at)
                SELECT ${sessionId}, ${language}, ${sealed.text}, ${sealed.mac}, ${digest}, ${payload}, ${generation}, now()
                WHERE EXISTS (SELECT 1 FROM ${sessions} WHERE session_id = ${sessionId} AND owner = ${me} AND generation = ${generation})
                ON CONFLICT (session_id, language) DO UPDATE SET meta = EXCLUDED.meta, mac = EXCLUDED.mac, digest = EXCLUDED.digest,
                  payload = EXCLUDED.payload, generation = EXCLUDED.generation, updated_at = now()
                RETURNING session_id`
          if (written.length === 0) {
            return yield* new SnapshotStoreError({ reason: "the session moved to another runner (or its snapshot is gone) before this one was written" })
          }
        })),
      read: (sessionId, language) =>
        run("reading a snapshot", Effect.gen(function*() {
          yield* checked(sessionId)
          const rows = yield* sql<Row>`SELECT meta, mac, payload FROM ${table} WHERE session_id = ${sessionId} AND language = ${language}`
          const row = rows[0]
          return row === undefined ? undefined : { sealed: { text: row.meta, mac: row.mac }, payload: row.payload }
        })),
      remove: (sessionId, language) =>
        run("removing a snapshot", Effect.gen(function*() {
          yield* checked(sessionId)
          yield* language === undefined
            ? sql`DELETE FROM ${table} WHERE session_id = ${sessionId}`
            : sql`DELETE FROM ${table} WHERE session_id = ${sessionId} AND language = ${language}`
        })),
      list: run(
        "listing snapshots",
        Effect.map(
          sql<{ readonly meta: string; readonly mac: string; readonly updated: number }>`SELECT meta, mac, extract(epoch from updated_at) * 1000 AS updated FROM ${table}`,
          (rows) => rows.map((row) => ({ sealed: { text: row.meta, mac: row.mac }, modifiedAt: Number(row.updated) }))
        )
      )
    } satisfies SnapshotStoreService
  })

/** The store as a layer, sealing with the cluster secret's derived key. */
export const pgSnapshotStoreLayer = (
  secret: string,
  maxAgeMs: number
): Layer.Layer<SnapshotStore, SqlError.SqlError, SqlClient.SqlClient | SessionLedger> =>
  Layer.effect(SnapshotStore, makePgSnapshotStore(snapshotKeyOf(secret), maxAgeMs))
