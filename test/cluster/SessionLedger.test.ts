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
      runtime.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s1", "py", callId)))
    expect(await begin(first, "c1")).toMatchObject({ _tag: "Run", notice: undefined })
    await first.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.finishExecute("s1", "py", "c1", null)))
    expect(await begin(first, "c2")).toMatchObject({ _tag: "Run", notice: undefined })
    const lost = await begin(second, "c2")
    expect(lost).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    const row = await second.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.row("s1")))
    expect(row).toMatchObject({ owner: "runner-b", generation: 2, lanes: { py: { inflightCall: null, lostCall: null, doneCall: "c2" } } })
  }, 120_000)

  it("fails a call within its bound, with a clear error, while another transaction holds the session's row", async () => {
    const bounded = runner("runner-c", { callTimeout: "300 millis" })
    await bounded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s2", "py", "c1")))
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
      const stuck = await bounded.runPromiseExit(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s2", "py", "c2")))
      expect(Exit.isFailure(stuck) && String(stuck.cause)).toContain("the session ledger (Postgres) did not answer within 300ms")
    } finally {
      await Effect.runPromise(Deferred.succeed(release, undefined))
      await holding
    }
    const after = await bounded.runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s2", "py", "c3")))
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
    expect(await statementsOf((ledger) => ledger.beginExecute("s3", "py", "c1"))).toBe(1)
    expect(await statementsOf((ledger) => ledger.finishExecute("s3", "py", "c1", null))).toBe(1)
    for (let call = 2; call < 5; call++) {
      expect(await statementsOf((ledger) => ledger.beginExecute("s3", "py", `c${call}`))).toBe(1)
      expect(await statementsOf((ledger) => ledger.finishExecute("s3", "py", `c${call}`, `{"n":${call}}`))).toBe(1)
    }
    // Another runner moved the row on: the remembered one no longer matches, so the step reads it under a lock.
    await runner("runner-e").runPromise(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("s3", "py", "c5")))
    expect(await statementsOf((ledger) => ledger.beginExecute("s3", "py", "c6"))).toBeGreaterThan(1)
    expect(await statementsOf((ledger) => ledger.finishExecute("s3", "py", "c6", null))).toBe(1)
  }, 120_000)

  it("keeps a finished call's result through the one-statement path: replayed when delivered again, kept by later calls, cleared by a lost call's answer", async () => {
    const a = runner("runner-f")
    const b = runner("runner-g")
    const on = (runtime: ReturnType<typeof runner>) => <A, E>(step: (ledger: SessionLedgerService) => Effect.Effect<A, E>) =>
      runtime.runPromise(Effect.flatMap(SessionLedger, step))
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "py", "c1"))).toMatchObject({ _tag: "Run" })
    await on(a)((ledger) => ledger.finishExecute("s4", "py", "c1", `{"kept":1}`))
    // The same call again on its owner: its kept result, though the owner does not hold it in memory.
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "py", "c1"))).toEqual({ _tag: "Replay", result: `{"kept":1}`, next: undefined })
    // A later call's step leaves the kept result of the call done last alone.
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "py", "c2"))).toMatchObject({ _tag: "Run", notice: undefined })
    expect(await on(a)((ledger) => ledger.beginExecute("s4", "py", "c1"))).toEqual({ _tag: "Replay", result: `{"kept":1}`, next: undefined })
    // Runner b takes the session over while c2 was in flight on a, then gets c2 itself: lost, and its
    // answer is the done call now, without a result: delivered again, it is "already ran", not c3's result.
    expect(await on(b)((ledger) => ledger.beginExecute("s4", "py", "c3"))).toMatchObject({ _tag: "Run", notice: REHOMED_NOTICE })
    await on(b)((ledger) => ledger.finishExecute("s4", "py", "c3", `{"kept":3}`))
    expect(await on(b)((ledger) => ledger.beginExecute("s4", "py", "c2"))).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    expect(await on(b)((ledger) => ledger.beginExecute("s4", "py", "c2"))).toMatchObject({ _tag: "Answer", notice: ALREADY_RAN_NOTICE })
  }, 120_000)

  it("a call finished again replaces its kept result, though its owner's remembered row holds none", async () => {
    const a = runner("runner-h")
    const on = <A, E>(step: (ledger: SessionLedgerService) => Effect.Effect<A, E>) => a.runPromise(Effect.flatMap(SessionLedger, step))
    expect(await on((ledger) => ledger.beginExecute("s5", "py", "c1"))).toMatchObject({ _tag: "Run" })
    await on((ledger) => ledger.finishExecute("s5", "py", "c1", `{"kept":1}`))
    await on((ledger) => ledger.finishExecute("s5", "py", "c1", null))
    expect(await on((ledger) => ledger.row("s5"))).toMatchObject({ lanes: { py: { doneCall: "c1", doneResult: null } } })
  }, 120_000)

  it("reads rows of format 1 (from before the format column, or written by the previous release) as one lane of unknown language, writes format 2, and refuses a newer format with a sentence, writing nothing", async () => {
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
        sql.unsafe(`INSERT INTO veyyon_sessions (session_id, owner, owner_address, generation, done_call, done_result, version) VALUES
          ('old', 'gone', '127.0.0.1:1', 1, 'c0', '{"kept":0}', 3),
          ('busy', 'gone', '127.0.0.1:1', 4, 'b1', NULL, 7)`)
      )))
    const upgraded = database.track(ManagedRuntime.make(SessionLedger.layer("runner-new", "127.0.0.1:2").pipe(
      Layer.provideMerge(PgClient.layer({ url: Redacted.make(oldUrl), maxConnections: 2 }))
    )))
    const on = <A, E>(step: (ledger: SessionLedgerService) => Effect.Effect<A, E>) => upgraded.runPromise(Effect.flatMap(SessionLedger, step))
    const formats = () => oldSql.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ session_id: string; format: number }>`SELECT session_id, format FROM veyyon_sessions ORDER BY session_id`))
    expect(await on((ledger) => ledger.row("old"))).toMatchObject({ owner: "gone", lanes: { "": { doneCall: "c0", doneResult: `{"kept":0}` } } })
    expect(await formats()).toEqual([{ session_id: "busy", format: 1 }, { session_id: "old", format: 1 }])
    // A finished call of the old row delivered again, in any language: its kept result, and nothing written.
    expect(await on((ledger) => ledger.beginExecute("old", "js", "c0"))).toEqual({ _tag: "Replay", result: `{"kept":0}`, next: undefined })
    expect(await formats()).toEqual([{ session_id: "busy", format: 1 }, { session_id: "old", format: 1 }])
    // The previous release's runner died with b2 in flight: a new call runs (re-homed) and b2 is lost, whatever its language.
    await oldSql.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE veyyon_sessions SET inflight_call = 'b2', version = version + 1 WHERE session_id = 'busy'`))
    expect(await on((ledger) => ledger.beginExecute("busy", "py", "b3"))).toMatchObject({ _tag: "Run", notice: REHOMED_NOTICE })
    expect(await on((ledger) => ledger.beginExecute("busy", "rb", "b2"))).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    expect(await on((ledger) => ledger.beginExecute("fresh", "py", "c1"))).toMatchObject({ _tag: "Run" })
    expect(await formats()).toEqual([{ session_id: "busy", format: 2 }, { session_id: "fresh", format: 2 }, { session_id: "old", format: 1 }])
    expect(await on((ledger) => ledger.row("busy"))).toMatchObject({ generation: 5, lanes: { "": { doneCall: "b2", inflightCall: null, lostCall: null }, py: { inflightCall: "b3" } } })

    // A newer release wrote the row in a format this one does not read.
    await oldSql.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE veyyon_sessions SET format = 3, version = version + 1 WHERE session_id = 'fresh'`))
    const refused = await upgraded.runPromiseExit(Effect.flatMap(SessionLedger, (ledger) => ledger.beginExecute("fresh", "py", "c2")))
    expect(Exit.isFailure(refused) && String(refused.cause)).toContain(
      "the ledger row of session fresh is format 3, written by a newer release; this release reads formats up to 2"
    )
    const finished = await upgraded.runPromiseExit(Effect.flatMap(SessionLedger, (ledger) => ledger.finishExecute("fresh", "py", "c1", null)))
    expect(Exit.isFailure(finished)).toBe(true)
    const stored = () => oldSql.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT * FROM veyyon_sessions WHERE session_id = 'fresh'`))
    const before = await stored()
    expect(Exit.isFailure(await upgraded.runPromiseExit(Effect.flatMap(SessionLedger, (ledger) => ledger.row("fresh"))))).toBe(true)
    expect(await stored()).toEqual(before)
  }, 120_000)

  it("keeps each language's calls apart: two languages in flight at once, each finished with its own kept result, delivered again each gets its own", async () => {
    const a = runner("runner-h")
    const b = runner("runner-i")
    const on = (runtime: ReturnType<typeof runner>) => <A, E>(step: (ledger: SessionLedgerService) => Effect.Effect<A, E>) =>
      runtime.runPromise(Effect.flatMap(SessionLedger, step))
    expect(await on(a)((ledger) => ledger.beginExecute("s5", "py", "p1"))).toMatchObject({ _tag: "Run", notice: undefined })
    expect(await on(a)((ledger) => ledger.beginExecute("s5", "js", "j1"))).toMatchObject({ _tag: "Run", notice: undefined })
    await on(a)((ledger) => ledger.finishExecute("s5", "js", "j1", `{"js":1}`))
    await on(a)((ledger) => ledger.finishExecute("s5", "py", "p1", `{"py":1}`))
    expect(await on(a)((ledger) => ledger.beginExecute("s5", "js", "j1"))).toEqual({ _tag: "Replay", result: `{"js":1}`, next: undefined })
    expect(await on(a)((ledger) => ledger.beginExecute("s5", "py", "p1"))).toEqual({ _tag: "Replay", result: `{"py":1}`, next: undefined })
    // py runs p2 while js's j1 stays the done call of its lane; runner a dies; b answers p2 as lost and still replays j1.
    expect(await on(a)((ledger) => ledger.beginExecute("s5", "py", "p2"))).toMatchObject({ _tag: "Run" })
    expect(await on(b)((ledger) => ledger.beginExecute("s5", "py", "p2"))).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    expect(await on(b)((ledger) => ledger.beginExecute("s5", "js", "j1"))).toEqual({ _tag: "Replay", result: `{"js":1}`, next: undefined })
    expect(await on(b)((ledger) => ledger.row("s5"))).toMatchObject({
      owner: "runner-i",
      lanes: { py: { inflightCall: null, doneCall: "p2", doneResult: null }, js: { doneCall: "j1", doneResult: `{"js":1}` } }
    })
  }, 120_000)
})
