/**
 * The session ledger in Postgres (`veyyon_sessions`): per session the runner incarnation
 * holding its kernels, a generation, the call in flight, the call lost with a dead runner
 * and the last call done. A runner consults it before running a cell, so a cell whose
 * runner died is answered with a notice instead of running twice, and the first cell on
 * a re-homed session says its variables are gone. The table is created at layer start,
 * under the schema lock every store of the cluster takes (`ensureSchema`).
 * Every call is bounded (`LEDGER_CALL_TIMEOUT`): a stuck database makes a cell fail to
 * start with a clear error, never hang.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { SqlError, UnknownError } from "effect/sql/SqlError"
import { decideExecute, endedRow, finishedRow, type LedgerDecision, type LedgerRow, releasedRow } from "./LedgerDecision.ts"
import { ensureSchema } from "./PgSchema.ts"

/** A finished call's result is kept for a second delivery when its JSON is at most this long (characters). */
export const MAX_KEPT_RESULT_CHARS = 1024 * 1024

/** The longest a ledger call may take before it fails (Postgres stuck, or a row lock held too long). */
export const LEDGER_CALL_TIMEOUT = Duration.seconds(30)

/** How a ledger bounds its calls. */
export interface SessionLedgerOptions {
  /** The longest one call may take (default `LEDGER_CALL_TIMEOUT`). */
  readonly callTimeout?: Duration.Input
}

/** The ledger's table. */
export const LEDGER_TABLE = "veyyon_sessions"

const SCHEMA = `CREATE TABLE IF NOT EXISTS ${LEDGER_TABLE} (
  session_id text PRIMARY KEY,
  owner text,
  owner_address text,
  generation bigint NOT NULL,
  inflight_call text,
  lost_call text,
  done_call text,
  done_result text,
  ended boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now()
)`

interface DbRow {
  readonly session_id: string
  readonly owner: string | null
  readonly owner_address: string | null
  readonly generation: number | string
  readonly inflight_call: string | null
  readonly lost_call: string | null
  readonly done_call: string | null
  readonly done_result: string | null
  readonly ended: boolean
}

const fromDb = (row: DbRow): LedgerRow => ({
  sessionId: row.session_id,
  owner: row.owner,
  ownerAddress: row.owner_address,
  generation: Number(row.generation),
  inflightCall: row.inflight_call,
  lostCall: row.lost_call,
  doneCall: row.done_call,
  doneResult: row.done_result,
  ended: row.ended
})

/** The ledger as one runner incarnation sees it. */
export interface SessionLedgerService {
  /** This runner process's random incarnation id. */
  readonly incarnation: string
  /** Decides what to do with call `callId` on the session and records the decision, atomically. */
  readonly beginExecute: (sessionId: string, callId: string) => Effect.Effect<LedgerDecision, SqlError>
  /** Records that call `callId` finished (it will not run again), keeping its result (JSON) when it is not too large. */
  readonly finishExecute: (sessionId: string, callId: string, result: string | null) => Effect.Effect<void, SqlError>
  /** Records that this runner let the session go (its kernels are gone). */
  readonly release: (sessionId: string) => Effect.Effect<void, SqlError>
  /** Records that the session was ended on purpose. */
  readonly end: (sessionId: string) => Effect.Effect<void, SqlError>
  /** The session's row, if any. */
  readonly row: (sessionId: string) => Effect.Effect<LedgerRow | undefined, SqlError>
}

/** The ledger service. */
export class SessionLedger extends Context.Service<SessionLedger, SessionLedgerService>()("veyyon-eval/SessionLedger") {
  /** The ledger for runner incarnation `incarnation` advertised at `address`; creates the table if missing. */
  static layer(incarnation: string, address: string, options: SessionLedgerOptions = {}): Layer.Layer<SessionLedger, SqlError, SqlClient.SqlClient> {
    return Layer.effect(SessionLedger, makeLedger(incarnation, address, options))
  }
}

const makeLedger = Effect.fnUntraced(function*(incarnation: string, address: string, options: SessionLedgerOptions) {
  const callTimeout = Duration.fromInputUnsafe(options.callTimeout ?? LEDGER_CALL_TIMEOUT)
  const sql = yield* SqlClient.SqlClient
  yield* ensureSchema([SCHEMA])
  const read = (sessionId: string, lock: boolean) =>
    Effect.map(
      lock
        ? sql<DbRow>`SELECT * FROM ${sql(LEDGER_TABLE)} WHERE session_id = ${sessionId} FOR UPDATE`
        : sql<DbRow>`SELECT * FROM ${sql(LEDGER_TABLE)} WHERE session_id = ${sessionId}`,
      (rows) => (rows.length === 0 ? undefined : fromDb(rows[0]!))
    )
  const write = (row: LedgerRow) =>
    sql`INSERT INTO ${sql(LEDGER_TABLE)} (session_id, owner, owner_address, generation, inflight_call, lost_call, done_call, done_result, ended, updated_at)
      VALUES (${row.sessionId}, ${row.owner}, ${row.ownerAddress}, ${row.generation}, ${row.inflightCall}, ${row.lostCall}, ${row.doneCall}, ${row.doneResult}, ${row.ended}, now())
      ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, owner_address = EXCLUDED.owner_address,
        generation = EXCLUDED.generation, inflight_call = EXCLUDED.inflight_call, lost_call = EXCLUDED.lost_call,
        done_call = EXCLUDED.done_call, done_result = EXCLUDED.done_result, ended = EXCLUDED.ended, updated_at = now()`
  const update = <A>(sessionId: string, step: (row: LedgerRow | undefined) => { readonly next: LedgerRow | undefined; readonly value: A }) =>
    sql.withTransaction(Effect.gen(function*() {
      const found = yield* read(sessionId, true)
      const { next, value } = step(found)
      if (next !== undefined && next !== found) yield* write(next)
      return value
    })).pipe(
      Effect.timeoutOrElse({
        duration: callTimeout,
        orElse: () => {
          const message = `the session ledger (Postgres) did not answer within ${Duration.format(callTimeout)}`
          return Effect.fail(new SqlError({ reason: new UnknownError({ cause: new Error(message), message, operation: "ledger" }) }))
        }
      })
    )
  return {
    incarnation,
    beginExecute: (sessionId, callId) =>
      update(sessionId, (row) => {
        const decision = decideExecute(row, sessionId, incarnation, address, callId)
        return { next: decision.next, value: decision }
      }),
    finishExecute: (sessionId, callId, result) =>
      update(sessionId, (row) => ({ next: row === undefined || row.owner !== incarnation ? undefined : finishedRow(row, callId, result), value: undefined })),
    release: (sessionId) =>
      update(sessionId, (row) => ({ next: row === undefined ? undefined : releasedRow(row, incarnation), value: undefined })),
    end: (sessionId) =>
      update(sessionId, (row) => ({ next: row === undefined ? undefined : endedRow(row), value: undefined })),
    row: (sessionId) => read(sessionId, false)
  } satisfies SessionLedgerService
})
