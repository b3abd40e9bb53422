/**
 * Artifacts from anywhere against a real Postgres: what a runner's cell wrote to its private
 * store is published and then read, byte for byte, by a client and by another runner (each
 * with its own private directory); publishing is idempotent and bounded; hostile names and
 * planted links are refused; retention (size and age) holds in Postgres as on disk.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "vitest"
import { Deferred, Effect, Exit, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { ArtifactPublisher, type ArtifactPublisherOptions } from "../../src/cluster/ArtifactPublisher.ts"
import { ARTIFACT_CHUNK_BYTES } from "../../src/cluster/PgArtifactRows.ts"
import { PgKvStoreLive } from "../../src/cluster/PgKvStore.ts"
import { PgArtifactStoreLive } from "../../src/cluster/PgArtifactStore.ts"
import { SESSION_ID_MAX } from "../../src/cluster/PgSchema.ts"
import { readArtifact } from "../../src/mcp/ArtifactResources.ts"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import { ArtifactStore, type ArtifactStoreService, sessionArtifactsDir } from "../../src/services/output/ArtifactStore.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { Settings } from "../../src/services/config/Settings.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { tempDir } from "../support/tempDirs.ts"
import { postgresForFile } from "./database.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()

const skip = postgresSkipReason()

const privateDir = () => fs.realpathSync(tempDir("veyyon-cluster-art-"))

const sqlLayer = (url: string) => PgClient.layer({ url: Redacted.make(url), maxConnections: 4 })
const settingsLayer = (artifactsDir: string, maxSessionMb = 256, maxAgeHours = 168) =>
  Settings.layer({ artifactsDir, artifacts: { maxSessionMb, maxAgeHours } })

/** A runner: its own private store (today's ArtifactStore.Live) and the publisher (with its own bounds when given). */
const runnerRuntime = (url: string, maxSessionMb?: number, maxAgeHours?: number, publisher: ArtifactPublisherOptions = {}) => {
  const dir = privateDir()
  const base = Layer.mergeAll(settingsLayer(dir, maxSessionMb, maxAgeHours), sqlLayer(url))
  return ManagedRuntime.make(ArtifactPublisher.layerWith(publisher).pipe(Layer.provideMerge(ArtifactStore.Live), Layer.provideMerge(base)))
}

/** A client (or a runner reading): the Postgres-backed store over its own private directory. */
const clientRuntime = (url: string, maxSessionMb?: number, maxAgeHours?: number) => {
  const dir = privateDir()
  return ManagedRuntime.make(PgArtifactStoreLive.pipe(Layer.provideMerge(Layer.mergeAll(settingsLayer(dir, maxSessionMb, maxAgeHours), sqlLayer(url)))))
}

/** Writes artifacts to session `sessionId` of the runner's private store (opened once, as a cell does); their ids. */
const writeArtifacts = (sessionId: string, items: ReadonlyArray<string | Uint8Array>, kind = "out", extension = "txt") =>
  Effect.gen(function*() {
    const root = yield* ArtifactStore
    const store = yield* root.forSession(sessionId)
    const ids: Array<string> = []
    for (const data of items) {
      const writer = yield* store.create(kind, extension)
      yield* writer.append(data)
      yield* writer.close
      ids.push(writer.id)
    }
    return ids
  }).pipe(Effect.scoped)

/** Writes one artifact; its id. */
const writeArtifact = (sessionId: string, data: string | Uint8Array, kind = "out", extension = "txt") =>
  Effect.map(writeArtifacts(sessionId, [data], kind, extension), (ids) => ids[0]!)

/** The runner's file of an artifact, found without opening (and so pruning) the session's store. */
const localFile = (sessionId: string, id: string) =>
  Effect.map(ArtifactStore, (root) => path.join(sessionArtifactsDir(root.dir, sessionId), id))

const sessionOf = (sessionId: string) => Effect.flatMap(ArtifactStore, (root) => root.forSession(sessionId))

describe.skipIf(skip !== undefined)(titled("artifacts in Postgres", skip), () => {
  const database = postgresForFile()
  const track = database.track

  it("publishes a cell's artifacts on one runner; the client and another runner read them byte for byte", async () => {
    const runner = track(runnerRuntime(database.url()))
    const client = track(clientRuntime(database.url()))
    const other = track(clientRuntime(database.url()))
    const text = "line\n".repeat(1000) + "ü✓ done\n"
    const binary = randomBytes(2 * ARTIFACT_CHUNK_BYTES + 12345)
    const textId = await runner.runPromise(writeArtifact("s1", text))
    const binId = await runner.runPromise(writeArtifact("s1", binary, "img", "png"))
    const report = await runner.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("s1", [textId, binId])))
    expect(report).toEqual({ published: [textId, binId], skipped: [], pruned: [] })

    const read = await client.runPromise(Effect.flatMap(sessionOf("s1"), (store) => store.read(textId)))
    expect(read).toBe(text)
    const bytes = await other.runPromise(Effect.flatMap(sessionOf("s1"), (store) => store.readBytes(binId)))
    expect(Buffer.from(bytes).equals(binary)).toBe(true)
    const listed = await client.runPromise(Effect.flatMap(sessionOf("s1"), (store) => store.list))
    expect(listed.map((entry) => [entry.id, entry.size]).sort()).toEqual([[binId, binary.length], [textId, Buffer.byteLength(text)]].sort())

    const file = await other.runPromise(Effect.flatMap(sessionOf("s1"), (store) => store.resolve(`artifact://${textId}`)))
    expect(fs.readFileSync(file, "utf8")).toBe(text)
    expect(fs.statSync(file).mode & 0o777).toBe(0o600)
    expect(fs.readdirSync(path.dirname(file)).filter((name) => name.endsWith(".tmp"))).toEqual([])

    const mcp = await client.runPromise(Effect.flatMap(sessionOf("s1"), (store) => readArtifact(store, `artifact://${textId}`)))
    expect(mcp.contents[0]).toMatchObject({ uri: `artifact://${textId}`, mimeType: "text/plain", text })
    const other_session = await client.runPromiseExit(Effect.flatMap(sessionOf("s2"), (store) => store.read(textId)))
    expect(Exit.isFailure(other_session) && String(other_session.cause)).toContain("ArtifactNotFound")
  }, 120_000)

  it("bounds a publish that Postgres does not take, with a clear error, and publishes once it can", async () => {
    const runner = track(runnerRuntime(database.url(), undefined, undefined, { transferTimeout: "300 millis" }))
    const holder = track(clientRuntime(database.url()))
    const id = await runner.runPromise(writeArtifact("stuck", "payload"))
    const locked = Effect.runSync(Deferred.make<void>())
    const release = Effect.runSync(Deferred.make<void>())
    const holding = holder.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`LOCK TABLE veyyon_artifact IN ACCESS EXCLUSIVE MODE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(release)
      }))))
    try {
      await Effect.runPromise(Deferred.await(locked))
      const stuck = await runner.runPromiseExit(Effect.flatMap(ArtifactPublisher, (p) => p.publish("stuck", [id])))
      expect(Exit.isFailure(stuck) && String(stuck.cause)).toContain("Postgres did not take them within 300ms")
    } finally {
      await Effect.runPromise(Deferred.succeed(release, undefined))
      await holding
    }
    const report = await runner.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("stuck", [id])))
    expect(report.published).toEqual([id])
    expect(await holder.runPromise(Effect.flatMap(sessionOf("stuck"), (store) => store.read(id)))).toBe("payload")
  }, 120_000)

  it("publishes each artifact once, everything not yet there when no ids are given, and refuses hostile names and planted links", async () => {
    const runner = track(runnerRuntime(database.url()))
    const first = await runner.runPromise(writeArtifact("s3", "one"))
    const publish = (ids?: ReadonlyArray<string>) => runner.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("s3", ids)))
    expect((await publish([first])).published).toEqual([first])
    expect((await publish([first])).published).toEqual([])
    const second = await runner.runPromise(writeArtifact("s3", "two"))
    const dir = path.dirname(await runner.runPromise(localFile("s3", first)))
    const planted = "out-zzzzzz-0badf00d.txt"
    fs.symlinkSync("/etc/passwd", path.join(dir, planted))
    const all = await publish()
    expect(all.published).toEqual([second])
    const hostile = await publish(["../../etc/passwd", planted, "out-aaaaaa-00000000.txt"])
    expect(hostile.published).toEqual([])
    expect(hostile.skipped.map((s) => s.id)).toEqual(["../../etc/passwd", planted, "out-aaaaaa-00000000.txt"])
    expect(hostile.skipped[0]!.reason).toContain("not an artifact id")
    expect(hostile.skipped[1]!.reason).toContain("symbolic link")
    expect(hostile.skipped[2]!.reason).toContain("cannot read the runner's copy")

    const long = await runner.runPromiseExit(Effect.flatMap(ArtifactPublisher, (p) => p.publish("s".repeat(SESSION_ID_MAX + 1))))
    expect(Exit.isFailure(long) && String(long.cause)).toContain("session id is longer than 1024 bytes")

    const client = track(clientRuntime(database.url()))
    const bad = await client.runPromiseExit(Effect.flatMap(sessionOf("s3"), (store) => store.read("../x")))
    expect(Exit.isFailure(bad) && String(bad.cause)).toContain("InvalidArtifactId")
    const missing = await client.runPromiseExit(Effect.flatMap(sessionOf("s3"), (store) => store.resolve(`artifact://${planted}`)))
    expect(Exit.isFailure(missing) && String(missing.cause)).toContain("ArtifactNotFound")
  }, 120_000)

  it("keeps a session within its budget in Postgres (oldest first, the newest stays) and leaves out one artifact over it", async () => {
    const runner = track(runnerRuntime(database.url(), 1))
    const client = track(clientRuntime(database.url(), 1))
    const ids = await runner.runPromise(writeArtifacts("s4", Array.from({ length: 3 }, () => "x".repeat(400 * 1024))))
    for (const [i, id] of ids.entries()) {
      const when = new Date(Date.now() - (10 - i) * 60_000)
      fs.utimesSync(await runner.runPromise(localFile("s4", id)), when, when)
    }
    const report = await runner.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("s4", ids)))
    expect(report.published).toEqual(ids)
    expect(report.pruned).toEqual([ids[0]])
    const huge = await runner.runPromise(writeArtifact("s4", "y".repeat(1024 * 1024 + 1)))
    const over = await runner.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("s4", [huge])))
    expect(over.published).toEqual([])
    expect(over.skipped[0]!.reason).toContain("over the session's 1048576-byte artifacts budget")
    const listed = await client.runPromise(Effect.flatMap(sessionOf("s4"), (store) => store.list))
    expect(listed.map((entry) => entry.id)).toEqual([ids[1], ids[2]])
  }, 120_000)

  it("drops artifacts past the age limit: at publish for the session, and for every session when a store opens", async () => {
    const runner = track(runnerRuntime(database.url(), 256, 1))
    const [old, fresh] = await runner.runPromise(writeArtifacts("s5", ["old", "fresh"]))
    const file = await runner.runPromise(localFile("s5", old!))
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000)
    fs.utimesSync(file, twoHoursAgo, twoHoursAgo)
    const report = await runner.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("s5", [old, fresh])))
    expect(report).toEqual({ published: [old, fresh], skipped: [], pruned: [old] })

    const seeded = track(runnerRuntime(database.url()))
    const elsewhere = await seeded.runPromise(writeArtifact("s6", "aged elsewhere"))
    await seeded.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("s6", [elsewhere])))
    await seeded.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE veyyon_artifact SET mtime_ms = mtime_ms - ${3 * 3600_000} WHERE id = ${elsewhere}`))
    const client = track(clientRuntime(database.url(), 256, 1))
    const store: ArtifactStoreService = await client.runPromise(sessionOf("s6"))
    expect(await client.runPromise(store.list)).toEqual([])
    const chunks = await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM veyyon_artifact_chunk WHERE id = ${elsewhere}`))
    expect(chunks[0]!.n).toBe(0)
  }, 120_000)

  it.skipIf(!integrationEnabled() || python === undefined)(titled("a runner wired for the cluster: a cell's kv goes to Postgres, its truncated output is published and read in full by the client", skipReason(integrationOff(), python === undefined && "no python3 found")), async () => {
    const runnerDir = privateDir()
    const runner = track(ManagedRuntime.make(
      ArtifactPublisher.layer.pipe(
        Layer.provideMerge(
          evalLayer({ env: false, settings: { artifactsDir: runnerDir, output: { maxBytes: 2000 }, python: { interpreter: python! } } }).pipe(Layer.provide(PgKvStoreLive))
        ),
        Layer.provideMerge(sqlLayer(database.url()))
      )
    ))
    const client = track(clientRuntime(database.url()))
    const result = await runner.runPromise(Effect.flatMap(EvalTool, (tool) =>
      tool.run({ language: "py", code: "kv.set('rows', 5000)\nfor i in range(5000):\n    print('row', i)" }, { sessionId: "cell", cwd: process.cwd() })))
    expect(result.artifactIds.length).toBe(1)
    const report = await runner.runPromise(Effect.flatMap(ArtifactPublisher, (p) => p.publish("cell", result.artifactIds)))
    expect(report.published).toEqual(result.artifactIds)
    const full = await client.runPromise(Effect.flatMap(sessionOf("cell"), (store) => store.read(result.artifactIds[0]!)))
    expect(full).toBe(Array.from({ length: 5000 }, (_, i) => `row ${i}\n`).join(""))
    const kv = await client.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ value: string }>`SELECT value FROM veyyon_kv WHERE session_id = 'cell' AND key = 'rows'`))
    expect(kv).toEqual([{ value: "5000" }])
  }, 120_000)
})
