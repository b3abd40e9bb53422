/**
 * An `ArtifactStore` whose reads also come from the cluster's Postgres: for the client (MCP
 * `resources/read`, the CLI) and for runners, so `artifact://<id>` published by any runner
 * (`ArtifactPublisher`) resolves here too.
 *
 * Everything stays a local private store (`artifactsDir`, as today): new artifacts are
 * written there. A session's `list` is its local artifacts and those in Postgres; a read
 * or `resolve` of an id missing locally copies it from Postgres into the local session
 * directory first (a private temp file, created exclusively, renamed into place), so later
 * reads are local and `resolve` can answer a path. Retention applies to the local copies as
 * today; `prune` applies it to the session's rows in Postgres too, and opening the layer
 * removes every session's artifacts in Postgres past the age limit.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Clock, Duration, Effect, Layer } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import {
  type ArtifactDirUnavailable,
  type ArtifactEntry,
  ArtifactNotFound,
  ArtifactReadFailed,
  ArtifactStore,
  type ArtifactStoreService,
  artifactUri,
  openArtifactRoot,
  type ArtifactRetention,
  retentionOf
} from "../services/output/ArtifactStore.ts"
import { Settings } from "../services/config/Settings.ts"
import { ARTIFACT_TRANSFER_TIMEOUT, ensureArtifactTables, fetchArtifact, LocalFileProblem, pruneSessionRows, sessionRows, sweepOldRows } from "./PgArtifactRows.ts"
import { sqlProblem } from "./PgSchema.ts"

/** `local` (one session's private store) with reads falling back to that session's artifacts in Postgres. */
const sessionStore = (
  sql: SqlClient.SqlClient,
  local: ArtifactStoreService,
  sessionId: string,
  retention: ArtifactRetention
): ArtifactStoreService => {
  const withSql = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) => Effect.provideService(effect, SqlClient.SqlClient, sql)

  /** Copies `id` from Postgres into the local directory; fails with ArtifactNotFound when Postgres has none. */
  const fetch = Effect.fnUntraced(function*(id: string) {
    const target = yield* local.path(id)
    const found = yield* withSql(fetchArtifact(sessionId, id, target)).pipe(
      Effect.timeoutOrElse({
        duration: ARTIFACT_TRANSFER_TIMEOUT,
        orElse: () => Effect.fail(new LocalFileProblem({ reason: `the cluster's artifact store (Postgres) did not answer within ${Duration.format(ARTIFACT_TRANSFER_TIMEOUT)}` }))
      }),
      Effect.mapError((error) =>
        new ArtifactReadFailed({
          id,
          path: target,
          reason: error._tag === "LocalFileProblem" ? error.reason : `the cluster's artifact store (Postgres) failed: ${sqlProblem(error)}`
        })
      )
    )
    if (!found) return yield* new ArtifactNotFound({ id, dir: local.dir })
  })

  const readBytes = (id: string) =>
    local.readBytes(id).pipe(Effect.catchTag("ArtifactNotFound", () => Effect.andThen(fetch(id), local.readBytes(id))))

  const list = Effect.gen(function*() {
    const here = yield* local.list
    const rows = yield* withSql(sessionRows(sessionId)).pipe(
      Effect.mapError((error) => new ArtifactReadFailed({ id: "*", path: local.dir, reason: `the cluster's artifact store (Postgres) failed: ${sqlProblem(error)}` }))
    )
    const byId = new Map<string, ArtifactEntry>(rows.map((row) => [row.id, { id: row.id, uri: artifactUri(row.id), size: row.size }]))
    for (const entry of here) byId.set(entry.id, entry)
    return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : 1))
  })

  const prune = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    yield* withSql(pruneSessionRows(sessionId, retention, now)).pipe(
      Effect.catch((error) => Effect.logWarning(`could not prune session ${sessionId}'s artifacts in Postgres: ${sqlProblem(error)}`))
    )
    return yield* local.prune
  })

  return {
    ...local,
    read: (id) => Effect.map(readBytes(id), (bytes) => Buffer.from(bytes).toString("utf8")),
    readBytes,
    resolve: (uri) =>
      local.resolve(uri).pipe(Effect.catchTag("ArtifactNotFound", (missing) =>
        fetch(missing.id).pipe(
          Effect.catchTag("ArtifactReadFailed", () => Effect.fail(missing)),
          Effect.andThen(local.resolve(uri))
        ))),
    list,
    forSession: (nested) => Effect.map(local.forSession(nested), (store) => sessionStore(sql, store, nested, retention)),
    prune
  }
}

/** The root store: `local` itself, whose `forSession` stores read through Postgres. */
export const pgArtifactRoot = (sql: SqlClient.SqlClient, local: ArtifactStoreService, retention: ArtifactRetention): ArtifactStoreService => ({
  ...local,
  forSession: (sessionId) => Effect.map(local.forSession(sessionId), (store) => sessionStore(sql, store, sessionId, retention))
})

/**
 * The `ArtifactStore` over the `artifactsDir` setting (this process's private copies) whose
 * session stores read artifacts published to the `SqlClient` in context; creates its tables
 * and sweeps old artifacts as it starts.
 */
export const PgArtifactStoreLive: Layer.Layer<ArtifactStore, ArtifactDirUnavailable | SqlError.SqlError, SqlClient.SqlClient | Settings> = Layer.effect(
  ArtifactStore,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const settings = yield* Settings
    const retention = retentionOf(settings)
    const local = yield* openArtifactRoot(settings.artifactsDir, retention).pipe(Effect.provide(NodeFileSystem.layer))
    yield* ensureArtifactTables
    yield* Effect.flatMap(Clock.currentTimeMillis, (now) => sweepOldRows(retention, now))
    return pgArtifactRoot(sql, local, retention)
  })
)
