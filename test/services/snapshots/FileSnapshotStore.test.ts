/**
 * The file store: snapshots in a private directory, the key private to the install, writes
 * that leave the previous snapshot whole when interrupted, removal by session and by age.
 */
import * as NodeFs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { loadOrCreateKey, makeFileSnapshotStore } from "../../../src/services/snapshots/FileSnapshotStore.ts"
import { payloadDigest } from "../../../src/services/snapshots/SnapshotSeal.ts"

const roots: Array<string> = []
const tempRoot = () => {
  const dir = NodeFs.mkdtempSync(path.join(os.tmpdir(), "veyyon-snapstore-"))
  roots.push(dir)
  return path.join(dir, "snapshots")
}
afterEach(() => {
  for (const dir of roots.splice(0)) NodeFs.rmSync(dir, { recursive: true, force: true })
})

const DAY = 24 * 60 * 60 * 1000
const bytes = (text: string) => new TextEncoder().encode(text)
const sealedFor = (digest: string) => ({ text: JSON.stringify({ digest }), mac: "m" })

describe("FileSnapshotStore", () => {
  it.effect("keeps a snapshot per session and language, private, and reads it back", () =>
    Effect.gen(function*() {
      const root = tempRoot()
      const store = yield* makeFileSnapshotStore(root, DAY)
      const payload = bytes("state")
      const digest = payloadDigest(payload)
      yield* store.write("alpha", "py", sealedFor(digest), digest, payload)
      const read = yield* store.read("alpha", "py")
      expect(read?.sealed).toEqual(sealedFor(digest))
      expect(Buffer.from(read!.payload).toString()).toBe("state")
      expect(yield* store.read("alpha", "js")).toBeUndefined()
      expect(yield* store.read("beta", "py")).toBeUndefined()
      expect(NodeFs.statSync(root).mode & 0o777).toBe(0o700)
      expect(NodeFs.statSync(path.join(root, "key")).mode & 0o777).toBe(0o600)
      const sessionDir = path.join(root, NodeFs.readdirSync(root).find((name) => name !== "key")!)
      expect(NodeFs.statSync(sessionDir).mode & 0o777).toBe(0o700)
      for (const name of NodeFs.readdirSync(sessionDir)) expect(NodeFs.statSync(path.join(sessionDir, name)).mode & 0o777).toBe(0o600)
    }))

  it.effect("replaces a snapshot whole, keeps the payload for a metadata-only write, and leaves no older payload", () =>
    Effect.gen(function*() {
      const root = tempRoot()
      const store = yield* makeFileSnapshotStore(root, DAY)
      const first = bytes("one")
      const second = bytes("two")
      yield* store.write("alpha", "py", sealedFor(payloadDigest(first)), payloadDigest(first), first)
      yield* store.write("alpha", "py", sealedFor(payloadDigest(second)), payloadDigest(second), second)
      yield* store.write("alpha", "py", { ...sealedFor(payloadDigest(second)), mac: "renewed" }, payloadDigest(second), undefined)
      const read = yield* store.read("alpha", "py")
      expect(read?.sealed.mac).toBe("renewed")
      expect(Buffer.from(read!.payload).toString()).toBe("two")
      const sessionDir = path.join(root, NodeFs.readdirSync(root).find((name) => name !== "key")!)
      expect(NodeFs.readdirSync(sessionDir).sort()).toEqual([`py-${payloadDigest(second)}.payload`, "py.meta"])
      const missing = yield* Effect.flip(store.write("alpha", "py", sealedFor("f".repeat(64)), "f".repeat(64), undefined))
      expect(missing.message).toMatch(/payload to keep is not stored/)
    }))

  it.effect("a write that died before its metadata leaves the previous snapshot readable", () =>
    Effect.gen(function*() {
      const root = tempRoot()
      const store = yield* makeFileSnapshotStore(root, DAY)
      const first = bytes("one")
      yield* store.write("alpha", "py", sealedFor(payloadDigest(first)), payloadDigest(first), first)
      const sessionDir = path.join(root, NodeFs.readdirSync(root).find((name) => name !== "key")!)
      NodeFs.writeFileSync(path.join(sessionDir, `py-${"e".repeat(64)}.payload`), "half written")
      NodeFs.writeFileSync(path.join(sessionDir, ".py.meta.123-abc.tmp"), "{")
      const read = yield* store.read("alpha", "py")
      expect(Buffer.from(read!.payload).toString()).toBe("one")
    }))

  it.effect("removes one language or a whole session, and lists what is kept", () =>
    Effect.gen(function*() {
      const store = yield* makeFileSnapshotStore(tempRoot(), DAY)
      for (const [session, language] of [["a", "py"], ["a", "js"], ["b", "py"]] as const) {
        const payload = bytes(`${session}${language}`)
        yield* store.write(session, language, sealedFor(payloadDigest(payload)), payloadDigest(payload), payload)
      }
      expect(yield* Effect.map(store.list, (metas) => metas.length)).toBe(3)
      yield* store.remove("a", "py")
      expect(yield* store.read("a", "py")).toBeUndefined()
      expect(yield* store.read("a", "js")).toBeDefined()
      yield* store.remove("a")
      expect(yield* store.read("a", "js")).toBeUndefined()
      expect(yield* store.read("b", "py")).toBeDefined()
      expect(yield* Effect.map(store.list, (metas) => metas.length)).toBe(1)
    }))

  it.effect("removes snapshots older than the retention when it opens", () =>
    Effect.gen(function*() {
      const root = tempRoot()
      const store = yield* makeFileSnapshotStore(root, DAY)
      const payload = bytes("old")
      yield* store.write("old", "py", { text: JSON.stringify({ digest: payloadDigest(payload), language: "py" }), mac: "m" }, payloadDigest(payload), payload)
      yield* store.write("new", "py", { text: JSON.stringify({ digest: payloadDigest(payload), language: "py" }), mac: "m" }, payloadDigest(payload), payload)
      const oldDir = path.join(root, NodeFs.readdirSync(root).find((name) => name.startsWith("old-"))!)
      const longAgo = new Date(Date.now() - 2 * DAY)
      NodeFs.utimesSync(path.join(oldDir, "py.meta"), longAgo, longAgo)
      const reopened = yield* makeFileSnapshotStore(root, DAY)
      expect(yield* reopened.read("old", "py")).toBeUndefined()
      expect(NodeFs.existsSync(oldDir)).toBe(false)
      expect(yield* reopened.read("new", "py")).toBeDefined()
    }))

  it("keeps one key per install and refuses a key others can read", () => {
    const root = tempRoot()
    NodeFs.mkdirSync(root, { mode: 0o700 })
    const key = loadOrCreateKey(root)
    expect(key.length).toBe(32)
    expect(Buffer.from(loadOrCreateKey(root)).equals(Buffer.from(key))).toBe(true)
    NodeFs.chmodSync(path.join(root, "key"), 0o644)
    expect(() => loadOrCreateKey(root)).toThrow(/lets others read it/)
  })

  it.effect("refuses language ids that are not ids (no path is built from them)", () =>
    Effect.gen(function*() {
      const store = yield* makeFileSnapshotStore(tempRoot(), DAY)
      const error = yield* Effect.flip(store.read("a", "../key"))
      expect(error.message).toMatch(/not a language id/)
    }))
})
