/**
 * The soak's log scan: every ERROR or WARN line a runner or door wrote must match a
 * pattern tied to a fault the soak injected (a runner killed or stopped, a runner
 * joining, Postgres restarting), or, written after the mix, to the soak stopping every
 * process; any other is a failure.
 */
import type { FaultKind } from "./faults.ts"

/** What explains a line: an injected fault, or the soak stopping every process at its end. */
export type Cause = FaultKind | "end"

/** A pattern of a line a fault explains, and the faults that explain it. */
interface Allowed {
  readonly pattern: RegExp
  readonly faults: ReadonlyArray<Cause>
}

/** The lines the injected faults explain. */
export const ALLOWED: ReadonlyArray<Allowed> = [
  // Postgres going away and coming back: connections dropped or refused, storage calls failing meanwhile.
  { pattern: /the snapshot of session \S+ \((py|js)\) was not kept: the session snapshot store failed: .*(terminating connection due to administrator command|the database system is (shutting down|starting up)|ECONNREFUSED|ECONNRESET|Connection terminated)/, faults: ["postgres"] },
  { pattern: /the shard lock refresh failed/, faults: ["postgres"] },
  { pattern: /message="Shard lock storage is unhealthy"/, faults: ["postgres"] },
  { pattern: /message="Could not read messages from storage" cause=".*PgConnection: (Failed to connect|Query failed: terminating connection due to administrator command)/, faults: ["postgres"] },
  // A refresh racing the release of shards (a join taking its share, a runner stopping), or the locks a restart dropped.
  { pattern: /message="lost the locks of \d+ shards? \(the lock refresh no longer holds them; their sessions move\)"/, faults: ["postgres", "join", "stop", "end"] },
  // Every runner stopping at the end of the soak.
  { pattern: /message="No healthy runners available" module=effect\/cluster\/Sharding/, faults: ["end"] }
]

const warnOrError = /level=(ERROR|WARN)|\b(ERROR|WARN)\b/

/** The ERROR and WARN lines of `log` that nothing in `injected` explains. */
export const unexplained = (log: string, injected: ReadonlySet<Cause>): Array<string> =>
  log.split("\n").filter((line) =>
    warnOrError.test(line) && !ALLOWED.some((allowed) => allowed.faults.some((fault) => injected.has(fault)) && allowed.pattern.test(line)))
