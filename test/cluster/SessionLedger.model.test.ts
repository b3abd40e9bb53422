/**
 * The ledger in Postgres against its decision functions: random lives of one session (three
 * runners that begin, finish, release, end and crash, calls of two languages, calls
 * delivered again), each step
 * applied to the real ledger services (each incarnation with its own remembered rows,
 * writing one statement when it can) and to a reference row through the pure
 * `LedgerDecision` functions read-decide-write as one step. After every step the answer and
 * the stored row (kept result included) must be the reference's: the one-statement path
 * decides as the locked one would.
 */
import { describe, expect, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Arbitrary, Effect, ManagedRuntime, Redacted, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import {
  decideExecute,
  endedRow,
  finishedRow,
  inflightElsewhere,
  type LedgerRow,
  releasedRow
} from "../../src/cluster/LedgerDecision.ts"
import { readRow, type StoredRow } from "../../src/cluster/LedgerRowFormat.ts"
import { LEDGER_TABLE, SessionLedger, type SessionLedgerService } from "../../src/cluster/SessionLedger.ts"
import { postgresSkipReason, startPostgres, type TestPostgres } from "../support/postgres.ts"
import { titled } from "../support/skip.ts"

const skip = postgresSkipReason()

type Runner = "A" | "B" | "C"
type Which = "new" | "again" | "earlier"
type Step =
  | { readonly _tag: "deliver"; readonly runner: Runner; readonly which: Which; readonly awaitOwner: boolean; readonly language: string }
  | { readonly _tag: "finish"; readonly runner: Runner; readonly keep: boolean }
  | { readonly _tag: "release"; readonly runner: Runner }
  | { readonly _tag: "end" }
  | { readonly _tag: "crash"; readonly runner: Runner }

/** A as often as B and C together, so one runner's runs of steps (its one-statement path) are common. */
const RUNNERS = ["A", "A", "B", "C"] as const
const WHICH = ["new", "again", "again", "earlier"] as const
const int = (maximum: number) => Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum })))

/** Deliveries and finishes most often, as a session lives. */
const stepOf = ([kind, runner, which, flag, language]: readonly [number, number, number, boolean, number]): Step => {
  const r = RUNNERS[runner]!
  if (kind < 6) return { _tag: "deliver", runner: r, which: WHICH[which]!, awaitOwner: flag, language: language === 0 ? "py" : "js" }
  if (kind < 10) return { _tag: "finish", runner: r, keep: flag }
  if (kind === 10) return { _tag: "release", runner: r }
  if (kind === 11) return { _tag: "end" }
  return { _tag: "crash", runner: r }
}

const life = Arbitrary.array(Arbitrary.map(Arbitrary.all([int(12), int(3), int(3), Arbitrary.schema(Schema.Boolean), int(1)]), stepOf), { minLength: 1, maxLength: 40 })

const asRow = (stored: StoredRow): LedgerRow => {
  const read = readRow(stored)
  if (typeof read === "string") throw new Error(read)
  return read
}

/** What a step answers, in the terms both sides share (a decision's next row is the ledger's own business). */
const answerOf = (value: unknown): unknown => {
  if (value === undefined) return undefined
  const { _tag, notice, result, address } = value as { _tag: string; notice?: string; result?: string; address?: string }
  return { _tag, notice, result, address }
}

describe.skipIf(skip !== undefined)(titled("session ledger in Postgres against its decision functions", skip), () => {
  let pg: TestPostgres | undefined
  let runtime: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown> | undefined
  let sql: SqlClient.SqlClient
  let lives = 0

  beforeAll(async () => {
    pg = await startPostgres()
    runtime = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(pg.url), maxConnections: 4 }))
    sql = await runtime.runPromise(SqlClient.SqlClient.use(Effect.succeed))
  }, 180_000)

  afterAll(async () => {
    await runtime?.dispose()
    await pg?.stop()
  }, 60_000)

  it.effect.prop("every step answers and stores what the decision functions say", [life], ([steps]) =>
    Effect.gen(function*() {
      const sessionId = `life-${lives++}`
      const incarnations = { A: 0, B: 0, C: 0 }
      const ledgers = new Map<string, SessionLedgerService>()
      const ledgerOf = Effect.fnUntraced(function*(runner: Runner) {
        const me = `${runner}#${incarnations[runner]}`
        const known = ledgers.get(me)
        if (known !== undefined) return known
        const made = yield* SessionLedger.make(me, `${runner}:1`)
        ledgers.set(me, made)
        return made
      })
      let reference: LedgerRow | undefined
      let calls = 0
      const delivered: Array<string> = []
      const lastOf = new Map<Runner, string>()
      const languageOf = new Map<string, string>()

      for (const step of steps) {
        const ledger = yield* ledgerOf(step._tag === "end" ? "A" : step.runner)
        const me = ledger.incarnation
        let expected: unknown
        let actual: unknown
        switch (step._tag) {
          case "deliver": {
            const callId = step.which === "new" || delivered.length === 0
              ? `c${calls++}`
              : step.which === "again" ? delivered[delivered.length - 1]! : delivered[Math.max(0, delivered.length - 3)]!
            if (!delivered.includes(callId)) delivered.push(callId)
            if (!languageOf.has(callId)) languageOf.set(callId, step.language)
            const language = languageOf.get(callId)!
            lastOf.set(step.runner, callId)
            const elsewhere = step.awaitOwner ? inflightElsewhere(reference, me) : undefined
            if (elsewhere !== undefined) {
              expected = { _tag: "InflightElsewhere", address: elsewhere }
            } else {
              const decision = decideExecute(reference, sessionId, me, `${step.runner}:1`, language, callId)
              expected = decision
              reference = decision.next ?? reference
            }
            actual = yield* ledger.beginExecute(sessionId, language, callId, step.awaitOwner)
            break
          }
          case "finish": {
            const callId = lastOf.get(step.runner) ?? "never"
            const result = step.keep ? `{"call":"${callId}"}` : null
            const language = languageOf.get(callId) ?? "py"
            if (reference !== undefined && reference.owner === me) reference = finishedRow(reference, language, callId, result)
            actual = yield* ledger.finishExecute(sessionId, language, callId, result)
            break
          }
          case "release": {
            if (reference !== undefined) reference = releasedRow(reference, me)
            actual = yield* ledger.release(sessionId)
            break
          }
          case "end": {
            if (reference !== undefined) reference = endedRow(reference)
            actual = yield* ledger.end(sessionId)
            break
          }
          case "crash": {
            incarnations[step.runner]++
            break
          }
        }
        expect(answerOf(actual), JSON.stringify(step)).toEqual(answerOf(expected))
        const stored = yield* sql<StoredRow>`SELECT * FROM ${sql(LEDGER_TABLE)} WHERE session_id = ${sessionId}`
        expect(stored.length === 0 ? undefined : asRow(stored[0]!), JSON.stringify(step)).toEqual(reference)
      }
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql)), { timeout: 120_000, arbitrary: { runs: 100 } })
})
