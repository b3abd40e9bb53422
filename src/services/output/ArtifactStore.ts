/**
 * A session's artifacts directory: files too large for a tool result, addressed as
 * `artifact://<id>`.
 *
 * An id is `<kind>-<timestamp base36>-<8 hex>` with an optional `.<extension>`, and is
 * also the file's name in the directory, so resolving an id needs no index. Anything
 * that does not match that shape (a `/`, `..`, an absolute path, ...) is rejected
 * before the file system is touched.
 *
 * Writers copy what they are given into a `WRITE_BUFFER_BYTES` buffer, taken at the first
 * copy (so the caller's strings die young) and, when it fills, write it through one open
 * file handle behind the caller while a second buffer takes the next appends (so a writer
 * waits for the disk only when the disk is slower than its input); a chunk larger than the
 * buffer goes out on its own after what is buffered, and so do bytes appended while nothing
 * is buffered (an image is one write, and takes no buffer). `appendNow` does the same
 * without any effect while it can, so a flood of output pays for one write per buffer and
 * nothing per chunk. Their data is complete on disk once `close` returns (or their scope
 * closes).
 *
 * The directories are private (`PrivateDir`: ours, 0700, checked before use), files are
 * created exclusively with mode 0600, and a read opens the file without following a
 * symbolic link and refuses anything that is not a regular file owned by us. Retention:
 * `prune` deletes a session's artifacts older than the age limit, then the oldest ones
 * until the rest fit the size budget; a root store prunes every session below it by age
 * when it opens, and removes session directories left with nothing in them.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Clock, Context, Effect, Exit, Fiber, FileSystem, Layer, type PlatformError, Schema, Scope, Semaphore } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { ensurePrivateDir, ownDirProblem, ownFileProblem, PRIVATE_FILE_MODE, readOwnFile } from "../storage/PrivateDir.ts"
import { Settings } from "../config/Settings.ts"

/** The URI scheme of artifacts. */
export const ARTIFACT_SCHEME = "artifact://"

/** How many bytes a writer buffers before writing them to its file (fewer, larger writes cost the host less). */
export const WRITE_BUFFER_BYTES = 1024 * 1024

const ID_PATTERN = /^[a-z][a-z0-9]{0,15}-[a-z0-9]{1,16}-[0-9a-f]{8}(?:\.[a-z0-9]{1,10})?$/
const KIND_PATTERN = /^[a-z][a-z0-9]{0,15}$/
const EXTENSION_PATTERN = /^[a-z0-9]{1,10}$/
const EXAMPLE_ID = "out-m2x1k3a-9f3a2b1c.txt"

/** The artifacts directory cannot be created or written. */
export class ArtifactDirUnavailable extends Schema.TaggedError<ArtifactDirUnavailable>()("ArtifactDirUnavailable", {
  dir: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Cannot use the artifacts directory ${this.dir} (${this.reason}). ` +
      `Point VEYYON_ARTIFACTS_DIR (or the artifactsDir setting) at a writable directory of yours that no other user can write.`
  }
}

/** A string that is not an artifact id (or a kind or extension that cannot make one). */
export class InvalidArtifactId extends Schema.TaggedError<InvalidArtifactId>()("InvalidArtifactId", {
  id: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${JSON.stringify(this.id)} is not a valid artifact id: ${this.reason}. ` +
      `Use the id from the artifact:// URI a truncated result reports, e.g. ${EXAMPLE_ID}.`
  }
}

/** A string that is not an `artifact://<id>` URI. */
export class InvalidArtifactUri extends Schema.TaggedError<InvalidArtifactUri>()("InvalidArtifactUri", {
  uri: Schema.String
}) {
  override get message(): string {
    return `${JSON.stringify(this.uri)} is not an artifact URI; expected ${ARTIFACT_SCHEME}<id>, ` +
      `e.g. ${ARTIFACT_SCHEME}${EXAMPLE_ID}.`
  }
}

/** No artifact with this id exists in the directory. */
export class ArtifactNotFound extends Schema.TaggedError<ArtifactNotFound>()("ArtifactNotFound", {
  id: Schema.String,
  dir: Schema.String
}) {
  override get message(): string {
    return `No artifact ${this.id} in ${this.dir}. Artifacts belong to the session that wrote them ` +
      `and are gone once its artifacts directory is removed; rerun the cell to produce it again.`
  }
}

/** An artifact could not be created or written. */
export class ArtifactWriteFailed extends Schema.TaggedError<ArtifactWriteFailed>()("ArtifactWriteFailed", {
  id: Schema.String,
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Could not write artifact ${this.id} to ${this.path} (${this.reason}). ` +
      `Check that the disk has free space and that its directory is writable.`
  }
}

/** An artifact exists but could not be read. */
export class ArtifactReadFailed extends Schema.TaggedError<ArtifactReadFailed>()("ArtifactReadFailed", {
  id: Schema.String,
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Could not read artifact ${this.id} at ${this.path} (${this.reason}). Check the file's permissions.`
  }
}

/** An open artifact being written, in order; close it to complete the file. */
export interface ArtifactWriter {
  readonly id: string
  readonly uri: string
  readonly path: string
  /**
   * Appends text (as UTF-8) or bytes; bytes appended while nothing is buffered are written
   * before it returns, so the caller may reuse them. Fails once the writer is closed.
   */
  readonly append: (chunk: string | Uint8Array) => Effect.Effect<void, ArtifactWriteFailed>
  /**
   * Appends `chunk` at once, without an effect, and answers true: when it fits the buffer, or
   * when the buffer is full and its last write went well (the full buffer's write then starts
   * behind the caller). Answers false, taking nothing, while an append or close is under way,
   * while the last write still runs, after a write failed (`append` then reports it), and for
   * a chunk larger than the buffer: then use `append`. Optional: a writer without it takes
   * every chunk through `append`.
   */
  readonly appendNow?: (chunk: string | Uint8Array) => boolean
  /** Writes what is buffered and closes the file; later calls do nothing. */
  readonly close: Effect.Effect<void, ArtifactWriteFailed>
  /** Bytes appended so far, buffered or not. */
  readonly size: Effect.Effect<number>
}

/** One artifact in a listing. */
export interface ArtifactEntry {
  readonly id: string
  readonly uri: string
  /** Bytes on disk. */
  readonly size: number
}

/** The operations on one artifacts directory. */
export interface ArtifactStoreService {
  /** The absolute directory the artifacts are files in. */
  readonly dir: string
  /** Starts a new artifact; its file closes when `close` is called or the scope ends. */
  readonly create: (
    kind: string,
    extension?: string
  ) => Effect.Effect<ArtifactWriter, InvalidArtifactId | ArtifactWriteFailed, Scope.Scope>
  /** The whole artifact as UTF-8 text. */
  readonly read: (id: string) => Effect.Effect<string, InvalidArtifactId | ArtifactNotFound | ArtifactReadFailed>
  /** The whole artifact as bytes. */
  readonly readBytes: (
    id: string
  ) => Effect.Effect<Uint8Array, InvalidArtifactId | ArtifactNotFound | ArtifactReadFailed>
  /** The file an id names (whether or not it exists yet). */
  readonly path: (id: string) => Effect.Effect<string, InvalidArtifactId>
  /** The URI of an id: `artifact://<id>`. */
  readonly uri: (id: string) => string
  /** The file of an existing artifact named by an `artifact://<id>` URI. */
  readonly resolve: (
    uri: string
  ) => Effect.Effect<string, InvalidArtifactUri | InvalidArtifactId | ArtifactNotFound>
  /** The artifacts in the directory (regular files of ours with an artifact id for a name), oldest id first; empty when there are none. */
  readonly list: Effect.Effect<ReadonlyArray<ArtifactEntry>, ArtifactReadFailed>
  /** A store on the directory of one session below this one (see `sessionArtifactsDir`), pruned as it opens. */
  readonly forSession: (sessionId: string) => Effect.Effect<ArtifactStoreService, ArtifactDirUnavailable>
  /** Applies the retention policy to this directory's artifacts; says what it removed. */
  readonly prune: Effect.Effect<PruneReport>
}

/** How long artifacts live and how much of them one session keeps. */
export interface ArtifactRetention {
  /** Bytes of artifacts one session directory keeps; the oldest go first past it. */
  readonly maxSessionBytes: number
  /** Milliseconds an artifact is kept after its last write. */
  readonly maxAgeMs: number
}

/** Retention when none is given: no limit at all (tests and explicit stores). */
export const KEEP_EVERYTHING: ArtifactRetention = { maxSessionBytes: Number.POSITIVE_INFINITY, maxAgeMs: Number.POSITIVE_INFINITY }

/** The retention the settings ask for. */
export const retentionOf = (settings: { readonly artifacts: { readonly maxSessionMb: number; readonly maxAgeHours: number } }): ArtifactRetention => ({
  maxSessionBytes: settings.artifacts.maxSessionMb * 1024 * 1024,
  maxAgeMs: settings.artifacts.maxAgeHours * 60 * 60 * 1000
})

/** One artifact file as retention sees it. */
export interface ArtifactFileInfo {
  readonly id: string
  readonly size: number
  readonly mtimeMs: number
}

/** What a prune removed. */
export interface PruneReport {
  readonly removed: ReadonlyArray<string>
  readonly keptBytes: number
}

/** The ids retention removes from `files` at `now`: too old first, then the oldest until the rest fit; the newest file always stays. */
export const idsToPrune = (files: ReadonlyArray<ArtifactFileInfo>, retention: ArtifactRetention, now: number): ReadonlyArray<string> => {
  const byAge = [...files].sort((a, b) => a.mtimeMs - b.mtimeMs || (a.id < b.id ? -1 : 1))
  const removed: Array<string> = []
  let total = byAge.reduce((sum, file) => sum + file.size, 0)
  byAge.forEach((file, index) => {
    const newest = index === byAge.length - 1
    if (newest) return
    if (now - file.mtimeMs > retention.maxAgeMs || total > retention.maxSessionBytes) {
      removed.push(file.id)
      total -= file.size
    }
  })
  const newest = byAge[byAge.length - 1]
  if (newest !== undefined && now - newest.mtimeMs > retention.maxAgeMs) removed.push(newest.id)
  return removed
}

/** Why `id` is not an artifact id, or undefined when it is one. */
export const artifactIdProblem = (id: string): string | undefined => {
  if (id.length === 0) return "it is empty"
  if (id.includes("/") || id.includes("\\")) return "it contains a path separator"
  if (id.includes("..")) return "it contains \"..\""
  if (!ID_PATTERN.test(id)) return "it does not have the form <kind>-<time>-<random>[.<extension>]"
  return undefined
}

/** The URI of an artifact id. */
export const artifactUri = (id: string): string => `${ARTIFACT_SCHEME}${id}`

/** The id in an `artifact://<id>` URI, or undefined when `uri` has another scheme. */
export const artifactIdOfUri = (uri: string): string | undefined =>
  uri.startsWith(ARTIFACT_SCHEME) ? uri.slice(ARTIFACT_SCHEME.length) : undefined

/** The directory of a session below an artifacts root: a readable slug plus a hash of the full id. */
export const sessionArtifactsDir = (root: string, sessionId: string): string => {
  const slug = sessionId.replace(/[^A-Za-z0-9_-]+/g, "_").slice(0, 40) || "session"
  const hash = createHash("sha256").update(sessionId).digest("hex").slice(0, 8)
  return path.join(root, `${slug}-${hash}`)
}

/** The system's own reason (e.g. `ENOSPC: no space left on device, write`) when it gave one, else the platform's message. */
const describeError = (error: PlatformError.PlatformError): string => {
  const cause = error.reason.cause
  return cause instanceof Error && "code" in cause && cause.message !== "" ? cause.message : error.message
}

const isSystemReason = (error: PlatformError.PlatformError, reason: PlatformError.SystemErrorTag): boolean =>
  error.reason._tag === reason

const checkedId = (id: string): Effect.Effect<string, InvalidArtifactId> => {
  const problem = artifactIdProblem(id)
  return problem === undefined ? Effect.succeed(id) : Effect.fail(new InvalidArtifactId({ id, reason: problem }))
}

const newId = (kind: string, extension: string | undefined): Effect.Effect<string> =>
  Effect.map(Clock.currentTimeMillis, (now) =>
    `${kind}-${now.toString(36)}-${randomBytes(4).toString("hex")}${extension === undefined ? "" : `.${extension}`}`)

/** The artifacts of ours in `dir`: regular files with an artifact id for a name; throws when `dir` cannot be read. */
const ownArtifacts = (dir: string): Array<ArtifactFileInfo> => {
  const files: Array<ArtifactFileInfo> = []
  for (const name of NodeFs.readdirSync(dir)) {
    if (artifactIdProblem(name) !== undefined) continue
    try {
      const stats = NodeFs.lstatSync(path.join(dir, name))
      if (ownFileProblem(stats) === undefined) files.push({ id: name, size: stats.size, mtimeMs: stats.mtimeMs })
    } catch {
      continue
    }
  }
  return files
}

const artifactFiles = (dir: string): Array<ArtifactFileInfo> => {
  try {
    return ownArtifacts(dir)
  } catch {
    return []
  }
}

const pruneDir = (dir: string, retention: ArtifactRetention, now: number): PruneReport => {
  const files = artifactFiles(dir)
  const removed: Array<string> = []
  for (const id of idsToPrune(files, retention, now)) {
    try {
      NodeFs.unlinkSync(path.join(dir, id))
      removed.push(id)
    } catch {
      continue
    }
  }
  const keptBytes = files.reduce((sum, file) => (removed.includes(file.id) ? sum : sum + file.size), 0)
  return { removed, keptBytes }
}

const SESSION_DIR_PATTERN = /^[A-Za-z0-9_-]{1,40}-[0-9a-f]{8}$/

/** Prunes every session directory below `root` and removes those left holding nothing (no artifacts, no kv entries). */
const pruneSessions = (root: string, retention: ArtifactRetention, now: number): void => {
  let names: Array<string>
  try {
    names = NodeFs.readdirSync(root)
  } catch {
    return
  }
  for (const name of names) {
    if (!SESSION_DIR_PATTERN.test(name)) continue
    const dir = path.join(root, name)
    try {
      const stats = NodeFs.lstatSync(dir)
      if (ownDirProblem(stats) !== undefined) continue
      pruneDir(dir, retention, now)
      if (now - stats.mtimeMs <= retention.maxAgeMs) continue
      const kvDir = path.join(dir, "kv")
      if (NodeFs.existsSync(kvDir)) {
        if (NodeFs.readdirSync(kvDir).length > 0) continue
        NodeFs.rmdirSync(kvDir)
      }
      NodeFs.rmdirSync(dir)
    } catch {
      continue
    }
  }
}

const refusalOf = (error: unknown): string => {
  const code = (error as NodeJS.ErrnoException).code
  if (code === "ELOOP") return "it is a symbolic link"
  return code === "EREFUSED" ? (error as Error).message : `${code ?? "Error"}: ${(error as Error).message}`
}

/** Builds a store over `dir`, creating the directory (private, checked) when it is missing. */
export const makeArtifactStore = (
  dir: string,
  retention: ArtifactRetention = KEEP_EVERYTHING
): Effect.Effect<ArtifactStoreService, ArtifactDirUnavailable, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = yield* ensurePrivateDir(dir).pipe(
      Effect.mapError((refused) => new ArtifactDirUnavailable({ dir: refused.path, reason: refused.problem }))
    )

    const fileOf = (id: string) => path.join(root, id)

    const openWriter = Effect.fnUntraced(function*(id: string, scope: Scope.Closeable) {
      const file = fileOf(id)
      const fail = (reason: string) => new ArtifactWriteFailed({ id, path: file, reason })
      const handle = yield* fs.open(file, { flag: "wx", mode: PRIVATE_FILE_MODE }).pipe(Scope.provide(scope))
      const lock = yield* Semaphore.make(1)
      /** Taken at the first copy, so a writer given only whole byte chunks takes none. */
      let buffer: Buffer | undefined
      /** The other buffer: being written while `writing` runs, then free for the next rotation. */
      let spare: Buffer | undefined
      let writing: Fiber.Fiber<void, ArtifactWriteFailed> | undefined
      let filled = 0
      let written = 0
      let closed = false

      const writeOut = (data: Uint8Array) =>
        handle.writeAll(data).pipe(Effect.mapError((error) => fail(describeError(error))))

      /** Waits for the write under way, failing with its failure. */
      const settle = Effect.suspend(() => {
        const fiber = writing
        writing = undefined
        return fiber === undefined ? Effect.void : Fiber.join(fiber)
      })

      /** Starts writing the full buffer behind the caller, after the write under way; the other buffer takes appends meanwhile. */
      const rotate = Effect.andThen(
        settle,
        Effect.suspend(() => {
          if (filled === 0 || buffer === undefined) return Effect.void
          const data = buffer.subarray(0, filled)
          const next = spare ?? Buffer.allocUnsafe(WRITE_BUFFER_BYTES)
          spare = buffer
          buffer = next
          filled = 0
          return Effect.map(Effect.forkDetach(writeOut(data)), (fiber) => {
            writing = fiber
          })
        })
      )

      /** Writes everything buffered and waits for it. */
      const flush = Effect.andThen(
        settle,
        Effect.suspend(() => {
          if (filled === 0 || buffer === undefined) return Effect.void
          const data = buffer.subarray(0, filled)
          filled = 0
          return writeOut(data)
        })
      )

      yield* Scope.addFinalizer(
        scope,
        Effect.suspend(() => {
          closed = true
          return flush
        }).pipe(Effect.ignore)
      )

      /** Appends, writes and closes under way; `appendNow` only runs when there are none. */
      let busy = 0
      const exclusive = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
        Effect.suspend(() => {
          busy++
          return Effect.ensuring(lock.withPermits(1)(effect), Effect.sync(() => busy--))
        })

      /** Copies `chunk` into the buffer when it surely fits: its size in bytes, or -1 (nothing copied). */
      const copyWhenRoom = (chunk: string | Uint8Array): number => {
        buffer ??= Buffer.allocUnsafe(WRITE_BUFFER_BYTES)
        const room = buffer.length - filled
        if (typeof chunk !== "string") {
          if (chunk.length > room) return -1
          buffer.set(chunk, filled)
          filled += chunk.length
          return chunk.length
        }
        // A UTF-16 code unit takes at most 3 bytes, so a string of room / 3 units fits unmeasured.
        if (chunk.length * 3 > room && Buffer.byteLength(chunk, "utf8") > room) return -1
        const size = buffer.write(chunk, filled, "utf8")
        filled += size
        return size
      }

      /** Starts writing the full buffer at once when the last write is done and went well (else the caller's effect waits). */
      const rotateNow = (): boolean => {
        if (writing !== undefined) {
          const done = writing.pollUnsafe()
          if (done === undefined || Exit.isFailure(done)) return false
          writing = undefined
        }
        const data = buffer!.subarray(0, filled)
        const next = spare ?? Buffer.allocUnsafe(WRITE_BUFFER_BYTES)
        spare = buffer
        buffer = next
        filled = 0
        writing = Effect.runFork(writeOut(data))
        return true
      }

      const appendNow = (chunk: string | Uint8Array): boolean => {
        if (busy > 0 || closed) return false
        let size = copyWhenRoom(chunk)
        if (size < 0) {
          if (filled === 0 || chunk.length > WRITE_BUFFER_BYTES || !rotateNow()) return false
          size = copyWhenRoom(chunk)
          if (size < 0) return false
        }
        written += size
        return true
      }

      const append = (chunk: string | Uint8Array) =>
        exclusive(Effect.suspend(() => {
          if (closed) return Effect.fail(fail("the writer is already closed"))
          if (typeof chunk !== "string" && filled === 0) {
            written += chunk.length
            return Effect.andThen(settle, writeOut(chunk))
          }
          const copied = copyWhenRoom(chunk)
          if (copied >= 0) {
            written += copied
            return filled === WRITE_BUFFER_BYTES ? rotate : Effect.void
          }
          const size = typeof chunk === "string" ? Buffer.byteLength(chunk, "utf8") : chunk.length
          written += size
          if (size <= WRITE_BUFFER_BYTES) {
            return Effect.andThen(rotate, Effect.suspend(() => {
              copyWhenRoom(chunk)
              return filled === WRITE_BUFFER_BYTES ? rotate : Effect.void
            }))
          }
          return Effect.andThen(flush, writeOut(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk))
        }))

      const close = exclusive(Effect.suspend(() => {
        if (closed) return Effect.void
        return flush.pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
      }))

      const writer: ArtifactWriter = {
        id,
        uri: artifactUri(id),
        path: file,
        append,
        appendNow,
        close,
        size: Effect.sync(() => written)
      }
      return writer
    })

    const create = Effect.fnUntraced(function*(kind: string, extension?: string) {
      if (!KIND_PATTERN.test(kind)) {
        return yield* new InvalidArtifactId({ id: kind, reason: "an artifact kind is 1-16 lowercase letters or digits" })
      }
      if (extension !== undefined && !EXTENSION_PATTERN.test(extension)) {
        return yield* new InvalidArtifactId({
          id: extension,
          reason: "an artifact extension is 1-10 lowercase letters or digits, without the dot"
        })
      }
      const parent = yield* Effect.scope
      for (let attempt = 1;; attempt++) {
        const id = yield* newId(kind, extension)
        const scope = yield* Scope.fork(parent, "sequential")
        const opened = yield* Effect.result(openWriter(id, scope))
        if (opened._tag === "Success") return opened.success
        yield* Scope.close(scope, Exit.void)
        if (!isSystemReason(opened.failure, "AlreadyExists") || attempt >= 3) {
          return yield* new ArtifactWriteFailed({ id, path: fileOf(id), reason: describeError(opened.failure) })
        }
      }
    })

    const readBytes = (id: string) =>
      Effect.flatMap(checkedId(id), (valid) =>
        Effect.tryPromise({
          try: () => readOwnFile(fileOf(valid)),
          catch: (error) =>
            (error as NodeJS.ErrnoException).code === "ENOENT"
              ? new ArtifactNotFound({ id: valid, dir: root })
              : new ArtifactReadFailed({ id: valid, path: fileOf(valid), reason: refusalOf(error) })
        }))

    const resolve = Effect.fnUntraced(function*(uri: string) {
      const id = artifactIdOfUri(uri)
      if (id === undefined) return yield* new InvalidArtifactUri({ uri })
      const valid = yield* checkedId(id)
      const file = fileOf(valid)
      const usable = yield* Effect.sync(() => {
        try {
          return ownFileProblem(NodeFs.lstatSync(file)) === undefined
        } catch {
          return false
        }
      })
      if (!usable) return yield* new ArtifactNotFound({ id: valid, dir: root })
      return file
    })

    const prune = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => pruneDir(root, retention, now)))

    const list = Effect.try({
      try: (): ReadonlyArray<ArtifactEntry> =>
        (NodeFs.existsSync(root) ? ownArtifacts(root) : [])
          .sort((a, b) => (a.id < b.id ? -1 : 1))
          .map(({ id, size }) => ({ id, uri: artifactUri(id), size })),
      catch: (error) => new ArtifactReadFailed({ id: "*", path: root, reason: error instanceof Error ? error.message : String(error) })
    })

    const service: ArtifactStoreService = {
      dir: root,
      create,
      read: (id) => Effect.map(readBytes(id), (bytes) => Buffer.from(bytes).toString("utf8")),
      readBytes: (id) => Effect.map(readBytes(id), (bytes) => new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length)),
      path: (id) => Effect.map(checkedId(id), fileOf),
      uri: artifactUri,
      resolve,
      list,
      forSession: (sessionId) =>
        makeArtifactStore(sessionArtifactsDir(root, sessionId), retention).pipe(
          Effect.tap((store) => store.prune),
          Effect.provideService(FileSystem.FileSystem, fs)
        ),
      prune
    }
    return service
  })

/** A root store whose session directories are pruned by age as it opens. */
export const openArtifactRoot = (
  dir: string,
  retention: ArtifactRetention
): Effect.Effect<ArtifactStoreService, ArtifactDirUnavailable, FileSystem.FileSystem> =>
  Effect.tap(makeArtifactStore(dir, retention), (store) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => pruneSessions(store.dir, retention, now))))

/** The artifacts directory of the running session. */
export class ArtifactStore extends Context.Service<ArtifactStore, ArtifactStoreService>()("veyyon-eval/ArtifactStore") {
  /** A store over an explicit directory. */
  static layer(dir: string): Layer.Layer<ArtifactStore, ArtifactDirUnavailable, FileSystem.FileSystem> {
    return Layer.effect(ArtifactStore, makeArtifactStore(dir))
  }

  /** A store over the `artifactsDir` setting, on the Node file system. */
  static readonly Live: Layer.Layer<ArtifactStore, ArtifactDirUnavailable, Settings> = Layer.effect(
    ArtifactStore,
    Effect.flatMap(Settings, (settings) => openArtifactRoot(settings.artifactsDir, retentionOf(settings)))
  ).pipe(Layer.provide(NodeFileSystem.layer))
}
