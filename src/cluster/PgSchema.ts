/**
 * The cluster's tables in Postgres, all named `veyyon_*`: each store creates its own when
 * its layer starts, idempotently (`CREATE ... IF NOT EXISTS`) and under one transaction-
 * scoped advisory lock, so runners and clients starting at once against an empty database
 * do not race each other's `CREATE TABLE`.
 */
import { Effect } from "effect"
import { SqlClient, type SqlError } from "effect/sql"

/** The longest session id (UTF-8 bytes) the cluster's stores keep data for; Postgres indexes cap a key's size. */
export const SESSION_ID_MAX = 1024

/** Why the cluster's stores cannot key data by `sessionId`, or undefined when they can. */
export const sessionIdProblem = (sessionId: string): string | undefined =>
  Buffer.byteLength(sessionId, "utf8") <= SESSION_ID_MAX
    ? undefined
    : `the session id is longer than ${SESSION_ID_MAX} bytes; the cluster's stores keep data only for shorter ones`

/** The advisory lock key every schema change of ours holds (an arbitrary constant). */
export const SCHEMA_LOCK_KEY = 7_305_911_015

/** Runs `statements` (DDL, each idempotent) in one transaction holding the schema lock. */
export const ensureSchema = (statements: ReadonlyArray<string>): Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(Effect.gen(function*() {
      yield* sql`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK_KEY})`
      for (const statement of statements) yield* sql.unsafe(statement)
    })))

/** What a database failure says, for an error a cell or a caller reads. */
export const sqlProblem = (error: SqlError.SqlError): string => {
  const cause = error.reason.cause as { readonly message?: unknown } | undefined
  const detail = typeof cause?.message === "string" ? cause.message : undefined
  return detail === undefined || detail === error.message ? error.message : `${error.message}: ${detail}`
}
