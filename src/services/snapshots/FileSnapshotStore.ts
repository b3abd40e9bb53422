/**
 * Snapshots kept as files in a private directory (0700, checked) beside the sessions'
 * artifacts, never inside a session's own directory, which a sandboxed kernel sees:
 *
 *   <root>/key                          the install's sealing key (32 random bytes, 0600)
 *   <root>/<session dir>/<lang>.meta    the sealed metadata (JSON: text and MAC)
 *   <root>/<session dir>/<lang>-<digest>.payload
 *
 * Every file is created exclusively and renamed into place: the payload first, under a
 * name of its digest, then the metadata naming it, then older payloads go; a process that
 * dies between two steps leaves the previous snapshot whole. Snapshots whose metadata was
 * last written longer ago than the retention are removed when the store opens.
 */
import { randomBytes } from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { Effect, Layer } from "effect"
import { sessionArtifactsDir } from "../output/ArtifactStore.ts"
import { writeFileAtomicallyAsync } from "../storage/AtomicFile.ts"
import { ensurePrivateDirSync, ownDirProblem, ownFileProblem, PRIVATE_FILE_MODE, readOwnFile } from "../storage/PrivateDir.ts"
import { Settings } from "../config/Settings.ts"
import type { SealedMeta } from "./SnapshotSeal.ts"
import { SnapshotStore, SnapshotStoreError, type SnapshotStoreService, type StoredSnapshotMeta } from "./SnapshotStore.ts"

/** The directory of snapshots below an artifacts root. */
export const snapshotsRoot = (artifactsDir: string): string => path.join(artifactsDir, ".snapshots")

const KEY_BYTES = 32
const LANGUAGE = /^[a-z0-9]{1,16}$/
const DIGEST = /^[0-9a-f]{64}$/
const PAYLOAD = /^([a-z0-9]{1,16})-([0-9a-f]{64})\.payload$/

const errnoOf = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | undefined)?.code

/** The install's key below `root`: read when it is ours and private, created (exclusively) when absent. */
export const loadOrCreateKey = (root: string): Uint8Array => {
  const file = path.join(root, "key")
  const read = (): Uint8Array => {
    const fd = NodeFs.openSync(file, NodeFs.constants.O_RDONLY | (NodeFs.constants.O_NOFOLLOW ?? 0))
    try {
      const stats = NodeFs.fstatSync(fd)
      const problem = ownFileProblem(stats) ?? ((stats.mode & 0o077) !== 0 ? `its mode ${(stats.mode & 0o777).toString(8)} lets others read it` : undefined)
      if (problem !== undefined) throw new Error(`refusing the snapshot key ${file}: ${problem}`)
      const key = NodeFs.readFileSync(fd)
      if (key.length !== KEY_BYTES) throw new Error(`refusing the snapshot key ${file}: it is not ${KEY_BYTES} bytes long`)
      return key
    } finally {
      NodeFs.closeSync(fd)
    }
  }
  try {
    return read()
  } catch (error) {
    if (errnoOf(error) !== "ENOENT") throw error
  }
  const key = randomBytes(KEY_BYTES)
  try {
    const fd = NodeFs.openSync(file, NodeFs.constants.O_WRONLY | NodeFs.constants.O_CREAT | NodeFs.constants.O_EXCL | (NodeFs.constants.O_NOFOLLOW ?? 0), PRIVATE_FILE_MODE)
    try {
      NodeFs.writeFileSync(fd, key)
      NodeFs.fsyncSync(fd)
    } finally {
      NodeFs.closeSync(fd)
    }
    return key
  } catch (error) {
    if (errnoOf(error) === "EEXIST") return read()
    throw error
  }
}

const checkLanguage = (language: string): string => {
  if (!LANGUAGE.test(language)) throw new Error(`${JSON.stringify(language)} is not a language id`)
  return language
}

const parseSealed = (text: string): SealedMeta | undefined => {
  try {
    const value = JSON.parse(text) as { text?: unknown; mac?: unknown }
    return typeof value.text === "string" && typeof value.mac === "string" ? { text: value.text, mac: value.mac } : undefined
  } catch {
    return undefined
  }
}

/** The digest a sealed text names, when it is one (read before the seal is checked only to find the payload's file). */
const namedDigest = (sealed: SealedMeta): string | undefined => {
  try {
    const digest = (JSON.parse(sealed.text) as { digest?: unknown }).digest
    return typeof digest === "string" && DIGEST.test(digest) ? digest : undefined
  } catch {
    return undefined
  }
}

const attempt = <A>(what: string, run: () => Promise<A>): Effect.Effect<A, SnapshotStoreError> =>
  Effect.tryPromise({ try: run, catch: (error) => new SnapshotStoreError({ reason: `${what}: ${(error as Error).message}` }) })

/** A store on `root` (created 0700, or checked), its key loaded or made, snapshots older than `maxAgeMs` removed. */
export const makeFileSnapshotStore = (root: string, maxAgeMs: number): Effect.Effect<SnapshotStoreService, SnapshotStoreError> =>
  Effect.gen(function*() {
    const key = yield* attempt("opening the snapshot directory", async () => {
      ensurePrivateDirSync(root)
      return loadOrCreateKey(root)
    })
    const dirOf = (sessionId: string) => sessionArtifactsDir(root, sessionId)

    const removeIn = (dir: string, language: string | undefined, keep: ReadonlyArray<string> = []) => {
      let names: Array<string>
      try {
        names = NodeFs.readdirSync(dir)
      } catch {
        return
      }
      for (const name of names) {
        const payload = PAYLOAD.exec(name)
        const owned = payload !== null ? payload[1] : name.endsWith(".meta") ? name.slice(0, -".meta".length) : undefined
        if (owned === undefined || (language !== undefined && owned !== language) || keep.includes(name)) continue
        NodeFs.rmSync(path.join(dir, name), { force: true })
      }
      if (language === undefined) NodeFs.rmSync(dir, { recursive: true, force: true })
    }

    const metasIn = (dir: string): Array<StoredSnapshotMeta> => {
      const found: Array<StoredSnapshotMeta> = []
      for (const name of NodeFs.readdirSync(dir)) {
        if (!name.endsWith(".meta")) continue
        const file = path.join(dir, name)
        const stats = NodeFs.lstatSync(file)
        if (ownFileProblem(stats) !== undefined) continue
        const sealed = parseSealed(NodeFs.readFileSync(file, "utf8"))
        if (sealed !== undefined) found.push({ sealed, modifiedAt: stats.mtimeMs })
      }
      return found
    }

    const sessionDirs = (): Array<string> => {
      const dirs: Array<string> = []
      for (const name of NodeFs.readdirSync(root)) {
        const dir = path.join(root, name)
        const stats = NodeFs.lstatSync(dir)
        if (ownDirProblem(stats) === undefined) dirs.push(dir)
      }
      return dirs
    }

    yield* attempt("removing old snapshots", async () => {
      const now = Date.now()
      for (const dir of sessionDirs()) {
        for (const meta of metasIn(dir)) {
          if (now - meta.modifiedAt <= maxAgeMs) continue
          const language = (JSON.parse(meta.sealed.text) as { language?: unknown }).language
          if (typeof language === "string" && LANGUAGE.test(language)) removeIn(dir, language)
        }
        if (NodeFs.readdirSync(dir).length === 0) NodeFs.rmdirSync(dir)
      }
    }).pipe(Effect.catch((error) => Effect.logWarning(error.message)))

    return {
      key,
      write: (sessionId, language, sealed, digest, payload) =>
        attempt("writing a snapshot", async () => {
          checkLanguage(language)
          if (!DIGEST.test(digest)) throw new Error("the digest is not a SHA-256")
          const dir = ensurePrivateDirSync(dirOf(sessionId))
          const payloadName = `${language}-${digest}.payload`
          const payloadFile = path.join(dir, payloadName)
          if (payload !== undefined) {
            await writeFileAtomicallyAsync(payloadFile, payload)
          } else if (!NodeFs.existsSync(payloadFile)) {
            throw new Error("the payload to keep is not stored")
          }
          await writeFileAtomicallyAsync(path.join(dir, `${language}.meta`), JSON.stringify(sealed))
          removeIn(dir, language, [payloadName, `${language}.meta`])
        }),
      read: (sessionId, language) =>
        attempt("reading a snapshot", async () => {
          checkLanguage(language)
          const dir = dirOf(sessionId)
          let metaText: string
          try {
            metaText = (await readOwnFile(path.join(dir, `${language}.meta`))).toString("utf8")
          } catch (error) {
            if (errnoOf(error) === "ENOENT" || errnoOf(error) === "ENOTDIR") return undefined
            throw error
          }
          const sealed = parseSealed(metaText) ?? { text: "", mac: "" }
          const digest = namedDigest(sealed)
          if (digest === undefined) return { sealed, payload: new Uint8Array(0) }
          try {
            return { sealed, payload: await readOwnFile(path.join(dir, `${language}-${digest}.payload`)) }
          } catch (error) {
            if (errnoOf(error) === "ENOENT") return { sealed, payload: new Uint8Array(0) }
            throw error
          }
        }),
      remove: (sessionId, language) =>
        attempt("removing a snapshot", async () => {
          if (language !== undefined) checkLanguage(language)
          const dir = dirOf(sessionId)
          removeIn(dir, language)
          if (language !== undefined && NodeFs.existsSync(dir) && NodeFs.readdirSync(dir).length === 0) NodeFs.rmdirSync(dir)
        }),
      list: attempt("listing snapshots", async () => sessionDirs().flatMap(metasIn))
    } satisfies SnapshotStoreService
  })

/** The file store below the artifacts directory of the settings in context. */
export const fileSnapshotStoreLayer: Layer.Layer<SnapshotStore, SnapshotStoreError, Settings> = Layer.effect(
  SnapshotStore,
  Effect.gen(function*() {
    const settings = yield* Settings
    return yield* makeFileSnapshotStore(snapshotsRoot(settings.artifactsDir), settings.session.snapshotMaxAgeDays * 24 * 60 * 60 * 1000)
  })
)
