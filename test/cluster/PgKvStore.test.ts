/**
 * kv in Postgres against a real server: the file store's API and limits, each key replaced
 * atomically, and the 4 MiB limit held when two separate processes (and two separate
 * clients in this process, standing for two runners) write one session at once, and a
 * write and a read made while the server restarts done once it is back.
 */
import { spawn } from "node:child_process"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Cause, Deferred, Effect, Exit, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { pgKvStoreLayer, PgKvStoreLive, type PgKvStoreOptions } from "../../src/cluster/PgKvStore.ts"
import { SESSION_ID_MAX } from "../../src/cluster/PgSchema.ts"
import { KV_READS_ENV, KV_STORE_MAX, KV_VALUE_MAX, kvEntryBytes, KvStore } from "../../src/services/storage/KvStore.ts"
import { postgresSkipReason, startPostgres, type TestPostgres } from "../support/postgres.ts"
import { titled } from "../support/skip.ts"

const skip = postgresSkipReason()

const root = path.resolve(import.meta.dirname, "..", "..")

/** A "runner": its own connection pool and its own store on the shared database. */
const runnerRuntime = (url: string, options?: PgKvStoreOptions) =>
  ManagedRuntime.make((options === undefined ? PgKvStoreLive : pgKvStoreLayer(options)).pipe(
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }))
  ))

type Runner = ReturnType<typeof runnerRuntime>

/** Runs a writer process; resolves with its summary line. */
const writerProcess = (url: string, session: string, name: string, rounds: number, valueBytes: number) => {
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/pg-kv-writer.ts", url, session, name, String(rounds), String(valueBytes)], {
    cwd: root,
    stdio: ["pipe", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
  const ready = new Promise<void>((resolve, reject) => {
    const check = () => (stdout.startsWith("ready\n") ? resolve() : undefined)
    child.stdout.on("data", check)
    child.once("exit", (code) => reject(new Error(`writer ${name} exited (${code}) before it was ready: ${stderr}`)))
  })
  const done = new Promise<{ ok: number; full: number }>((resolve, reject) =>
    child.once("exit", (code) =>
      code === 0 ? resolve(JSON.parse(stdout.split("\n")[1]!) as { ok: number; full: number }) : reject(new Error(`writer ${name} failed (${code}): ${stderr}`))))
  return { child, ready, done, go: () => child.stdin.end("go\n") }
}

describe.skipIf(skip !== undefined)(titled("kv in Postgres", skip), () => {
  let pg: TestPostgres | undefined
  let one: Runner
  let two: Runner
  const children: Array<ReturnType<typeof spawn>> = []

  beforeAll(async () => {
    pg = await startPostgres()
    one = runnerRuntime(pg.url)
    two = runnerRuntime(pg.url)
    await Promise.all([one.runPromise(KvStore), two.runPromise(KvStore)])
  }, 180_000)

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    await one?.dispose()
    await two?.dispose()
    await pg?.stop()
  }, 60_000)

  const kv = <A, E>(runner: Runner, use: (store: KvStore["Service"]) => Effect.Effect<A, E>) =>
    runner.runPromise(Effect.flatMap(KvStore, use))
  const kvExit = <A, E>(runner: Runner, use: (store: KvStore["Service"]) => Effect.Effect<A, E>) =>
    runner.runPromiseExit(Effect.flatMap(KvStore, use))
  const refusal = async <A>(runner: Runner, use: (store: KvStore["Service"]) => Effect.Effect<A, unknown>) => {
    const exit = await kvExit(runner, use)
    const only = Exit.isFailure(exit) && exit.cause.reasons.length === 1 ? exit.cause.reasons[0] : undefined
    if (only === undefined || !Cause.isFailReason(only)) throw new Error(`expected a refusal, got ${JSON.stringify(exit)}`)
    return only.error as { name: string; reason?: string; message: string }
  }

  it("shares one store between two runners: what one writes the other reads, the value's JSON text as written", async () => {
    const s = "shared"
    expect(await kv(one, (store) => Effect.succeed(store.spaceOf(s, "/nowhere/at/all")))).toBe(s)
    expect(await kv(one, (store) => Effect.succeed(store.kernelEnv))).toEqual({ [KV_READS_ENV]: "host" })
    await kv(one, (store) => store.set(s, "n", "123456789012345678901234567890"))
    await kv(two, (store) => store.set(s, "é✓", `{"a":[1,2.5,null]}`))
    expect(await kv(two, (store) => store.get(s, "n"))).toBe("123456789012345678901234567890")
    expect(await kv(one, (store) => store.get(s, "é✓"))).toBe(`{"a":[1,2.5,null]}`)
    expect(await kv(one, (store) => store.get(s, "missing"))).toBeUndefined()
    expect(await kv(one, (store) => store.get("another-session", "n"))).toBeUndefined()
    expect(await kv(two, (store) => store.size(s))).toBe(
      kvEntryBytes("n", "123456789012345678901234567890").length + kvEntryBytes("é✓", `{"a":[1,2.5,null]}`).length
    )
    expect(await kv(two, (store) => store.delete(s, "n"))).toBe(true)
    expect(await kv(one, (store) => store.delete(s, "n"))).toBe(false)
    expect(await kv(one, (store) => store.list(s))).toEqual(["é✓"])
  })

  it("answers the kv bridge method as the preludes expect: set, get, list by code point, delete", async () => {
    const s = "bridge"
    const answer = (params: unknown) => kv(one, (store) => store.answer(s, params))
    for (const key of ["b", "a", "\u{1F600}", "\uFFFD"]) expect(await answer({ op: "set", key, value: "[1]" })).toBeNull()
    expect(await answer({ op: "list" })).toEqual(["a", "b", "\uFFFD", "\u{1F600}"])
    expect(await answer({ op: "get", key: "a" })).toBe("[1]")
    expect(await answer({ op: "get", key: "zz" })).toBeNull()
    await answer({ op: "set", key: "null", value: "null" })
    expect(await answer({ op: "get", key: "null" })).toBe("null")
    expect(await answer({ op: "delete", key: "a" })).toBe(true)
    expect(await answer({ op: "delete", key: "a" })).toBe(false)
    for (const [params, text] of [
      [{ op: "rename", key: "a" }, "unknown kv operation"],
      [{ op: "get", key: "a/b" }, 'may not contain "/"'],
      [{ op: "set", key: "a", value: 1 }, "JSON text"],
      [null, "unknown kv operation"]
    ] as const) {
      const refused = await refusal(one, (store) => store.answer(s, params))
      expect(refused).toMatchObject({ name: "KvInvalid" })
      expect(refused.message).toContain(text)
    }
  })

  it("refuses bad keys, values that are not JSON or over 256 KiB, a session over 4 MiB and an over-long session id", async () => {
    const s = "limits"
    expect((await refusal(one, (store) => store.set(s, "a\\b", "1"))).name).toBe("KvInvalid")
    expect((await refusal(one, (store) => store.set(s, "", "1"))).reason).toContain("1 to 256 characters")
    expect((await refusal(one, (store) => store.set(s, "k".repeat(257), "1"))).reason).toContain("this one has 257")
    expect((await refusal(one, (store) => store.set(s, "k\0", "1"))).reason).toContain("NUL")
    expect((await refusal(one, (store) => store.set(s, "k", "{nope"))).reason).toContain("not valid JSON")
    expect((await refusal(one, (store) => store.set(s, "k", JSON.stringify("x".repeat(KV_VALUE_MAX))))).reason).toContain("256 KiB")
    expect((await refusal(one, (store) => store.set("s".repeat(SESSION_ID_MAX + 1), "k", "1"))).reason).toContain("session id is longer")
    const big = JSON.stringify("x".repeat(KV_VALUE_MAX - 10))
    for (let i = 0; i < 15; i++) await kv(i % 2 === 0 ? one : two, (store) => store.set(s, `k${i}`, big))
    const full = await refusal(two, (store) => store.set(s, "k15", big))
    expect(full.name).toBe("KvStoreFull")
    expect(full.reason).toContain("kv store is full")
    await kv(one, (store) => store.set(s, "k3", big))
    await kv(one, (store) => store.set(s, "k3", JSON.stringify("replaced")))
    await kv(two, (store) => store.set(s, "k15", big))
    expect(await kv(one, (store) => store.size(s))).toBeLessThanOrEqual(KV_STORE_MAX)
    expect(await kv(one, (store) => store.get(s, "k3"))).toBe(`"replaced"`)
  })

  it("holds the 4 MiB limit exactly when two processes write one session at once", async () => {
    const s = "race-processes"
    const valueBytes = 50 * 1024
    const writers = ["a", "b"].map((name) => writerProcess(pg!.url, s, name, 60, valueBytes))
    children.push(...writers.map((w) => w.child))
    await Promise.all(writers.map((w) => w.ready))
    for (const writer of writers) writer.go()
    const [a, b] = await Promise.all(writers.map((w) => w.done))
    const entry = kvEntryBytes("a-10", JSON.stringify("a".repeat(valueBytes))).length
    const fits = Math.floor(KV_STORE_MAX / entry)
    expect(a!.ok + a!.full).toBe(60)
    expect(b!.ok + b!.full).toBe(60)
    expect(a!.ok + b!.ok).toBe(fits)
    const keys = await kv(one, (store) => store.list(s))
    expect(keys.length).toBe(fits)
    const bytes = keys.reduce((sum, key) => sum + kvEntryBytes(key, JSON.stringify(key[0]!.repeat(valueBytes))).length, 0)
    const counted = await one.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ total: number; usage: number }>`SELECT (SELECT COALESCE(SUM(bytes), 0)::float8 FROM veyyon_kv WHERE session_id = ${s}) AS total,
        (SELECT bytes::float8 FROM veyyon_kv_usage WHERE session_id = ${s}) AS usage`))
    expect(counted[0]).toEqual({ total: bytes, usage: bytes })
    expect(bytes).toBeLessThanOrEqual(KV_STORE_MAX)
  }, 120_000)

  it("replaces one key atomically under concurrent writers of two runners, keeping the running total right", async () => {
    const s = "race-one-key"
    const values = Array.from({ length: 40 }, (_, i) => JSON.stringify({ writer: i, pad: "p".repeat((i * 997) % 5000) }))
    await Promise.all(values.map((value, i) => kv(i % 2 === 0 ? one : two, (store) => store.set(s, "k", value))))
    const stored = await kv(two, (store) => store.get(s, "k"))
    expect(values).toContain(stored)
    expect(await kv(one, (store) => store.size(s))).toBe(kvEntryBytes("k", stored!).length)
  })

  it("bounds a write that waits on another writer's lock, and any call that does not answer, with a clear error", async () => {
    const s = "stuck"
    await kv(two, (store) => store.set(s, "k", "1"))
    const locked = Effect.runSync(Deferred.make<void>())
    const release = Effect.runSync(Deferred.make<void>())
    const holder = two.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT bytes FROM veyyon_kv_usage WHERE session_id = ${s} FOR UPDATE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      }))))
    const lockBound = runnerRuntime(pg!.url, { lockTimeout: "300 millis" })
    const callBound = runnerRuntime(pg!.url, { lockTimeout: "10 minutes", operationTimeout: "300 millis" })
    try {
      await Effect.runPromise(Deferred.await(locked))
      const lockRefusal = await refusal(lockBound, (store) => store.set(s, "k", "2"))
      expect(lockRefusal.name).toBe("KvWriteFailed")
      expect(lockRefusal.reason).toContain("lock timeout")
      const callRefusal = await refusal(callBound, (store) => store.delete(s, "k"))
      expect(callRefusal).toMatchObject({ name: "KvWriteFailed", reason: "the cluster's kv store (Postgres) did not answer within 300ms" })
      expect(await kv(lockBound, (store) => store.get(s, "k"))).toBe("1")
    } finally {
      await Effect.runPromise(Deferred.succeed(release, undefined))
      await holder
    }
    await kv(lockBound, (store) => store.set(s, "k", "3"))
    expect(await kv(callBound, (store) => store.get(s, "k"))).toBe("3")
    await lockBound.dispose()
    await callBound.dispose()
  }, 120_000)

  it("rides out a Postgres restart: a write and a read made while the server is down are done once it is back", async () => {
    const s = "restart"
    await kv(one, (store) => store.set(s, "before", "1"))
    await pg!.down()
    const written = kvExit(one, (store) => store.set(s, "during", "2"))
    const read = kvExit(two, (store) => store.list(s))
    await new Promise((resolve) => setTimeout(resolve, 1500))
    await pg!.up()
    expect(await written).toMatchObject({ _tag: "Success" })
    expect(Exit.isSuccess(await read)).toBe(true)
    expect(await kv(two, (store) => store.list(s))).toEqual(["before", "during"])
    expect(await kv(one, (store) => store.size(s))).toBe(kvEntryBytes("before", "1").length + kvEntryBytes("during", "2").length)
  }, 120_000)
})
