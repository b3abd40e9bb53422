/**
 * A session's artifacts directory: files too large for a tool result, addressed as
 * `artifact://<id>`.
 *
 * An id is `<kind>-<timestamp base36>-<8 hex>` with an optional `.<extension>`, and is
 * also the file's name in the directory, so resolving an id needs no index. Anything
 * that does not match that shape (a `/`, `..`, an absolute path, ...) is rejected
 * before the file system is touched.
 *
 * Writers copy what they are given into one `WRITE_BUFFER_BYTES` buffer (so the caller's
 * strings die young) and write it through one open file handle when it fills; a chunk
 * larger than the buffer goes out on its own after what is buffered. Their data
 * is complete on disk once `close` returns (or their scope closes).
 */
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { NodeFileSystem } from "@effect/platform-node"
import { Clock, Context, Effect, ExecutionStrategy, Exit, Layer, Schema, Scope } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as path from "node:path"
import { Settings } from "./Settings.ts"

/** The URI scheme of artifacts. */
export const ARTIFACT_SCHEME = "artifact://"

/** How many bytes a writer buffers before writing them to its file. */
export const WRITE_BUFFER_BYTES = 256 * 1024

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
      `Point VEYYON_ARTIFACTS_DIR (or the artifactsDir setting) at a writable directory.`
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
  /** Appends text (as UTF-8) or bytes; fails once the writer is closed. */
  readonly append: (chunk: string | Uint8Array) => Effect.Effect<void, ArtifactWriteFailed>
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
  /** The artifacts in the directory (regular files with an artifact id for a name), oldest id first; empty when there are none. */
  readonly list: Effect.Effect<ReadonlyArray<ArtifactEntry>, ArtifactReadFailed>
  /** A store on the directory of one session below this one (see `sessionArtifactsDir`). */
  readonly forSession: (sessionId: string) => Effect.Effect<ArtifactStoreService, ArtifactDirUnavailable>
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

const describeError = (error: PlatformError): string =>
  error._tag === "SystemError" ? `${error.reason}: ${error.message}` : error.message

const isSystemReason = (error: PlatformError, reason: string): boolean =>
  error._tag === "SystemError" && error.reason === reason

const checkedId = (id: string): Effect.Effect<string, InvalidArtifactId> => {
  const problem = artifactIdProblem(id)
  return problem === undefined ? Effect.succeed(id) : Effect.fail(new InvalidArtifactId({ id, reason: problem }))
}

const newId = (kind: string, extension: string | undefined): Effect.Effect<string> =>
  Effect.map(Clock.currentTimeMillis, (now) =>
    `${kind}-${now.toString(36)}-${randomBytes(4).toString("hex")}${extension === undefined ? "" : `.${extension}`}`)

/** Encodes the pending chunks into `into` (or a new buffer when they do not fit), each as `Buffer.byteLength` counted it. */
/** Builds a store over `dir`, creating the directory when it is missing. */
export const makeArtifactStore = (
  dir: string
): Effect.Effect<ArtifactStoreService, ArtifactDirUnavailable, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const root = path.resolve(dir)
    yield* fs.makeDirectory(root, { recursive: true }).pipe(
      Effect.mapError((error) => new ArtifactDirUnavailable({ dir: root, reason: describeError(error) }))
    )

    const fileOf = (id: string) => path.join(root, id)

    const openWriter = (id: string, scope: Scope.CloseableScope) =>
      Effect.gen(function*() {
        const file = fileOf(id)
        const fail = (reason: string) => new ArtifactWriteFailed({ id, path: file, reason })
        const handle = yield* fs.open(file, { flag: "wx" }).pipe(Scope.extend(scope))
        const lock = yield* Effect.makeSemaphore(1)
        const buffer = Buffer.allocUnsafe(WRITE_BUFFER_BYTES)
        let filled = 0
        let written = 0
        let closed = false

        const writeOut = (data: Uint8Array) =>
          handle.writeAll(data).pipe(Effect.mapError((error) => fail(describeError(error))))

        const flush = Effect.suspend(() => {
          if (filled === 0) return Effect.void
          const data = buffer.subarray(0, filled)
          filled = 0
          return writeOut(data)
        })

        yield* Scope.addFinalizer(
          scope,
          Effect.suspend(() => {
            closed = true
            return flush
          }).pipe(Effect.ignore)
        )

        const append = (chunk: string | Uint8Array) =>
          lock.withPermits(1)(Effect.suspend(() => {
            if (closed) return Effect.fail(fail("the writer is already closed"))
            const size = typeof chunk === "string" ? Buffer.byteLength(chunk, "utf8") : chunk.length
            if (size === 0) return Effect.void
            written += size
            const copyIn = Effect.suspend(() => {
              if (typeof chunk === "string") buffer.write(chunk, filled, "utf8")
              else buffer.set(chunk, filled)
              filled += size
              return filled === buffer.length ? flush : Effect.void
            })
            if (filled + size <= buffer.length) return copyIn
            if (size <= buffer.length) return Effect.zipRight(flush, copyIn)
            return Effect.zipRight(flush, writeOut(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk))
          }))

        const close = lock.withPermits(1)(Effect.suspend(() => {
          if (closed) return Effect.void
          return flush.pipe(Effect.ensuring(Scope.close(scope, Exit.void)))
        }))

        const writer: ArtifactWriter = {
          id,
          uri: artifactUri(id),
          path: file,
          append,
          close,
          size: Effect.sync(() => written)
        }
        return writer
      })

    const create = (kind: string, extension?: string) =>
      Effect.gen(function*() {
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
          const scope = yield* Scope.fork(parent, ExecutionStrategy.sequential)
          const opened = yield* Effect.either(openWriter(id, scope))
          if (opened._tag === "Right") return opened.right
          yield* Scope.close(scope, Exit.void)
          if (!isSystemReason(opened.left, "AlreadyExists") || attempt >= 3) {
            return yield* new ArtifactWriteFailed({ id, path: fileOf(id), reason: describeError(opened.left) })
          }
        }
      })

    const readWith = <A>(id: string, read: (file: string) => Effect.Effect<A, PlatformError>) =>
      Effect.flatMap(checkedId(id), (valid) =>
        read(fileOf(valid)).pipe(
          Effect.mapError((error) =>
            isSystemReason(error, "NotFound")
              ? new ArtifactNotFound({ id: valid, dir: root })
              : new ArtifactReadFailed({ id: valid, path: fileOf(valid), reason: describeError(error) })
          )
        ))

    const resolve = (uri: string) =>
      Effect.gen(function*() {
        const id = artifactIdOfUri(uri)
        if (id === undefined) return yield* new InvalidArtifactUri({ uri })
        const valid = yield* checkedId(id)
        const file = fileOf(valid)
        const exists = yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false))
        if (!exists) return yield* new ArtifactNotFound({ id: valid, dir: root })
        return file
      })

    const list = Effect.gen(function*() {
      const names = yield* fs.readDirectory(root).pipe(
        Effect.catchIf((error) => isSystemReason(error, "NotFound"), () => Effect.succeed([] as Array<string>)),
        Effect.mapError((error) => new ArtifactReadFailed({ id: "*", path: root, reason: describeError(error) }))
      )
      const entries: Array<ArtifactEntry> = []
      for (const id of names.filter((name) => artifactIdProblem(name) === undefined).sort()) {
        const info = yield* Effect.option(fs.stat(fileOf(id)))
        if (info._tag === "Some" && info.value.type === "File") {
          entries.push({ id, uri: artifactUri(id), size: Number(info.value.size) })
        }
      }
      return entries
    })

    const service: ArtifactStoreService = {
      dir: root,
      create,
      read: (id) => readWith(id, (file) => fs.readFileString(file, "utf8")),
      readBytes: (id) => readWith(id, (file) => fs.readFile(file)),
      path: (id) => Effect.map(checkedId(id), fileOf),
      uri: artifactUri,
      resolve,
      list,
      forSession: (sessionId) =>
        makeArtifactStore(sessionArtifactsDir(root, sessionId)).pipe(Effect.provideService(FileSystem.FileSystem, fs))
    }
    return service
  })

/** The artifacts directory of the running session. */
export class ArtifactStore extends Context.Tag("veyyon-eval/ArtifactStore")<ArtifactStore, ArtifactStoreService>() {
  /** A store over an explicit directory. */
  static layer(dir: string): Layer.Layer<ArtifactStore, ArtifactDirUnavailable, FileSystem.FileSystem> {
    return Layer.effect(ArtifactStore, makeArtifactStore(dir))
  }

  /** A store over the `artifactsDir` setting, on the Node file system. */
  static readonly Live: Layer.Layer<ArtifactStore, ArtifactDirUnavailable, Settings> = Layer.effect(
    ArtifactStore,
    Effect.flatMap(Settings, (settings) => makeArtifactStore(settings.artifactsDir))
  ).pipe(Layer.provide(NodeFileSystem.layer))
}
