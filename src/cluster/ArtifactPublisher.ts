/**
 * The runner's half of artifacts in a cluster: after a cell, the artifacts it wrote to the
 * runner's own private store are copied into Postgres, so `artifact://<id>` resolves on any
 * runner and on the client (`PgArtifactStoreLive`) once the cell's result is back.
 *
 * Call `publish(sessionId, result.artifactIds)` before returning a cell's result (or with no
 * ids to copy every artifact of the session not there yet, e.g. after a restart). Each
 * artifact goes in whole or not at all; one larger than the session budget
 * (`artifacts.maxSessionMb`) is left out, as retention would drop it at once, and reported.
 * Then the session's retention is applied in Postgres as the file store applies it (age
 * `artifacts.maxAgeHours`, then the oldest until the rest fit; the newest stays). Opening
 * the layer removes every session's artifacts past the age limit. A publish that Postgres
 * has not taken within `ARTIFACT_TRANSFER_TIMEOUT` fails (its transaction rolled back), so a
 * stuck database never holds a cell's result.
 */
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import { SqlClient, type SqlError } from "effect/sql"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { artifactIdProblem, ArtifactStore, retentionOf, sessionArtifactsDir } from "../services/output/ArtifactStore.ts"
import { ownFileProblem } from "../services/storage/PrivateDir.ts"
import { Settings } from "../services/config/Settings.ts"
import { ARTIFACT_TRANSFER_TIMEOUT, ensureArtifactTables, existingIds, insertArtifact, type LocalFileProblem, pruneSessionRows, sweepOldRows } from "./PgArtifactRows.ts"
import { sessionIdProblem, sqlProblem } from "./PgSchema.ts"

/** Artifacts of a session could not be copied into Postgres. */
export class ArtifactPublishFailed extends Schema.TaggedError<ArtifactPublishFailed>()("ArtifactPublishFailed", {
  sessionId: Schema.String,
  id: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Could not publish artifact ${this.id} of session ${JSON.stringify(this.sessionId)} to the cluster's store (${this.reason}); ` +
      `it stays readable on the runner that wrote it.`
  }
}

/** What one `publish` did. */
export interface PublishReport {
  /** Ids copied into Postgres now. */
  readonly published: ReadonlyArray<string>
  /** Ids left out, with why (too large, missing locally, not an artifact id). */
  readonly skipped: ReadonlyArray<{ readonly id: string; readonly reason: string }>
  /** Ids retention removed from Postgres afterwards. */
  readonly pruned: ReadonlyArray<string>
}

/** The publishing operation. */
export interface ArtifactPublisherService {
  /** Copies session `sessionId`'s artifacts `ids` (all not yet published when omitted) from this process's store into Postgres, then applies retention there. */
  readonly publish: (sessionId: string, ids?: ReadonlyArray<string>) => Effect.Effect<PublishReport, ArtifactPublishFailed>
}

const localIds = (dir: string): Array<string> => {
  try {
    return NodeFs.readdirSync(dir).filter((name) => artifactIdProblem(name) === undefined && (() => {
      try {
        return ownFileProblem(NodeFs.lstatSync(path.join(dir, name))) === undefined
      } catch {
        return false
      }
    })())
  } catch {
    return []
  }
}

/** How a publisher bounds its work. */
export interface ArtifactPublisherOptions {
  /** The longest one `publish` may take (default `ARTIFACT_TRANSFER_TIMEOUT`). */
  readonly transferTimeout?: Duration.Input
}

/** Builds the publisher over the local `ArtifactStore` root, the settings' retention and the `SqlClient` in context. */
export const makeArtifactPublisher: (
  options?: ArtifactPublisherOptions
) => Effect.Effect<ArtifactPublisherService, SqlError.SqlError, SqlClient.SqlClient | ArtifactStore | Settings> = Effect.fnUntraced(
  function*(options: ArtifactPublisherOptions = {}) {
    const transferTimeout = Duration.fromInputUnsafe(options.transferTimeout ?? ARTIFACT_TRANSFER_TIMEOUT)
    const sql = yield* SqlClient.SqlClient
    const root = yield* ArtifactStore
    const retention = retentionOf(yield* Settings)
    yield* ensureArtifactTables
    yield* Effect.flatMap(Clock.currentTimeMillis, (now) => sweepOldRows(retention, now))

    const publish = Effect.fnUntraced(
      function*(sessionId: string, ids?: ReadonlyArray<string>) {
        const tooLong = sessionIdProblem(sessionId)
        if (tooLong !== undefined) return yield* new ArtifactPublishFailed({ sessionId: sessionId.slice(0, 60), id: "*", reason: tooLong })
        const dir = sessionArtifactsDir(root.dir, sessionId)
        const failed = (id: string) => (error: SqlError.SqlError | LocalFileProblem) =>
          new ArtifactPublishFailed({ sessionId, id, reason: error._tag === "SqlError" ? sqlProblem(error) : error.reason })
        const wanted = ids ?? localIds(dir)
        const published: Array<string> = []
        const skipped: Array<{ id: string; reason: string }> = []
        const there = yield* existingIds(sessionId, wanted).pipe(Effect.mapError(failed("*")))
        for (const id of wanted) {
          if (there.has(id)) continue
          const problem = artifactIdProblem(id)
          if (problem !== undefined) {
            skipped.push({ id, reason: `not an artifact id: ${problem}` })
            continue
          }
          const inserted = yield* insertArtifact(sessionId, id, path.join(dir, id), retention.maxSessionBytes).pipe(
            Effect.catchTag("LocalFileProblem", (problem) => Effect.succeed({ missing: problem.reason })),
            Effect.mapError(failed(id))
          )
          if (inserted === "inserted") published.push(id)
          else if (inserted === "already-there") continue
          else if ("missing" in inserted) skipped.push({ id, reason: `cannot read the runner's copy: ${inserted.missing}` })
          else skipped.push({ id, reason: `${inserted.tooLarge} bytes is over the session's ${retention.maxSessionBytes}-byte artifacts budget` })
        }
        for (const { id, reason } of skipped) yield* Effect.logWarning(`artifact ${id} of session ${sessionId} not published: ${reason}`)
        const now = yield* Clock.currentTimeMillis
        const pruned = published.length === 0 ? [] : yield* pruneSessionRows(sessionId, retention, now).pipe(Effect.mapError(failed("*")))
        return { published, skipped, pruned } satisfies PublishReport
      },
      Effect.provideService(SqlClient.SqlClient, sql),
      (effect, sessionId) =>
        Effect.timeoutOrElse(effect, {
          duration: transferTimeout,
          orElse: () => Effect.fail(new ArtifactPublishFailed({ sessionId, id: "*", reason: `Postgres did not take them within ${Duration.format(transferTimeout)}` }))
        })
    )

    return { publish }
  }
)

/** Copies a session's artifacts from a runner's private store into the cluster's Postgres. */
export class ArtifactPublisher extends Context.Service<ArtifactPublisher, ArtifactPublisherService>()("veyyon-eval/ArtifactPublisher") {
  /** The publisher on the `SqlClient`, local `ArtifactStore` and `Settings` in context; creates its tables and sweeps old artifacts as it starts. */
  static readonly layer: Layer.Layer<ArtifactPublisher, SqlError.SqlError, SqlClient.SqlClient | ArtifactStore | Settings> = Layer.effect(
    ArtifactPublisher,
    makeArtifactPublisher()
  )
  /** The same with its own bounds. */
  static layerWith(options: ArtifactPublisherOptions): Layer.Layer<ArtifactPublisher, SqlError.SqlError, SqlClient.SqlClient | ArtifactStore | Settings> {
    return Layer.effect(ArtifactPublisher, makeArtifactPublisher(options))
  }
}
