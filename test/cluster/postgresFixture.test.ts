/**
 * The private PostgreSQL the cluster tests run against: it answers `@effect/sql-pg` with
 * the URL's password, refuses a wrong one, restarts on its data and port (`down`, `up`),
 * and `stop` ends the server and removes its directory.
 */
import * as NodeFs from "node:fs"
import { PgClient } from "@effect/sql-pg"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import * as net from "node:net"
import { answersQuery, postgresSkipReason, startPostgres, type TestPostgres } from "../support/postgres.ts"
import { titled } from "../support/skip.ts"

const skip = postgresSkipReason()

const query = (url: string, sql: string) =>
  Effect.gen(function*() {
    const client = yield* SqlClient.SqlClient
    return yield* client.unsafe<Record<string, unknown>>(sql)
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })), Effect.scoped)

describe.skipIf(skip !== undefined)(titled("test PostgreSQL", skip), () => {
  let pg: TestPostgres
  beforeAll(async () => {
    pg = await startPostgres()
  })
  afterAll(async () => {
    await pg?.stop()
  })

  it.effect("answers queries with the URL's credentials", () =>
    Effect.gen(function*() {
      const rows = yield* query(pg.url, "select 41 + 1 as answer")
      expect(rows[0]?.answer).toBe(42)
    }))

  it.effect("refuses a wrong password", () =>
    Effect.gen(function*() {
      const wrong = pg.url.replace(/:([0-9a-f]+)@/, ":wrong@")
      const exit = yield* Effect.exit(query(wrong, "select 1"))
      expect(exit._tag).toBe("Failure")
    }))

  it("counts as ready only a server that answers a query, not a port that accepts a connection", async () => {
    const listener = net.createServer((socket) => socket.destroy())
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve))
    try {
      const port = (listener.address() as net.AddressInfo).port
      expect(await answersQuery(port, "anything")).toBe(false)
      expect(await answersQuery(pg.port, new URL(pg.url).password)).toBe(true)
    } finally {
      await new Promise((resolve) => listener.close(resolve))
    }
  })

  it("down stops the server keeping its data, up starts it again on the same port with the data", async () => {
    await Effect.runPromise(query(pg.url, "CREATE TABLE kept (v int)"))
    await Effect.runPromise(query(pg.url, "INSERT INTO kept VALUES (7)"))
    await pg.down()
    expect(await answersQuery(pg.port, new URL(pg.url).password)).toBe(false)
    await pg.up()
    expect(await answersQuery(pg.port, new URL(pg.url).password)).toBe(true)
    const rows = await Effect.runPromise(query(pg.url, "SELECT v FROM kept"))
    expect(rows).toEqual([{ v: 7 }])
  }, 180_000)

  it("stop ends the server and removes its directory", async () => {
    const other = await startPostgres()
    expect(NodeFs.statSync(other.dir).mode & 0o777).toBe(0o700)
    await other.stop()
    const exit = await Effect.runPromiseExit(query(other.url, "select 1"))
    expect(exit._tag).toBe("Failure")
    expect(NodeFs.existsSync(other.dir)).toBe(false)
  })
})
