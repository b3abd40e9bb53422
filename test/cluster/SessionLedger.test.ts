/**
 * The session ledger against a real Postgres: a call is recorded before it runs and
 * finished after, a second runner taking the session over answers the first one's lost
 * call instead of running it, and a call on a row another transaction holds fails within
 * the ledger's bound with a clear error. On a session its runner owns, each step is one
 * statement, and what that path leaves out of memory (the kept result) is never lost:
 * a finished call delivered again gets its result back, a later call's step keeps it, and
 * a lost call's answer clears it.
 */
import { PgClient } from "@effect/sql-pg"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { describe, expect, it } from "vitest"
import { Deferred, Effect, Exit, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { ALREADY_RAN_NOTICE, LOST_CELL_NOTICE, REHOMED_NOTICE } from "../../src/cluster/LedgerDecision.ts"
import { TracingLive } from "../../src/layers/Tracing.ts"
import { SessionLedger, type SessionLedgerOptions, type SessionLedgerService } from "../../src/cluster/SessionLedger.ts"
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

  it("a step on a session its runner owns is one statement; a brand-new session's first is one too", async () => {
    const exporter = new InMemorySpanExporter()
    const sql = PgClient.layer({ url: Redacted.make(database.url()), maxConnections: 4 })
    const traced = database.track(ManagedRuntime.make(
      SessionLedger.layer("runner-d", "127.0.0.1:9").pipe(Layer.provideMerge(sql), Layer.provideMerge(TracingLive({ spanProcessor: new SimpleSpanProcessor(exporter) })))
    ))
    const statementsOf = async (step: (ledger: SessionLedgerService) => Effect.Effect<unknown, unknown>) => {
      await traced.runPromise(Effect.void)
      exporter.reset()
      await traced.runPromise(Effect.flatMap(SessionLedger, step))
      return exporter.getFinishedSpans().filter((span) => span.attributes["db.query.text"] !== undefined).length
    }
    expect(await statementsOf((ledger) => ledger.beginExecute("s3", "c1"))).toBe(1)
    expect(await statementsOf((ledger) => ledger.finishExecute("s3", "c1", null))).toBe(1)
    for (let call = 2; call < 5; call++) {
      expect(await statementsOf((ledger) => ledger.beginExecute("s3", `c${call}`))).toBe(1)
      expect(await statementsOf((ledger) => ledger.finishExecute("s3", `c${call}`, `{"n":${call}}`))).toBe(1)
    }
    // Another runner moved the row on: the remembered one no longer matches, so the step reads it under a lock.
    await runner("runner-e").runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s3", "c5")))
    expect(await statementsOf((ledger) => ledger.beginExecute("s3", "c6"))).toBeGreaterThan(1)
    expect(await statementsOf((ledger) => ledger.finishExecute("s3", "c6", null))).toBe(1)
  }, 120_000)

  it("keeps a finished call's result through the one-statement path: replayed when delivered again, kept by later calls, cleared by a lost call's answer", async () => {
    const a = runner("runner-f")
    const b = runner("runner-g")
    const on = (runtime: ReturnType<typeof runner>) => <A, E>(step: (ledger: SessionLedgerService) => Effect.Effect<A, E>) =>
      runtime.runPromise(Effect.flatMap(SessionLedger, step))
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "c1"))).toMatchObject({ _tag: "Run" })
    await on(a)((ledger) => ledger.finishExecute("s4", "c1", `{"kept":1}`))
    // The same call again on its owner: its kept result, though the owner does not hold it in memory.
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "c1"))).toEqual({ _tag: "Replay", result: `{"kept":1}`, next: undefined })
    // A later call's step leaves the kept result of the call done last alone.
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "c2"))).toMatchObject({ _tag: "Run", notice: undefined })
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "c1"))).toEqual({ _tag: "Replay", result: `{"kept":1}`, next: undefined })
    // Runner b takes the session over while c2 was in flight on a, then gets c2 itself: lost, and its
    // answer is the done call now, without a result: delivered again, it is "already ran", not c3's result.
    expect(await on(b)((ledger) => ledger.beginExecute("s4", "c3"))).toMatchObject({ _tag: "Run", notice: REHOMED_NOTICE })
    await on(b)((ledger) => ledger.finishExecute("s4", "c3", `{"kept":3}`))
    expect(await on(b)((ledger) => ledger.beginExecute("s4", "c2"))).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    expect(await on(b)((ledger) => ledger.beginExecute("s4", "c2"))).toMatchObject({ _tag: "Answer", notice: ALREADY_RAN_NOTICE })
  }, 120_000)

  it("gives rows from before the format column format 1 and keeps using them; refuses a row of a newer format with a sentence, writing nothing", async () => {
    // A table as the releases before row formats made it, in a database of its own.
    const admin = runner("runner-admin")
    await admin.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe("CREATE DATABASE before_formats")))
    const oldUrl = database.url().replace(/\/postgres$/, "/before_formats")
    const oldSql = database.track(ManagedRuntime.make(PgClient.layer({ url: Redacted.make(oldUrl), maxConnections: 2 })))
    await oldSql.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.andThen(
        sql.unsafe(`CREATE TABLE veyyon_sessions (session_id text PRIMARY KEY, owner text, owner_address text, generation bigint NOT NULL,
          inflight_call text, lost_call text, done_call text, done_result text, ended boolean NOT NULL DEFAULT false,
          version bigint NOT NULL DEFAULT 0, updated_at timestamptz NOT NULL DEFAULT now())`),
        sql.unsafe(`INSERT INTO veyyon_sessions (session_id, owner, owner_address, generation, done_call, version) VALUES ('old', 'gone', '127.0.0.1:1', 1, 'c0', 3)`)
      )))
    const upgraded = database.track(ManagedRuntime.make(SessionLedger.layer("runner-new", "127.0.0.1:2").pipe(
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(oldUrl), maxConnections: 2 }))
    )))
    const formats = () => oldSql.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ session_id: string; format: number }>`SELECT session_id, format FROM veyyon_sessions ORDER BY session_id`))
    expect(await upgraded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.row("old")))).toMatchObject({ owner: "gone", doneCall: "c0" })
    expect(await formats()).toEqual([{ session_id: "old", format: 1 }])
    expect(await upgraded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("old", "c0")))).toMatchObject({ _tag: "Answer" })
    expect(await upgraded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("fresh", "c1")))).toMatchObject({ _tag: "Run" })
    expect(await formats()).toEqual([{ session_id: "fresh", format: 1 }, { session_id: "old", format: 1 }])

    // A newer release wrote the row in a format this one does not read.
    await oldSql.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE veyyon_sessions SET format = 2, version = version + 1 WHERE session_id = 'fresh'`))
    const before = await upgraded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.row("fresh")))
    const refused = await upgraded.runPromiseExit(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("fresh", "c2")))
    expect(Exit.isFailure(refused) && String(refused.cause)).toContain(
      "the ledger row of session fresh is format 2, written by a newer release; this release reads formats up to 1"
    )
    const finished = await upgraded.runPromiseExit(Effect.flatMap(SessionLedger, (ledger) => ledger.finishExecute("fresh", "c1", null)))
    expect(Exit.isFailure(finished)).toBe(true)
    expect(await upgraded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.row("fresh")))).toEqual(before)
  }, 120_000)
})

