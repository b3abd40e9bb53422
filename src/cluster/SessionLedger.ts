/**
 * The session ledger in Postgres (`veyyon_sessions`): per session the runner incarnation
 * holding its kernels, a generation, and per language (its lane) the call in flight, the
 * call lost with a dead runner and the last call done (stored as `LedgerRowFormat` says). A runner consults it before running a cell, so a cell whose
 * runner died is answered with a notice instead of running twice, and the first cell on
 * a re-homed session says its variables are gone. The table is created at layer start,
 * under the schema lock every store of the cluster takes (`ensureSchema`).
 *
 * What to do is decided by the pure `LedgerDecision` functions over the session's row; a
 * step is one statement on the warm path. The runner remembers the row of each session it
 * owns as it last wrote it (`LedgerCache`) with the row's `version`, decides from that, and
 * writes the next row only if the version is still the one it wrote (`UPDATE ... WHERE
 * version = ...`); a brand-new session's first step is an `INSERT` that does nothing when
 * a row exists. When that write finds another row (another runner wrote it meanwhile, or
 * the guess of a new session was wrong), the step reads the row under a row lock, decides
 * and writes in one transaction, as every step did before. So a decision is always taken
 * on the row as it stands when its write lands.
 * Every call is bounded (`LEDGER_CALL_TIMEOUT`): a stuck database makes a cell fail to
 * start with a clear error, never hang. A database that cannot be reached (restarting) is
 * waited for up to `DATABASE_OUTAGE_WAIT`, each step tried again (every step is idempotent
 * for its incarnation), then the call fails with a sentence naming the database.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import { type CachedRow, cachedRow, changedResults, decidesFromCache } from "./LedgerCache.ts"
import { decideExecute, endedRow, finishedRow, inflightElsewhere, type LedgerDecision, type LedgerRow, releasedRow } from "./LedgerDecision.ts"
import { LEDGER_FORMAT, readRow, type StoredRow, storedLanes, storedResults } from "./LedgerRowFormat.ts"
import { waitOutOutage } from "./DatabaseOutage.ts"
import { ensureSchema } from "./PgSchema.ts"

/** A finished call's result is kept for a second delivery when its JSON is at most this long (characters). */
export const MAX_KEPT_RESULT_CHARS = 1024 * 1024

/** The longest a ledger call may take before it fails (Postgres stuck, or a row lock held too long). */
export const LEDGER_CALL_TIMEOUT = Duration.seconds(30)

/** How a ledger bounds its calls. */
export interface SessionLedgerOptions {
  /** The longest one call may take (default `LEDGER_CALL_TIMEOUT`). */
  readonly callTimeout?: Duration.Input
  /** How long a call waits for an unreachable database to come back (default `DATABASE_OUTAGE_WAIT`). */
  readonly outageWait?: Duration.Input
  /** The database as errors name it (see `describeDatabase`). */
  readonly database?: string
}

/** The ledger's table. */
export const LEDGER_TABLE = "veyyon_sessions"

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS ${LEDGER_TABLE} (
  session_id text PRIMARY KEY,
  owner text,
  owner_address text,
  generation bigint NOT NULL,
  inflight_call text,
  lost_call text,
  done_call text,
  done_result text,
  ended boolean NOT NULL DEFAULT false,
  version bigint NOT NULL DEFAULT 0,
  updated_at timestamptz NOT NULL DEFAULT now(),
  format integer NOT NULL DEFAULT 1,
  lanes text,
  lane_results text
)`,
  // Tables made before rows had versions.
  `ALTER TABLE ${LEDGER_TABLE} ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0`,
  // Tables made before rows had formats: their rows are format 1.
  `ALTER TABLE ${LEDGER_TABLE} ADD COLUMN IF NOT EXISTS format integer NOT NULL DEFAULT 1`,
  // Tables made before rows had language lanes (format 2).
  `ALTER TABLE ${LEDGER_TABLE} ADD COLUMN IF NOT EXISTS lanes text`,
  `ALTER TABLE ${LEDGER_TABLE} ADD COLUMN IF NOT EXISTS lane_results text`
]

/** The failure of a step on a row this release cannot read: `problem` says why. */
const unreadable = (problem: string) => new SqlError({ reason: new UnknownError({ cause: new Error(problem), message: problem, operation: "ledger" }) })

/** The session has a call in flight on another runner that may still be finishing it (at `address`): wait while it answers, then ask again. */
export interface InflightElsewhere {
  readonly _tag: "InflightElsewhere"
  readonly address: string
}

/** The ledger as one runner incarnation sees it. */
export interface SessionLedgerService {
  /** This runner process's random incarnation id. */
  readonly incarnation: string
  /**
   * Decides what to do with call `callId` of `language` on the session and records the decision, atomically.
   * With `awaitOwner`, a call on a session another live-looking runner holds with a call in
   * flight is not decided: the answer says where it is, and the caller waits for that runner
   * before asking again.
   */
  readonly beginExecute: (sessionId: string, language: string, callId: string, awaitOwner?: boolean) => Effect.Effect<LedgerDecision | InflightElsewhere, SqlError>
  /** Records that call `callId` of `language` finished (it will not run again), keeping its result (JSON) when it is not too large. */
  readonly finishExecute: (sessionId: string, language: string, callId: string, result: string | null) => Effect.Effect<void, SqlError>
  /** Records that this runner let the session go (its kernels are gone). */
  readonly release: (sessionId: string) => Effect.Effect<void, SqlError>
  /** Records that the session was ended on purpose. */
  readonly end: (sessionId: string) => Effect.Effect<void, SqlError>
  /** The session's row, if any. */
  readonly row: (sessionId: string) => Effect.Effect<LedgerRow | undefined, SqlError>
  /** The generation of the session as this incarnation last wrote it while owning it, if it does (what fences its writes of the session's state). */
  readonly ownedGeneration: (sessionId: string) => number | undefined
}

/** The ledger service. */
export class SessionLedger extends Context.Service<SessionLedger, SessionLedgerService>()("veyyon-eval/SessionLedger") {
  /** The ledger for runner incarnation `incarnation` advertised at `address`; creates the table if missing. */
  static layer(incarnation: string, address: string, options: SessionLedgerOptions = {}): Layer.Layer<SessionLedger, SqlError, SqlClient.SqlClient> {
    return Layer.effect(SessionLedger, SessionLedger.make(incarnation, address, options))
  }

  /** The ledger of one runner incarnation, as an effect (several incarnations may share a client). */
  static make(incarnation: string, address: string, options: SessionLedgerOptions = {}): Effect.Effect<SessionLedgerService, SqlError, SqlClient.SqlClient> {
    return makeLedger(incarnation, address, options)
  }
}

/** What one step does with the row it finds: the row to write (undefined: none) and the step's answer. */
type Step<A> = (row: LedgerRow | undefined) => { readonly next: LedgerRow | undefined; readonly value: A }

const makeLedger = Effect.fnUntraced(function*(incarnation: string, address: string, options: SessionLedgerOptions) {
  const callTimeout = Duration.fromInputUnsafe(options.callTimeout ?? LEDGER_CALL_TIMEOUT)
  const sql = yield* SqlClient.SqlClient
  yield* ensureSchema(SCHEMA)
  const table = sql(LEDGER_TABLE)
  /** The rows of the sessions this incarnation owns, as it last wrote them. */
  const cache = new Map<string, CachedRow>()
  const remember = (row: LedgerRow, version: number | string) => {
    const entry = cachedRow(row, Number(version), incarnation)
    if (entry === undefined) cache.delete(row.sessionId)
    else cache.set(row.sessionId, entry)
  }

  const database = options.database ?? "the cluster's database (Postgres)"
  /** One try of a call, bounded. */
  const once = <A>(effect: Effect.Effect<A, SqlError>) =>
    effect.pipe(
      Effect.timeoutOrElse({
        duration: callTimeout,
        orElse: () => {
          const message = `the session ledger (Postgres) did not answer within ${Duration.format(callTimeout)}`
          return Effect.fail(new SqlError({ reason: new UnknownError({ cause: new Error(message), message, operation: "ledger" }) }))
        }
      })
    )
  /** A call whose tries, each bounded, go on while the database cannot be reached (a restart), up to the outage wait. */
  const bounded = <A>(effect: Effect.Effect<A, SqlError>) => waitOutOutage(once(effect), database, options.outageWait)


  const upsert = (row: LedgerRow) =>
    sql<{ version: string }>`INSERT INTO ${table} (session_id, owner, owner_address, generation, ended, lanes, lane_results, version, updated_at, format)
      VALUES (${row.sessionId}, ${row.owner}, ${row.ownerAddress}, ${row.generation}, ${row.ended}, ${storedLanes(row)}, ${storedResults(row)}, 1, now(), ${LEDGER_FORMAT})
      ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, owner_address = EXCLUDED.owner_address,
        generation = EXCLUDED.generation, ended = EXCLUDED.ended, lanes = EXCLUDED.lanes, lane_results = EXCLUDED.lane_results,
        inflight_call = NULL, lost_call = NULL, done_call = NULL, done_result = NULL,
        version = ${table}.version + 1, updated_at = now(), format = EXCLUDED.format
      RETURNING version`

  /** Writes `row` only when the session has none yet; the new version, or undefined when it had one. */
  const insertNew = (row: LedgerRow) =>
    Effect.map(
      sql<{ version: string }>`INSERT INTO ${table} (session_id, owner, owner_address, generation, ended, lanes, lane_results, version, updated_at, format)
        VALUES (${row.sessionId}, ${row.owner}, ${row.ownerAddress}, ${row.generation}, ${row.ended}, ${storedLanes(row)}, ${storedResults(row)}, 1, now(), ${LEDGER_FORMAT})
        ON CONFLICT (session_id) DO NOTHING
        RETURNING version`,
      (rows) => rows[0]?.version
    )

  /**
   * Writes `next` over the remembered row only while the stored one is still at its version,
   * merging into the kept results only the lanes' that the step changes (the others, not
   * remembered, stay as stored); the new version, or undefined when it was not.
   */
  const writeOver = (cached: CachedRow, next: LedgerRow) => {
    const results = changedResults(cached, next)
    return Effect.map(
      Object.keys(results).length > 0
        ? sql<{ version: string }>`UPDATE ${table} SET owner = ${next.owner}, owner_address = ${next.ownerAddress}, generation = ${next.generation},
            ended = ${next.ended}, lanes = ${storedLanes(next)},
            lane_results = (COALESCE(lane_results, '{}')::jsonb || ${JSON.stringify(results)}::jsonb)::text,
            version = version + 1, updated_at = now()
            WHERE session_id = ${next.sessionId} AND version = ${cached.version} RETURNING version`
        : sql<{ version: string }>`UPDATE ${table} SET owner = ${next.owner}, owner_address = ${next.ownerAddress}, generation = ${next.generation},
            ended = ${next.ended}, lanes = ${storedLanes(next)}, version = version + 1, updated_at = now()
            WHERE session_id = ${next.sessionId} AND version = ${cached.version} RETURNING version`,
      (rows) => rows[0]?.version
    )
  }

  /** The step over the row as it stands: read under a row lock, decided, written, in one transaction. */
  const locked = <A>(sessionId: string, step: Step<A>) =>
    sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql<StoredRow>`SELECT * FROM ${table} WHERE session_id = ${sessionId} FOR UPDATE`
      const read = rows.length === 0 ? undefined : readRow(rows[0]!)
      if (typeof read === "string") {
        cache.delete(sessionId)
        return yield* unreadable(read)
      }
      const found = read
      const { next, value } = step(found)
      if (next !== undefined && next !== found) {
        const written = yield* upsert(next)
        remember(next, written[0]!.version)
      } else if (found === undefined) {
        cache.delete(sessionId)
      } else {
        remember(found, rows[0]!.version)
      }
      return value
    }))

  /**
   * The step in one statement when it can be: over the remembered row (`guess`, or none for
   * a session never seen) written only if still current; otherwise, or when the write finds
   * another row, the locked step.
   */
  const apply = <A>(sessionId: string, guess: CachedRow | undefined, step: Step<A>) =>
    bounded(Effect.suspend(() => {
      const { next, value } = step(guess?.row)
      if (next === undefined) return guess === undefined ? locked(sessionId, step) : Effect.succeed(value)
      const write = guess === undefined ? insertNew(next) : writeOver(guess, next)
      return Effect.flatMap(write, (version) => {
        if (version === undefined) {
          cache.delete(sessionId)
          return locked(sessionId, step)
        }
        remember(next, version)
        return Effect.succeed(value)
      })
    }))

  const beginStep = (sessionId: string, language: string, callId: string, awaitOwner: boolean): Step<LedgerDecision | InflightElsewhere> => (row) => {
    const elsewhere = awaitOwner ? inflightElsewhere(row, incarnation) : undefined
    if (elsewhere !== undefined) return { next: undefined, value: { _tag: "InflightElsewhere", address: elsewhere } }
    const decision = decideExecute(row, sessionId, incarnation, address, language, callId)
    return { next: decision.next, value: decision }
  }

  return {
    incarnation,
    beginExecute: (sessionId, language, callId, awaitOwner = false) => {
      const cached = cache.get(sessionId)
      const step = beginStep(sessionId, language, callId, awaitOwner)
      return cached === undefined || decidesFromCache(cached, callId) ? apply(sessionId, cached, step) : bounded(locked(sessionId, step))
    },
    finishExecute: (sessionId, language, callId, result) => {
      const step: Step<void> = (row) => ({
        next: row === undefined || row.owner !== incarnation ? undefined : finishedRow(row, language, callId, result),
        value: undefined
      })
      const cached = cache.get(sessionId)
      // The remembered row holds no kept results, so finishing a call already done there (its result replaced) reads the row.
      return cached === undefined || !decidesFromCache(cached, callId) ? bounded(locked(sessionId, step)) : apply(sessionId, cached, step)
    },
    // Not waited for: a runner letting sessions go (its shards moved, it is stopping) does not
    // stall on an outage; a release not recorded only makes the next owner of a call still
    // in flight ask whether this runner answers before it decides.
    release: (sessionId) =>
      once(locked(sessionId, (row) => ({ next: row === undefined ? undefined : releasedRow(row, incarnation), value: undefined }))),
    end: (sessionId) =>
      bounded(locked(sessionId, (row) => ({ next: row === undefined ? undefined : endedRow(row), value: undefined }))),
    row: (sessionId) =>
      bounded(Effect.flatMap(sql<StoredRow>`SELECT * FROM ${table} WHERE session_id = ${sessionId}`, (rows) => {
        const read = rows.length === 0 ? undefined : readRow(rows[0]!)
        return typeof read === "string" ? Effect.fail(unreadable(read)) : Effect.succeed(read)
      })),
    ownedGeneration: (sessionId) => cache.get(sessionId)?.row.generation
  } satisfies SessionLedgerService
})
