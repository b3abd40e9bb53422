/**
 * Waiting out a Postgres restart: a call failing because the server cannot be reached is
 * tried again until it succeeds or the window passes, then fails with a sentence naming
 * the database (never its password); any other failure fails at once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { ConnectionError, SqlError, SqlSyntaxError, UnknownError } from "effect/sql/SqlError"
import { describeDatabase, isOutage, waitOutOutage } from "../../src/cluster/DatabaseOutage.ts"

const refused = () => new SqlError({ reason: new ConnectionError({ cause: new Error("ECONNREFUSED"), message: "PgConnection: Failed to connect", operation: "connect" }) })
const withState = (code: string) => new SqlError({ reason: new UnknownError({ cause: Object.assign(new Error("server says"), { code }), message: "PgConnection: Query failed", operation: "query" }) })
const syntax = () => new SqlError({ reason: new SqlSyntaxError({ cause: new Error("syntax"), message: "bad query", operation: "query" }) })

/** A call that fails with `failures` in turn, then succeeds; counts its tries. */
const scripted = (failures: ReadonlyArray<SqlError>) => {
  let tries = 0
  const call = Effect.suspend(() => {
    const failure = failures[tries++]
    return failure === undefined ? Effect.succeed("answered") : Effect.fail(failure)
  })
  return { call, tries: () => tries }
}

describe("the cluster's database as errors name it", () => {
  it("names host, port and database, never the credentials", () => {
    expect(describeDatabase("postgres://veyyon:s3cret@10.0.0.5:5433/cluster")).toBe("the cluster's database (Postgres at 10.0.0.5:5433/cluster)")
    expect(describeDatabase("postgres://db.internal")).toBe("the cluster's database (Postgres at db.internal)")
    expect(describeDatabase("not a url")).toBe("the cluster's database (Postgres)")
    expect(describeDatabase("postgres://u:pw@h:1/d")).not.toContain("pw")
  })
})

describe("an outage", () => {
  it("is an unreachable server or one shutting down or starting up, not a query it refused", () => {
    expect(isOutage(refused())).toBe(true)
    expect(isOutage(withState("57P01"))).toBe(true)
    expect(isOutage(withState("57P02"))).toBe(true)
    expect(isOutage(withState("57P03"))).toBe(true)
    expect(isOutage(withState("57014"))).toBe(false)
    expect(isOutage(withState("23505"))).toBe(false)
    expect(isOutage(syntax())).toBe(false)
  })

  it.live("is waited out: the call is tried again until the database answers", () =>
    Effect.gen(function*() {
      const { call, tries } = scripted([refused(), withState("57P03"), refused()])
      expect(yield* waitOutOutage(call, "the cluster's database (Postgres at h:1/d)", "10 seconds")).toBe("answered")
      expect(tries()).toBe(4)
    }))

  it.live("fails once the window passed, with a sentence naming the database and the last failure", () =>
    Effect.gen(function*() {
      const { call, tries } = scripted(Array.from({ length: 1000 }, refused))
      const started = Date.now()
      const exit = yield* Effect.exit(waitOutOutage(call, "the cluster's database (Postgres at h:1/d)", "1200 millis"))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain(
        "the cluster's database (Postgres at h:1/d) could not be reached for 1s 200ms: PgConnection: Failed to connect"
      )
      expect(tries()).toBeGreaterThanOrEqual(2)
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000)
      expect(Date.now() - started).toBeLessThan(30_000)
    }))

  it.effect("does not retry a failure that is no outage", () =>
    Effect.gen(function*() {
      const { call, tries } = scripted([syntax()])
      const exit = yield* Effect.exit(waitOutOutage(call, "the cluster's database (Postgres at h:1/d)", "10 seconds"))
      expect(Exit.isFailure(exit) && String(exit.cause)).toContain("bad query")
      expect(tries()).toBe(1)
    }))
})
