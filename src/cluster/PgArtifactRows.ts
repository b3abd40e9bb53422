/**
 * Artifacts in Postgres: one row per artifact (`veyyon_artifact`: session, id, size, the
 * writer's modification time) and its bytes in chunks of at most `ARTIFACT_CHUNK_BYTES`
 * (`veyyon_artifact_chunk`), so neither side ever holds more than one chunk in memory.
 *
 * An artifact is inserted with all its chunks in one transaction (readers see all of it or
 * none) and read in one repeatable-read transaction (a prune running meanwhile cannot tear
 * it). Local files are opened without following a symbolic link and must be regular files
 * of ours; fetched copies go to an exclusively created private temp file renamed into place.
 * Retention is the file store's (`idsToPrune`) applied to the rows of a session, plus an age
 * sweep over every session.
 */
import { Data, Duration, Effect } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import * as NodeFs from "node:fs"
import { EXCLUSIVE_CREATE, temporaryBeside } from "../services/storage/AtomicFile.ts"
import { type ArtifactFileInfo, type ArtifactRetention, idsToPrune } from "../services/output/ArtifactStore.ts"
import { ownFileProblem, PRIVATE_FILE_MODE } from "../services/storage/PrivateDir.ts"
import { ensureSchema } from "./PgSchema.ts"

/** The most bytes one chunk row holds (1 MiB). */
export const ARTIFACT_CHUNK_BYTES = 1024 * 1024

/** The longest a publish or a fetch of artifacts may take before it fails with a clear error (Postgres stuck or unreachable). */
export const ARTIFACT_TRANSFER_TIMEOUT = Duration.minutes(2)

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS veyyon_artifact (
    session_id text NOT NULL,
    id text NOT NULL,
    size bigint NOT NULL,
    mtime_ms float8 NOT NULL,
    PRIMARY KEY (session_id, id)
  )`,
  `CREATE INDEX IF NOT EXISTS veyyon_artifact_mtime ON veyyon_artifact (mtime_ms)`,
  `CREATE TABLE IF NOT EXISTS veyyon_artifact_chunk (
    session_id text NOT NULL,
    id text NOT NULL,
    seq integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session_id, id, seq),
    FOREIGN KEY (session_id, id) REFERENCES veyyon_artifact (session_id, id) ON DELETE CASCADE
  )`
]

/** Creates the artifact tables when they are missing. */
export const ensureArtifactTables: Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient> = ensureSchema(SCHEMA)

/** A local file could not be read or a fetched copy not written. */
export class LocalFileProblem extends Data.TaggedError("LocalFileProblem")<{ readonly reason: string }> {
  override get message(): string {
    return this.reason
  }
}

/** What inserting one artifact did. */
export type Inserted = "inserted" | "already-there" | { readonly tooLarge: number }

const openOwn = (file: string): Promise<NodeFs.promises.FileHandle> =>
  NodeFs.promises.open(file, NodeFs.constants.O_RDONLY | (NodeFs.constants.O_NOFOLLOW ?? 0)).then(async (handle) => {
    const problem = ownFileProblem(await handle.stat())
    if (problem === undefined) return handle
    await handle.close()
    throw new LocalFileProblem({ reason: problem })
  }, (error: NodeJS.ErrnoException) => {
    throw new LocalFileProblem({ reason: error.code === "ELOOP" ? "it is a symbolic link" : `${error.code ?? "Error"}: ${error.message}` })
  })

const localFailure = (error: unknown) =>
  error instanceof LocalFileProblem ? error : new LocalFileProblem({ reason: error instanceof Error ? error.message : String(error) })

/** Inserts the artifact file `file` as `id` of `sessionId`, unless that id is there already or the file is over `maxBytes`. */
export const insertArtifact = Effect.fnUntraced(function*(sessionId: string, id: string, file: string, maxBytes: number) {
  const sql = yield* SqlClient.SqlClient
  return yield* Effect.acquireUseRelease(
    Effect.tryPromise({ try: () => openOwn(file), catch: localFailure }),
    (handle) =>
      Effect.gen(function*() {
        const stats = yield* Effect.tryPromise({ try: () => handle.stat(), catch: localFailure })
        if (stats.size > maxBytes) return { tooLarge: stats.size } satisfies Inserted
        return yield* sql.withTransaction(Effect.gen(function*() {
          const added = yield* sql`INSERT INTO veyyon_artifact (session_id, id, size, mtime_ms) VALUES (${sessionId}, ${id}, ${stats.size}, ${stats.mtimeMs})
            ON CONFLICT (session_id, id) DO NOTHING RETURNING id`
          if (added.length === 0) return "already-there" as const
          const buffer = Buffer.allocUnsafe(ARTIFACT_CHUNK_BYTES)
          let total = 0
          for (let seq = 0;; seq++) {
            const { bytesRead } = yield* Effect.tryPromise({ try: () => handle.read(buffer, 0, buffer.length, total), catch: localFailure })
            if (bytesRead === 0) break
            total += bytesRead
            if (total > maxBytes) return yield* Effect.fail(new LocalFileProblem({ reason: `it grew past ${maxBytes} bytes while it was copied` }))
            yield* sql`INSERT INTO veyyon_artifact_chunk (session_id, id, seq, data) VALUES (${sessionId}, ${id}, ${seq}, ${new Uint8Array(buffer.subarray(0, bytesRead))})`
          }
          if (total !== stats.size) yield* sql`UPDATE veyyon_artifact SET size = ${total} WHERE session_id = ${sessionId} AND id = ${id}`
          return "inserted" as const
        }))
      }),
    (handle) => Effect.promise(() => handle.close().catch(() => undefined))
  )
})

/** The artifacts of a session in Postgres, as retention sees them. */
export const sessionRows = (sessionId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<ArtifactFileInfo>`SELECT id, size::float8 AS size, mtime_ms AS "mtimeMs" FROM veyyon_artifact WHERE session_id = ${sessionId}`)

/** Which of `ids` session `sessionId` already holds. */
export const existingIds = (sessionId: string, ids: ReadonlyArray<string>) =>
  ids.length === 0
    ? Effect.succeed(new Set<string>())
    : Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(
        sql<{ readonly id: string }>`SELECT id FROM veyyon_artifact WHERE session_id = ${sessionId} AND ${sql.in("id", ids)}`,
        (rows) => new Set(rows.map((row) => row.id))
      ))

/**
 * Copies artifact `id` of `sessionId` to the file `target` (a private temp file beside it,
 * renamed into place); false when Postgres has no such artifact.
 */
export const fetchArtifact = Effect.fnUntraced(function*(sessionId: string, id: string, target: string) {
  const sql = yield* SqlClient.SqlClient
  return yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`
    const rows = yield* sql<{ readonly size: number }>`SELECT size::float8 AS size FROM veyyon_artifact WHERE session_id = ${sessionId} AND id = ${id}`
    const size = rows[0]?.size
    if (size === undefined) return false
    const temporary = temporaryBeside(target)
    return yield* Effect.acquireUseRelease(
      Effect.tryPromise({ try: () => NodeFs.promises.open(temporary, EXCLUSIVE_CREATE, PRIVATE_FILE_MODE), catch: localFailure }),
      (handle) =>
        Effect.gen(function*() {
          let total = 0
          for (let seq = 0; total < size; seq++) {
            const chunk = yield* sql<{ readonly data: Uint8Array }>`SELECT data FROM veyyon_artifact_chunk WHERE session_id = ${sessionId} AND id = ${id} AND seq = ${seq}`
            const data = chunk[0]?.data
            if (data === undefined || data.length === 0) return yield* Effect.fail(new LocalFileProblem({ reason: `its chunk ${seq} is missing in the database` }))
            yield* Effect.tryPromise({ try: () => handle.write(data), catch: localFailure })
            total += data.length
          }
          if (total !== size) return yield* Effect.fail(new LocalFileProblem({ reason: `the database holds ${total} bytes of it, not ${size}` }))
          yield* Effect.tryPromise({ try: () => handle.close(), catch: localFailure })
          yield* Effect.tryPromise({ try: () => NodeFs.promises.rename(temporary, target), catch: localFailure })
          return true
        }),
      (handle) => Effect.promise(() => handle.close().catch(() => undefined).then(() => NodeFs.promises.rm(temporary, { force: true })))
    )
  }))
})

/** Applies `retention` to session `sessionId`'s artifacts in Postgres at `now`; the ids removed. */
export const pruneSessionRows = Effect.fnUntraced(function*(sessionId: string, retention: ArtifactRetention, now: number) {
  const sql = yield* SqlClient.SqlClient
  const doomed = idsToPrune(yield* sessionRows(sessionId), retention, now)
  if (doomed.length > 0) yield* sql`DELETE FROM veyyon_artifact WHERE session_id = ${sessionId} AND ${sql.in("id", doomed)}`
  return doomed
})

/** Removes every session's artifacts older than the age limit at `now`; how many went. */
export const sweepOldRows = (retention: ArtifactRetention, now: number) =>
  Number.isFinite(retention.maxAgeMs)
    ? Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(sql`DELETE FROM veyyon_artifact WHERE mtime_ms < ${now - retention.maxAgeMs} RETURNING id`, (rows) => rows.length))
    : Effect.succeed(0)
