/**
 * The session ledger against a real Postgres: a call is recorded before it runs and
 * finished after, a second runner taking the session over answers the first one's lost
 * call instead of running it, and a call on a row another transaction holds fails within
 * the ledger's bound with a clear error.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "vitest"
import { Deferred, Effect, Exit, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { LOST_CELL_NOTICE } from "../../src/cluster/LedgerDecision.ts"
import { SessionLedger, type SessionLedgerOptions } from "../../src/cluster/SessionLedger.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { postgresForFile } from "./database.ts"
import { titled } from "../support/skip.ts"

const skip = postgresSkipReason()

describe.skipIf(skip !== undefined)(titled("session ledger in Postgres", skip), () => {
  const database = postgresForFile()
  const runner = (incarnation: string, options: SessionLedgerOptions = {}) => {
    const sql = PgClient.layer({ url: Redacted.make(database.url()), maxConnections: 4 })
    return database.track(ManagedRuntime.make(SessionLedger.layer(incarnation, `127.0.0.1:${incarnation.length}`, options).pipe(Layer.provideMerge(sql))))
  }

  it("records a call before it runs; a new owner answers the dead owner's call in flight with the notice", async () => {
    const first = runner("runner-a")
    const second = runner("runner-b")
    const begin = (runtime: ReturnType<typeof runner>, callId: string) =>
      runtime.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s1", callId)))
    expect(await begin(first, "c1")).toMatchObject({ _tag: "Run", notice: undefined })
    await first.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.finishExecute("s1", "c1", null)))
    expect(await begin(first, "c2")).toMatchObject({ _tag: "Run", notice: undefined })
    const lost = await begin(second, "c2")
    expect(lost).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    const row = await second.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.row("s1")))
    expect(row).toMatchObject({ owner: "runner-b", generation: 2, inflightCall: null })
  }, 120_000)

  it("fails a call within its bound, with a clear error, while another transaction holds the session's row", async () => {
    const bounded = runner("runner-c", { callTimeout: "300 millis" })
    await bounded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s2", "c1")))
    const locked = Effect.runSync(Deferred.make<void>())
    const release = Effect.runSync(Deferred.make<void>())
    const holding = bounded.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT * FROM veyyon_sessions WHERE session_id = 's2' FOR UPDATE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      }))))
    try {
      await Effect.runPromise(Deferred.await(locked))
      const stuck = await bounded.runPromiseExit(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s2", "c2")))
      expect(Exit.isFailure(stuck) && String(stuck.cause)).toContain("the session ledger (Postgres) did not answer within 300ms")
    } finally {
      await Effect.runPromise(Deferred.succeed(release, undefined))
      await holding
    }
    const after = await bounded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s2", "c3")))
    expect(after._tag).toBe("Run")
  }, 120_000)
})
