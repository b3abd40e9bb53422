/**
 * The host side of the preludes' `kv`: every write of a kernel's `kv.set` / `kv.delete`
 * reaches the host as a `kv` bridge call and is applied here, so the limits hold whatever
 * a cell does with its own copy of the prelude: keys 1-256 code points without `/`, `\` or
 * NUL; one value's JSON at most 256 KiB; the entry files of one directory together at most
 * 4 MiB. Writes to one directory are serialized in this process; each goes to an
 * exclusively created temp file (no symbolic link followed, mode 0600) renamed into place.
 * Reads stay in the preludes, straight from the files.
 *
 * Files (shared with `runner/python/prelude.py` and `runner/js/prelude.mjs`):
 * `<session dir>/kv/<hex SHA-256 of the key's UTF-8>.json` holding
 * `{"key": <key>, "value": <value>}` as compact UTF-8 JSON.
 *
 * Bridge params: `{"op": "set", "key": str, "value": <the value's JSON text>}` answers
 * null; `{"op": "delete", "key": str}` answers whether the key was stored. The value
 * travels as text so numbers the host's JSON cannot hold exactly (big integers) are kept
 * as written.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { type AgentBridge, AgentBridgeError, type BridgeCall } from "./AgentBridge.ts"
import { writeFileAtomically } from "./AtomicFile.ts"
import { ensurePrivateDir, ownFileProblem } from "./PrivateDir.ts"

/** The bridge method the preludes send kv writes under. */
export const KV_BRIDGE_METHOD = "kv"
/** The longest key, in code points. */
export const KV_KEY_MAX = 256
/** The most bytes one value's JSON may have (256 KiB). */
export const KV_VALUE_MAX = 256 * 1024
/** The most bytes all entry files of one store may have together (4 MiB). */
export const KV_STORE_MAX = 4 * 1024 * 1024

const KV_FILE = /^[0-9a-f]{64}\.json$/
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** A kv write the store refused; `name` reaches the cell as the error's kind. */
export class KvRefused extends Schema.TaggedError<KvRefused>()("KvRefused", {
  name: Schema.Literal("KvInvalid", "KvStoreFull", "KvWriteFailed"),
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

const clip = (text: string, limit: number): string => {
  const flat = text.split(/\s+/).filter(Boolean).join(" ")
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 3)}...`
}

/** Why `key` is not a legal kv key, or undefined when it is one. */
export const kvKeyProblem = (key: unknown): string | undefined => {
  if (typeof key !== "string") return `kv keys are strings, not ${key === null ? "null" : typeof key}`
  const length = [...key].length
  if (length < 1 || length > KV_KEY_MAX) return `kv keys have 1 to ${KV_KEY_MAX} characters; this one has ${length}`
  for (const [bad, name] of [["/", "\"/\""], ["\\", "\"\\\""], ["\0", "NUL"]] as const) {
    if (key.includes(bad)) return `kv keys may not contain ${name}: ${JSON.stringify(clip(key, 60))}`
  }
  if (LONE_SURROGATE.test(key)) return `kv keys must be valid Unicode (no lone surrogates): ${JSON.stringify(clip(key, 60))}`
  return undefined
}

/** The file that holds `key`: hex SHA-256 of its UTF-8 bytes plus `.json`. */
export const kvFileName = (key: string): string => createHash("sha256").update(key, "utf8").digest("hex") + ".json"

/** The bytes of `key`'s file for a value given as its JSON text. */
export const kvEntryBytes = (key: string, valueJson: string): Buffer =>
  Buffer.from(`{"key":${JSON.stringify(key)},"value":${valueJson}}`, "utf8")

/** The operations of the store, each on one kv directory. */
export interface KvStoreService {
  /** Stores the value (its JSON text) under key, within the limits. */
  readonly set: (dir: string, key: string, valueJson: string) => Effect.Effect<void, KvRefused>
  /** Removes key; whether it was stored. */
  readonly delete: (dir: string, key: string) => Effect.Effect<boolean, KvRefused>
  /** Bytes the entry files of `dir` hold together (a missing directory holds none). */
  readonly size: (dir: string) => Effect.Effect<number>
  /** Answers one `kv` bridge call for the kv directory `dir`. */
  readonly answer: (dir: string, params: unknown) => Effect.Effect<unknown, AgentBridgeError>
}

const invalid = (reason: string) => new KvRefused({ name: "KvInvalid", reason })

const entriesSize = (dir: string, skip?: string): number => {
  let names: Array<string>
  try {
    names = NodeFs.readdirSync(dir)
  } catch {
    return 0
  }
  let total = 0
  for (const name of names) {
    if (name === skip || !KV_FILE.test(name)) continue
    try {
      const stats = NodeFs.lstatSync(path.join(dir, name))
      if (ownFileProblem(stats) === undefined) total += stats.size
    } catch {
      continue
    }
  }
  return total
}

const validValue = (key: string, valueJson: unknown): string | KvRefused => {
  if (typeof valueJson !== "string") return invalid("a kv value travels as its JSON text, a string")
  const bytes = Buffer.byteLength(valueJson, "utf8")
  if (bytes > KV_VALUE_MAX) {
    return invalid(`kv value for ${JSON.stringify(clip(key, 60))} encodes to ${bytes} bytes; one value may have at most ${KV_VALUE_MAX} (256 KiB)`)
  }
  try {
    JSON.parse(valueJson)
  } catch (error) {
    return invalid(`kv value for ${JSON.stringify(clip(key, 60))} is not valid JSON: ${(error as Error).message}`)
  }
  return valueJson
}

/** Builds the store; writes are serialized per directory within this store. */
export const makeKvStore = (): KvStoreService => {
  const locks = new Map<string, Effect.Semaphore>()
  const locked = <A, E>(dir: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const key = path.resolve(dir)
      let lock = locks.get(key)
      if (lock === undefined) {
        lock = Effect.unsafeMakeSemaphore(1)
        locks.set(key, lock)
      }
      return lock.withPermits(1)(effect)
    })

  const checkedKey = (key: unknown): Effect.Effect<string, KvRefused> => {
    const problem = kvKeyProblem(key)
    return problem === undefined ? Effect.succeed(key as string) : Effect.fail(invalid(problem))
  }

  const writeFailed = (dir: string) => (error: unknown) =>
    error instanceof KvRefused ? error : new KvRefused({ name: "KvWriteFailed", reason: `could not write the kv store ${dir}: ${(error as Error).message}` })

  const set = (dir: string, key: string, valueJson: string) =>
    Effect.gen(function*() {
      const valid = yield* checkedKey(key)
      const value = validValue(valid, valueJson)
      if (value instanceof KvRefused) return yield* value
      const data = kvEntryBytes(valid, value)
      const name = kvFileName(valid)
      yield* locked(dir, Effect.gen(function*() {
        const kvDir = yield* ensurePrivateDir(dir).pipe(Effect.mapError((refused) => writeFailed(dir)(new Error(refused.message))))
        const used = entriesSize(kvDir, name)
        if (used + data.length > KV_STORE_MAX) {
          return yield* new KvRefused({
            name: "KvStoreFull",
            reason: `kv store is full: ${used} bytes stored, ${data.length} more would pass its ${KV_STORE_MAX}-byte (4 MiB) limit; kv.delete() keys you no longer need`
          })
        }
        yield* Effect.try({ try: () => writeFileAtomically(path.join(kvDir, name), data), catch: writeFailed(kvDir) })
      }))
    })

  const remove = (dir: string, key: string) =>
    Effect.flatMap(checkedKey(key), (valid) =>
      locked(dir, Effect.try({
        try: () => {
          try {
            NodeFs.unlinkSync(path.join(dir, kvFileName(valid)))
            return true
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code === "ENOENT") return false
            throw error
          }
        },
        catch: writeFailed(dir)
      })))

  const answer = (dir: string, params: unknown): Effect.Effect<unknown, AgentBridgeError> => {
    const given = (params ?? {}) as { readonly op?: unknown; readonly key?: unknown; readonly value?: unknown }
    const run: Effect.Effect<unknown, KvRefused> = given.op === "set"
      ? Effect.flatMap(checkedKey(given.key), (key) => {
        const value = validValue(key, given.value)
        return value instanceof KvRefused ? Effect.fail(value) : Effect.as(set(dir, key, value), null)
      })
      : given.op === "delete"
      ? Effect.flatMap(checkedKey(given.key), (key) => remove(dir, key))
      : Effect.fail(invalid(`unknown kv operation ${JSON.stringify(given.op)}; use "set" or "delete"`))
    return Effect.mapError(run, (refused) => new AgentBridgeError({ name: refused.name, message: refused.reason }))
  }

  return {
    set,
    delete: remove,
    size: (dir) => Effect.sync(() => entriesSize(dir)),
    answer
  }
}

/** The kv directory of a session directory. */
export const kvDirOf = (sessionDir: string): string => path.join(sessionDir, "kv")

/** Whether a bridge call is a kv write (answered by the host, not the embedder's bridge). */
export const isKvCall = (call: BridgeCall): boolean => call.method === KV_BRIDGE_METHOD

/** `bridge` with kv writes answered by `store` on `kvDir`, everything else by `bridge` itself. */
export const withKvWrites = (
  bridge: Context.Tag.Service<AgentBridge>,
  store: KvStoreService,
  kvDir: string
): Context.Tag.Service<AgentBridge> => ({
  call: (call) => (isKvCall(call) ? store.answer(kvDir, call.params) : bridge.call(call))
})

/** The host-side kv store. */
export class KvStore extends Context.Tag("veyyon-eval/KvStore")<KvStore, KvStoreService>() {
  /** One store for the process. */
  static readonly Live: Layer.Layer<KvStore> = Layer.sync(KvStore, makeKvStore)
}
