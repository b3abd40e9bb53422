import { NodeFileSystem } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Arbitrary, Effect, Fiber, Layer, Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import {
  ArtifactDirUnavailable,
  artifactIdProblem,
  ArtifactNotFound,
  ArtifactStore,
  ArtifactReadFailed,
  ArtifactWriteFailed,
  idsToPrune,
  InvalidArtifactId,
  InvalidArtifactUri,
  makeArtifactStore,
  openArtifactRoot,
  sessionArtifactsDir,
  WRITE_BUFFER_BYTES
} from "../../../src/services/output/ArtifactStore.ts"
import { DEFAULT_ARTIFACTS_MAX_AGE_HOURS, DEFAULT_ARTIFACTS_MAX_SESSION_MB, DEFAULT_OUTPUT_MAX_BYTES, DEFAULT_OUTPUT_MAX_LINES, Settings } from "../../../src/services/config/Settings.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-artifacts-test-")))
  roots.push(dir)
  return dir
}

/** Whole numbers from 0 to `max`. */
const upTo = (max: number) => Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: max }))

const storeAt = (dir: string) => makeArtifactStore(dir).pipe(Effect.provide(NodeFileSystem.layer))

describe("ArtifactStore", () => {
  it.effect("lists the artifacts of its directory with their sizes, skipping other names and directories", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const store = yield* storeAt(dir)
      expect(yield* store.list).toEqual([])
      const writer = yield* store.create("out", "txt")
      yield* writer.append("hello")
      yield* writer.close
      fs.writeFileSync(path.join(dir, "notes.md"), "not an artifact")
      fs.mkdirSync(path.join(dir, "img-abc-0000000a.png"))
      expect(yield* store.list).toEqual([{ id: writer.id, uri: writer.uri, size: 5 }])
      const other = yield* store.forSession("someone-else")
      expect(yield* other.list).toEqual([])
    }))

  it.effect("writes text and bytes in order and reads them back by id", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("out", "txt")
      expect(writer.id).toMatch(/^out-[a-z0-9]+-[0-9a-f]{8}\.txt$/)
      expect(writer.uri).toBe(`artifact://${writer.id}`)
      expect(writer.path).toBe(path.join(store.dir, writer.id))
      yield* writer.append("héllo ")
      yield* writer.append(new Uint8Array([0xf0, 0x9f, 0x98, 0x80]))
      yield* writer.append("\nbye\n")
      expect(yield* writer.size).toBe(Buffer.byteLength("héllo 😀\nbye\n"))
      yield* writer.close
      expect(yield* store.read(writer.id)).toBe("héllo 😀\nbye\n")
      expect(Buffer.from(yield* store.readBytes(writer.id)).toString("utf8")).toBe("héllo 😀\nbye\n")
      expect(yield* store.path(writer.id)).toBe(writer.path)
      expect(store.uri(writer.id)).toBe(writer.uri)
      expect(yield* store.resolve(writer.uri)).toBe(writer.path)
    }))

  it.effect("gives unique, url-safe ids, with or without an extension", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writers = yield* Effect.all(Array.from({ length: 200 }, () => store.create("out")))
      const ids = new Set(writers.map((writer) => writer.id))
      expect(ids.size).toBe(200)
      for (const id of ids) {
        expect(id).toMatch(/^out-[a-z0-9]+-[0-9a-f]{8}$/)
        expect(encodeURIComponent(id)).toBe(id)
        expect(artifactIdProblem(id)).toBeUndefined()
      }
    }))

  it.effect("buffers small appends and has everything on disk after close", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("out", "txt")
      yield* writer.append("x".repeat(100))
      expect(fs.statSync(writer.path).size).toBe(0)
      yield* writer.append("y".repeat(WRITE_BUFFER_BYTES))
      yield* writer.append("z")
      yield* writer.close
      expect(fs.statSync(writer.path).size).toBe(WRITE_BUFFER_BYTES + 101)
      yield* writer.close
    }))

  it.effect("keeps the order and bytes of mixed appends: small, multi-byte, raw bytes and larger than the buffer", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("out", "txt")
      const parts = [
        "a".repeat(WRITE_BUFFER_BYTES - 3),
        "é✓",
        new TextEncoder().encode("bytes|"),
        "€".repeat(WRITE_BUFFER_BYTES),
        "tail"
      ]
      for (const part of parts) yield* writer.append(part)
      yield* writer.close
      const expected = parts.map((part) => (typeof part === "string" ? part : new TextDecoder().decode(part))).join("")
      expect(fs.readFileSync(writer.path, "utf8")).toBe(expected)
      expect(yield* writer.size).toBe(Buffer.byteLength(expected, "utf8"))
    }))

  it.effect("writes bytes appended while nothing is buffered before append returns, so the caller may reuse them", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("img", "png")
      const reused = Buffer.alloc(WRITE_BUFFER_BYTES + 10, 1)
      yield* writer.append(reused)
      expect(fs.statSync(writer.path).size).toBe(WRITE_BUFFER_BYTES + 10)
      reused.fill(2)
      yield* writer.append(reused.subarray(0, 5))
      expect(fs.statSync(writer.path).size).toBe(WRITE_BUFFER_BYTES + 15)
      yield* writer.append("text")
      yield* writer.append(new Uint8Array([3]))
      yield* writer.close
      const expected = Buffer.concat([Buffer.alloc(WRITE_BUFFER_BYTES + 10, 1), Buffer.alloc(5, 2), Buffer.from("text"), Buffer.from([3])])
      expect(fs.readFileSync(writer.path).equals(expected)).toBe(true)
      expect(yield* writer.size).toBe(WRITE_BUFFER_BYTES + 20)
    }))

  it.effect("counts exactly the bytes it writes, even for a surrogate pair split across appends", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("out")
      yield* writer.append("x\ud83d")
      yield* writer.append(new Uint8Array([1, 2]))
      yield* writer.append("\ude00")
      yield* writer.close
      expect(yield* writer.size).toBe(9)
      expect(fs.statSync(writer.path).size).toBe(9)
    }))

  it.effect("appendNow takes chunks at once, starts a write behind when the buffer fills, and declines while that write still runs", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("out", "txt")
      expect(writer.appendNow!("a".repeat(WRITE_BUFFER_BYTES - 4))).toBe(true)
      expect(fs.statSync(writer.path).size).toBe(0)
      expect(writer.appendNow!("€€")).toBe(true)
      expect(writer.appendNow!("b".repeat(WRITE_BUFFER_BYTES - 6))).toBe(true)
      expect(writer.appendNow!(new Uint8Array([0x21, 0x21]))).toBe(false)
      expect(writer.appendNow!("c".repeat(WRITE_BUFFER_BYTES + 1))).toBe(false)
      expect(yield* writer.size).toBe(2 * WRITE_BUFFER_BYTES - 4)
      yield* writer.append("✓tail")
      yield* writer.close
      expect(writer.appendNow!("late")).toBe(false)
      expect(fs.readFileSync(writer.path, "utf8") === "a".repeat(WRITE_BUFFER_BYTES - 4) + "€€" + "b".repeat(WRITE_BUFFER_BYTES - 6) + "✓tail")
        .toBe(true)
      expect(yield* writer.size).toBe(2 * WRITE_BUFFER_BYTES + 3)
    }))

  it.effect("appendNow beside appends that write behind keeps every byte, in the order it was taken", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("out", "txt")
      const first = "a".repeat(WRITE_BUFFER_BYTES / 2)
      expect(writer.appendNow!(first)).toBe(true)
      const bigs = ["B", "C", "D", "E"].map((letter) => letter.repeat(WRITE_BUFFER_BYTES / 2 + 100))
      const writing = yield* Effect.forkChild(Effect.forEach(bigs, (big) => writer.append(big), { discard: true }))
      const taken: Array<string> = []
      for (let n = 0; taken.length < 50 || writing.pollUnsafe() === undefined; n++) {
        const chunk = `<${n}>`
        if (writer.appendNow!(chunk)) taken.push(chunk)
        yield* Effect.yieldNow
      }
      yield* Fiber.join(writing)
      yield* writer.close
      const text = fs.readFileSync(writer.path, "utf8")
      expect(text.replace(/[BCDE]/g, "") === first + taken.join("")).toBe(true)
      expect(text.replace(/[^BCDE]/g, "") === bigs.join("")).toBe(true)
      expect(yield* writer.size).toBe(text.length)
    }))

  it.effect("flushes and closes a writer when its scope ends without close", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* Effect.scoped(
        Effect.tap(store.create("out", "txt"), (writer) => writer.append("unflushed"))
      )
      expect(fs.readFileSync(writer.path, "utf8")).toBe("unflushed")
      const error = yield* Effect.flip(writer.append("more"))
      expect(error).toBeInstanceOf(ArtifactWriteFailed)
      expect(error.message).toContain("already closed")
    }))

  it.effect("appends 20 MB in 64 KB chunks to exactly that many bytes", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const writer = yield* store.create("out", "bin")
      const chunk = new Uint8Array(64 * 1024).fill(7)
      for (let i = 0; i < 320; i++) yield* writer.append(chunk)
      yield* writer.close
      expect(fs.statSync(writer.path).size).toBe(320 * 64 * 1024)
    }))

  it.effect("rejects kinds and extensions that cannot make an id", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      for (const [kind, extension] of [["../x", undefined], ["Out", undefined], ["out", ".txt"], ["out", "a/b"]]) {
        const error = yield* Effect.flip(store.create(kind!, extension))
        expect(error).toBeInstanceOf(InvalidArtifactId)
      }
      expect(fs.readdirSync(store.dir)).toEqual([])
    }))

  it.effect("rejects ids and URIs that could leave the directory", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      for (const id of ["", "..", "../etc/passwd", "out-1-0000000a/../../x", "/etc/passwd", "a\\b", "kv", "out-1-zz"]) {
        const fromPath = yield* Effect.flip(store.path(id))
        expect(fromPath).toBeInstanceOf(InvalidArtifactId)
        const fromUri = yield* Effect.flip(store.resolve(`artifact://${id}`))
        expect(fromUri).toBeInstanceOf(InvalidArtifactId)
        expect(fromUri.message).toContain("artifact://")
      }
      for (const uri of ["file:///etc/passwd", "out-1-0000000a", "ARTIFACT://out-1-0000000a", ""]) {
        const error = yield* Effect.flip(store.resolve(uri))
        expect(error).toBeInstanceOf(InvalidArtifactUri)
        expect(error.message).toContain("expected artifact://<id>")
      }
    }))

  it.prop("accepts no id holding a path separator or a dot-dot", {
    id: Arbitrary.map(
      Arbitrary.array(Arbitrary.schema(Schema.Literals(["a", "0", "-", ".", "/", "\\", "f", "out"]))),
      (units) => units.join("")
    )
  }, ({ id }) => {
    if (id.includes("/") || id.includes("\\") || id.includes("..")) expect(artifactIdProblem(id)).toBeDefined()
  })

  it.effect("says an artifact that does not exist is not found", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const fromRead = yield* Effect.flip(store.read("out-1-0000000a.txt"))
      expect(fromRead).toBeInstanceOf(ArtifactNotFound)
      expect(fromRead.message).toContain(store.dir)
      const fromResolve = yield* Effect.flip(store.resolve("artifact://out-1-0000000a.txt"))
      expect(fromResolve).toBeInstanceOf(ArtifactNotFound)
    }))

  it.effect("creates a missing directory and fails clearly when it cannot", () =>
    Effect.gen(function*() {
      const nested = path.join(tempDir(), "a", "b")
      const store = yield* storeAt(nested)
      expect(store.dir).toBe(nested)
      expect(fs.statSync(nested).isDirectory()).toBe(true)
      const blocker = path.join(tempDir(), "a-file")
      fs.writeFileSync(blocker, "")
      const error = yield* Effect.flip(storeAt(path.join(blocker, "artifacts")))
      expect(error).toBeInstanceOf(ArtifactDirUnavailable)
      expect(error.message).toContain("VEYYON_ARTIFACTS_DIR")
    }))

  it.effect("reports a write that fails because the directory went away", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const store = yield* storeAt(dir)
      fs.rmSync(dir, { recursive: true })
      const error = yield* Effect.flip(store.create("out", "txt"))
      expect(error).toBeInstanceOf(ArtifactWriteFailed)
      expect(error.message).toContain("writable")
    }))

  it.effect("gives each session its own directory below the root", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const store = yield* storeAt(root)
      const a = yield* store.forSession("agent/main:1")
      const b = yield* store.forSession("agent/main:2")
      const again = yield* store.forSession("agent/main:1")
      expect(path.dirname(a.dir)).toBe(root)
      expect(a.dir).toBe(sessionArtifactsDir(root, "agent/main:1"))
      expect(path.basename(a.dir)).toMatch(/^agent_main_1-[0-9a-f]{8}$/)
      expect(b.dir).not.toBe(a.dir)
      expect(again.dir).toBe(a.dir)
      expect(path.dirname(sessionArtifactsDir(root, "../../.."))).toBe(root)
      const writer = yield* a.create("out")
      yield* writer.close
      expect(fs.readdirSync(a.dir)).toEqual([writer.id])
      expect(fs.readdirSync(b.dir)).toEqual([])
    }))

  it.effect("Live uses the artifactsDir setting", () =>
    Effect.gen(function*() {
      const dir = path.join(tempDir(), "from-settings")
      const settings = Settings.value({
        eval: { py: true, js: true, rb: false, jl: false, pyWorkspace: false },
        kernel: { mode: "session", idleTtlMs: 1000, traceFrames: false, backends: {} },
        artifactsDir: dir,
        artifacts: { maxSessionMb: DEFAULT_ARTIFACTS_MAX_SESSION_MB, maxAgeHours: DEFAULT_ARTIFACTS_MAX_AGE_HOURS },
      output: { maxBytes: DEFAULT_OUTPUT_MAX_BYTES, maxLines: DEFAULT_OUTPUT_MAX_LINES },
        sandbox: { mode: "off", network: "allow", allowHosts: { rules: [] }, readPaths: [], writePaths: [] },
        limits: { memoryMb: undefined, pids: undefined, fileSizeMb: undefined },
        session: { snapshots: "every-cell", snapshotBudgetMb: 256, snapshotValueBudgetMb: 256, snapshotMaxAgeDays: 7 }
      })
      const store = yield* Effect.provide(ArtifactStore, ArtifactStore.Live.pipe(Layer.provide(settings)))
      expect(store.dir).toBe(dir)
      expect(fs.statSync(dir).isDirectory()).toBe(true)
    }))
})

const posix = process.platform !== "win32"

describe.skipIf(!posix)("ArtifactStore: only files it wrote", () => {
  it.effect("creates private files in a private directory", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(path.join(tempDir(), "root"))
      const session = yield* store.forSession("s")
      const writer = yield* session.create("out", "txt")
      yield* writer.close
      expect(fs.statSync(store.dir).mode & 0o777).toBe(0o700)
      expect(fs.statSync(session.dir).mode & 0o777).toBe(0o700)
      expect(fs.statSync(writer.path).mode & 0o777).toBe(0o600)
    }))

  it.effect("refuses an artifact name that is a symbolic link (to /etc/shadow or anything else)", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const id = "out-m2x1k3a-9f3a2b1c.txt"
      const secret = path.join(tempDir(), "secret")
      fs.writeFileSync(secret, "host secret")
      fs.symlinkSync(secret, path.join(store.dir, id))
      const error = yield* Effect.flip(store.read(id))
      expect(error).toBeInstanceOf(ArtifactReadFailed)
      expect(error.message).toContain("symbolic link")
      expect((yield* Effect.flip(store.readBytes(id)))._tag).toBe("ArtifactReadFailed")
      expect((yield* Effect.flip(store.resolve(`artifact://${id}`)))._tag).toBe("ArtifactNotFound")
      fs.symlinkSync("/etc/shadow", path.join(store.dir, "out-m2x1k3a-00000000.txt"))
      expect((yield* Effect.flip(store.read("out-m2x1k3a-00000000.txt"))).message).not.toContain("root:")
    }))

  it.effect("refuses a directory or a file owned by another user under an artifact's name", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      fs.mkdirSync(path.join(store.dir, "out-m2x1k3a-11111111.txt"))
      expect((yield* Effect.flip(store.read("out-m2x1k3a-11111111.txt"))).message).toContain("not a regular file")
      if (process.getuid?.() !== 0) return
      const foreign = path.join(store.dir, "out-m2x1k3a-22222222.txt")
      fs.writeFileSync(foreign, "planted")
      fs.chownSync(foreign, 65534, 65534)
      expect((yield* Effect.flip(store.read("out-m2x1k3a-22222222.txt"))).message).toContain("owned by uid 65534")
    }))
})

describe("artifact retention", () => {
  const HOUR = 3_600_000
  const file = (id: string, size: number, ageHours: number, now: number) => ({ id, size, mtimeMs: now - ageHours * HOUR })

  it("removes what is too old, then the oldest until the rest fit, and keeps the newest while it is young", () => {
    const now = 1_000 * HOUR
    const files = [file("a", 10, 5, now), file("b", 10, 4, now), file("c", 10, 3, now), file("d", 100, 0, now)]
    expect(idsToPrune(files, { maxSessionBytes: 1000, maxAgeMs: 4.5 * HOUR }, now)).toEqual(["a"])
    expect(idsToPrune(files, { maxSessionBytes: 115, maxAgeMs: 100 * HOUR }, now)).toEqual(["a", "b"])
    expect(idsToPrune(files, { maxSessionBytes: 50, maxAgeMs: 100 * HOUR }, now)).toEqual(["a", "b", "c"])
    expect(idsToPrune([file("old", 1, 9, now)], { maxSessionBytes: 1000, maxAgeMs: HOUR }, now)).toEqual(["old"])
  })

  it.prop("leaves files within both limits, or only the newest", {
    files: Arbitrary.map(
      Arbitrary.array(
        Arbitrary.schema(Schema.Struct({ id: Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(6)), size: upTo(1000), age: upTo(100) })),
        { maxLength: 30 }
      ),
      (files) => files.filter((file, at) => files.findIndex((other) => other.id === file.id) === at)
    ),
    budget: upTo(5000),
    maxAge: upTo(120)
  }, ({ files, budget, maxAge }) => {
    const now = 10_000
    const infos = files.map((f) => ({ id: f.id, size: f.size, mtimeMs: now - f.age }))
    const removed = new Set(idsToPrune(infos, { maxSessionBytes: budget, maxAgeMs: maxAge }, now))
    const kept = infos.filter((f) => !removed.has(f.id))
    for (const f of kept) expect(now - f.mtimeMs).toBeLessThanOrEqual(maxAge)
    const total = kept.reduce((sum, f) => sum + f.size, 0)
    expect(total <= budget || kept.length === 1).toBe(true)
    const removedAges = infos.filter((f) => removed.has(f.id) && now - f.mtimeMs <= maxAge).map((f) => f.mtimeMs)
    for (const f of kept) for (const t of removedAges) expect(t).toBeLessThanOrEqual(f.mtimeMs)
  })

  it.live("prunes a session's files on disk by age and size, leaving other files and kv alone", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const retention = { maxSessionBytes: 250, maxAgeMs: 48 * 3_600_000 }
      const session = yield* makeArtifactStore(root, retention).pipe(
        Effect.flatMap((store) => store.forSession("s")),
        Effect.provide(NodeFileSystem.layer)
      )
      const now = Date.now()
      const put = (id: string, size: number, ageHours: number) => {
        const file = path.join(session.dir, id)
        fs.writeFileSync(file, "x".repeat(size))
        const at = new Date(now - ageHours * 3_600_000)
        fs.utimesSync(file, at, at)
      }
      put("out-aaaaaaa-00000001.txt", 10, 72)
      put("out-aaaaaaa-00000002.txt", 100, 3)
      put("out-aaaaaaa-00000003.txt", 100, 2)
      put("out-aaaaaaa-00000004.txt", 100, 1)
      put("notes.txt", 5000, 100)
      fs.mkdirSync(path.join(session.dir, "kv"))
      const report = yield* session.prune
      expect([...report.removed].sort()).toEqual(["out-aaaaaaa-00000001.txt", "out-aaaaaaa-00000002.txt"])
      expect(report.keptBytes).toBe(200)
      expect(fs.readdirSync(session.dir).sort()).toEqual(["kv", "notes.txt", "out-aaaaaaa-00000003.txt", "out-aaaaaaa-00000004.txt"])
    }))

  it.live("a root opened with retention removes expired artifacts and emptied old session directories", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const old = new Date(Date.now() - 10 * 3_600_000)
      const stale = path.join(root, "stale-00000000")
      const keep = path.join(root, "withkv-00000000")
      for (const dir of [stale, keep]) fs.mkdirSync(path.join(dir, "kv"), { recursive: true, mode: 0o700 })
      fs.writeFileSync(path.join(keep, "kv", "entry.json"), "{}")
      fs.writeFileSync(path.join(stale, "out-aaaaaaa-00000001.txt"), "old")
      fs.utimesSync(path.join(stale, "out-aaaaaaa-00000001.txt"), old, old)
      const unrelated = path.join(root, "notes")
      fs.mkdirSync(unrelated, { mode: 0o700 })
      for (const dir of [stale, keep, unrelated]) fs.utimesSync(dir, old, old)
      yield* openArtifactRoot(root, { maxSessionBytes: 1 << 20, maxAgeMs: 3_600_000 }).pipe(Effect.provide(NodeFileSystem.layer))
      expect(fs.readdirSync(root).sort()).toEqual(["notes", "withkv-00000000"])
    }))
})
