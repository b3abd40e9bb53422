/**
 * Riding out a restart of the cluster's Postgres: a database call that fails because the
 * server cannot be reached (refused or dropped connections, a server shutting down or
 * still starting up) is tried again until the window passes, then fails with a sentence
 * naming the database. Other failures (a query the server rejected, a call that timed
 * out) fail at once. A client watches the database too (`watchDatabase`), so a call that
 * waits on a runner waiting for the database gives up after the same window.
 */
import { Duration, Effect, Schedule, type Scope } from "effect"
import { SqlClient } from "effect/sql"
import { ConnectionError, SqlError } from "effect/sql/SqlError"
import { sqlProblem } from "./PgSchema.ts"

/** How long a database call waits for the cluster's Postgres to come back before it fails. */
export const DATABASE_OUTAGE_WAIT = Duration.seconds(30)

/** How often a call waiting out an outage tries again. */
const RETRY_SPACING = Duration.millis(500)

/** The cluster's database as a sentence names it: host, port and database of its URL, never its credentials. */
export const describeDatabase = (url: string): string => {
  try {
    const parsed = new URL(url)
    const database = parsed.pathname.replace(/^\//, "")
    return `the cluster's database (Postgres at ${parsed.host}${database === "" ? "" : `/${decodeURIComponent(database)}`})`
  } catch {
    return "the cluster's database (Postgres)"
  }
}

/** Postgres SQLSTATEs of a server going away or not yet serving: admin, crash and "cannot connect now" (57P01-57P03). */
const SERVER_UNAVAILABLE = /^57P0[123]$/

const sqlStateOf = (error: SqlError): string | undefined => {
  const cause = error.reason.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

/** Whether a failure says the server could not be reached (and may be restarting), not that it refused the query. */
export const isOutage = (error: SqlError): boolean =>
  error.reason instanceof ConnectionError || SERVER_UNAVAILABLE.test(sqlStateOf(error) ?? "")

/**
 * `call`, tried again while the database cannot be reached, up to `wait`; then it fails with
 * a sentence naming `database` and the last failure.
 */
export const waitOutOutage = <A, E = never>(
  call: Effect.Effect<A, E | SqlError>,
  database: string,
  wait: Duration.Input = DATABASE_OUTAGE_WAIT
): Effect.Effect<A, E | SqlError> => {
  const window = Duration.fromInputUnsafe(wait)
  const outage = (error: E | SqlError): error is SqlError => error instanceof SqlError && isOutage(error)
  return Effect.retry(call, {
    schedule: Schedule.spaced(RETRY_SPACING).pipe(Schedule.upTo({ duration: window })),
    while: outage
  }).pipe(
    Effect.mapError((error) => {
      if (!outage(error)) return error
      const message = `${database} could not be reached for ${Duration.format(window)}: ${sqlProblem(error)}`
      return new SqlError({ reason: new ConnectionError({ cause: error, message, operation: error.reason.operation }) })
    })
  )
}

/** How often a client asks whether the cluster's database answers. */
export const DATABASE_PROBE_INTERVAL = Duration.seconds(1)

/** What a client knows of the cluster's database while its calls wait. */
export interface DatabaseWatch {
  /** Since when (epoch ms) the database has not answered, when it last failed to, and why; undefined while it answers. */
  readonly outage: () => DatabaseOutage | undefined
}

/** The database not answering, as a client's probes saw it. */
export interface DatabaseOutage {
  /** When the first probe of the outage failed (epoch ms). */
  readonly since: number
  /** When the latest probe failed (epoch ms). */
  readonly last: number
  /** What the latest probe failed with. */
  readonly problem: string
}

/**
 * Asks the database `SELECT 1` every `interval` (each try bounded by it) for as long as the
 * scope lives, remembering since when it has not answered.
 */
export const watchDatabase = (interval: Duration.Input = DATABASE_PROBE_INTERVAL): Effect.Effect<DatabaseWatch, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const every = Duration.fromInputUnsafe(interval)
    let outage: DatabaseOutage | undefined
    const probe = sql`SELECT 1`.pipe(
      Effect.timeoutOrElse({ duration: every, orElse: () => Effect.fail(`no answer within ${Duration.format(every)}`) }),
      Effect.matchEffect({
        onSuccess: () => Effect.sync(() => (outage = undefined)),
        onFailure: (error) =>
          Effect.sync(() => {
            const problem = typeof error === "string" ? error : sqlProblem(error)
            const now = Date.now()
            outage = { since: outage?.since ?? now, last: now, problem }
          })
      })
    )
    yield* Effect.forkScoped(Effect.repeat(probe, Schedule.spaced(every)))
    return { outage: () => outage }
  })
