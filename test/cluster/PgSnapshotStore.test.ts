/**
 * Session snapshots in the cluster's Postgres: written only by the session's owner at the
 * generation it holds, so an old owner finishing a cell during a hand-off cannot overwrite
 * what the new owner saved; read by any runner; sealed with a key derived from the cluster
 * secret (never the secret), so a snapshot sealed under another secret is refused.
 */
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "vitest"
import { Effect, Layer, ManagedRuntime, Redacted, Result } from "effect"
import { makePgSnapshotStore, snapshotKeyOf } from "../../src/cluster/PgSnapshotStore.ts"
import { SessionLedger } from "../../src/cluster/SessionLedger.ts"
import { openMeta, payloadDigest, sealMeta, SNAPSHOT_FORMAT } from "../../src/services/snapshots/SnapshotSeal.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { titled } from "../support/skip.ts"
import { postgresForFile } from "./database.ts"

const skip = postgresSkipReason()
const DAY = 24 * 60 * 60 * 1000

describe.skipIf(skip !== undefined)(titled("session snapshots in Postgres", skip), () => {
  const database = postgresForFile()
  const key = snapshotKeyOf("a cluster secret of at least thirty-two characters")
  const runner = (incarnation: string) => {
    const sql = PgClient.layer({ url: Redacted.make(database.url()), maxConnections: 4 })
    return database.track(ManagedRuntime.make(SessionLedger.layer(incarnation, `127.0.0.1:${incarnation.length}`).pipe(Layer.provideMerge(sql))))
  }
  const sealed = (sessionId: string, text: string) => {
    const payload = new TextEncoder().encode(text)
    const meta = {
      format: SNAPSHOT_FORMAT as typeof SNAPSHOT_FORMAT, sessionId, language: "py", asOfCell: 1, cellTitle: text, digest: payloadDigest(payload),
      bytes: payload.length, names: ["x"], skipped: [], savedAt: 0
    }
    return { sealed: sealMeta(key, meta), digest: meta.digest, payload }
  }
  const withStore = <A>(runtime: ReturnType<typeof runner>, use: (store: Effect.Success<ReturnType<typeof makePgSnapshotStore>>, ledger: SessionLedger["Service"]) => Effect.Effect<A, unknown>) =>
    runtime.runPromise(Effect.gen(function*() {
      const store = yield* makePgSnapshotStore(key, DAY)
      return yield* use(store, yield* SessionLedger)
    }))

  it("keeps the owner's snapshot, refuses a runner that does not own the session, and fences the old owner after a take-over", async () => {
    const a = runner("runner-a")
    const b = runner("runner-b")
    await withStore(a, (store, ledger) =>
      Effect.gen(function*() {
        yield* ledger.beginExecute("s1", "py", "c1")
        const one = sealed("s1", "one")
        yield* store.write("s1", "py", one.sealed, one.digest, one.payload)
      }))
    const refused = await withStore(b, (store) => Effect.flip(Effect.suspend(() => {
      const two = sealed("s1", "from b")
      return store.write("s1", "py", two.sealed, two.digest, two.payload)
    })))
    expect(refused.message).toContain("this runner does not own the session")
    await withStore(b, (store, ledger) =>
      Effect.gen(function*() {
        yield* ledger.beginExecute("s1", "py", "c2")
        const read = yield* store.read("s1", "py")
        expect(Buffer.from(read!.payload).toString()).toBe("one")
        expect(Result.isSuccess(openMeta(key, read!.sealed, "s1", "py"))).toBe(true)
        const three = sealed("s1", "three")
        yield* store.write("s1", "py", three.sealed, three.digest, three.payload)
      }))
    const late = await withStore(a, (store) => Effect.flip(Effect.suspend(() => {
      const old = sealed("s1", "late from a")
      return store.write("s1", "py", old.sealed, old.digest, old.payload)
    })))
    expect(late.message).toMatch(/moved to another runner/)
    const kept = await withStore(b, (store) => store.read("s1", "py"))
    expect(Buffer.from(kept!.payload).toString()).toBe("three")
    await withStore(b, (store) => store.remove("s1"))
    expect(await withStore(b, (store) => store.read("s1", "py"))).toBeUndefined()
  }, 120_000)

  it("derives its key from the secret: another secret's seal is refused", () => {
    const other = snapshotKeyOf("another cluster secret of thirty-two characters!")
    expect(Buffer.from(other).equals(Buffer.from(key))).toBe(false)
    expect(Buffer.from(key).toString()).not.toContain("secret")
    const { sealed: sealedHere } = sealed("s2", "x")
    expect(Result.isFailure(openMeta(other, sealedHere, "s2", "py"))).toBe(true)
  })
})
