/**
 * The host side of the preludes' `kv`: every write of a kernel's `kv.set` / `kv.delete`
 * reaches the host as a `kv` bridge call and is applied here, so the limits hold whatever
 * a cell does with its own copy of the prelude: keys 1-256 code points without `/`, `\` or
 * NUL; one value's JSON at most 256 KiB; the entry files of one directory together at most
 * 4 MiB. Writes to one directory are serialized in this process; each goes to an
 * exclusively created temp file (no symbolic link followed, mode 0600) renamed into place.
 * With this file store the preludes read straight from the files; a store whose entries
 * live elsewhere (the cluster's Postgres store) sets `VEYYON_KV_READS=host` in the kernels'
 * environment (`kernelEnv`) and the preludes then read through the bridge too.
 *
 * Files (shared with `runner/python/prelude.py` and `runner/js/prelude.mjs`):
 * `<session dir>/kv/<hex SHA-256 of the key's UTF-8>.json` holding
 * `{"key": <key>, "value": <value>}` as compact UTF-8 JSON.
 *
 * Bridge params: `{"op": "set", "key": str, "value": <the value's JSON text>}` answers
 * null; `{"op": "delete", "key": str}` answers whether the key was stored;
 * `{"op": "get", "key": str}` answers the value's JSON text or null when the key is not
 * stored; `{"op": "list"}` answers the stored keys sorted by code point. Values travel as
 * text so numbers the host's JSON cannot hold exactly (big integers) are kept as written.
 *
 * A store is addressed by a space (`spaceOf`): the file store's is the session's kv
 * directory, a shared store's the session id.
 */
import { Context, Effect, Layer, Schema, Semaphore } from "effect"
import { createHash } from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { type AgentBridge, AgentBridgeError, type BridgeCall } from "../../kernel/AgentBridge.ts"
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
/** The kernel environment variable that, set to `host`, makes the preludes read kv through the bridge. */
export const KV_READS_ENV = "VEYYON_KV_READS"

const KV_FILE = /^[0-9a-f]{64}\.json$/
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** A kv write the store refused; `name` reaches the cell as the error's kind. */
export class KvRefused extends Schema.TaggedError<KvRefused>()("KvRefused", {
  name: Schema.Literals(["KvInvalid", "KvStoreFull", "KvWriteFailed", "KvReadFailed"]),
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

/** The operations of the store, each on one space (see `spaceOf`). */
export interface KvStoreService {
  /** The space that holds a session's kv: its kv directory for the file store, its id for a shared store. */
  readonly spaceOf: (sessionId: string, sessionDir: string) => string
  /** Environment entries the host sets for every kernel so its prelude reads this store (empty: read the files). */
  readonly kernelEnv: Readonly<Record<string, string>>
  /** Stores the value (its JSON text) under key, within the limits. */
  readonly set: (space: string, key: string, valueJson: string) => Effect.Effect<void, KvRefused>
  /** The JSON text stored under key, or undefined when there is none. */
  readonly get: (space: string, key: string) => Effect.Effect<string | undefined, KvRefused>
  /** The stored keys, sorted by code point. */
  readonly list: (space: string) => Effect.Effect<ReadonlyArray<string>, KvRefused>
  /** Removes key; whether it was stored. */
  readonly delete: (space: string, key: string) => Effect.Effect<boolean, KvRefused>
  /** Bytes the entries of `space` hold together, as the 4 MiB limit counts them (an empty space holds none). */
  readonly size: (space: string) => Effect.Effect<number, KvRefused>
  /** Answers one `kv` bridge call for `space`. */
  readonly answer: (space: string, params: unknown) => Effect.Effect<unknown, AgentBridgeError>
}

/** The operations `answerKvCall` needs. */
export type KvOperations = Pick<KvStoreService, "set" | "get" | "list" | "delete">

const invalid = (reason: string) => new KvRefused({ name: "KvInvalid", reason })

/** `key` when it is a legal kv key, else a `KvInvalid` refusal. */
export const checkedKvKey = (key: unknown): Effect.Effect<string, KvRefused> => {
  const problem = kvKeyProblem(key)
  return problem === undefined ? Effect.succeed(key as string) : Effect.fail(invalid(problem))
}

/** The text of a store-full refusal: what is stored, what more was asked, the limit. */
export const kvStoreFull = (used: number, more: number): KvRefused =>
  new KvRefused({
    name: "KvStoreFull",
    reason: `kv store is full: ${used} bytes stored, ${more} more would pass its ${KV_STORE_MAX}-byte (4 MiB) limit; kv.delete() keys you no longer need`
  })

/** Orders strings by code point (UTF-16's `<` puts U+E000-U+FFFF after astral characters). */
export const compareCodePoints = (a: string, b: string): number => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

/** Answers one `kv` bridge call (`set`, `delete`, `get`, `list`) with `store`'s operations on `space`. */
export const answerKvCall = (store: KvOperations, space: string, params: unknown): Effect.Effect<unknown, AgentBridgeError> => {
  const given = (params ?? {}) as { readonly op?: unknown; readonly key?: unknown; readonly value?: unknown }
  const run: Effect.Effect<unknown, KvRefused> = given.op === "set"
    ? Effect.flatMap(checkedKvKey(given.key), (key) => {
      const value = validKvValue(key, given.value)
      return value instanceof KvRefused ? Effect.fail(value) : Effect.as(store.set(space, key, value), null)
    })
    : given.op === "delete"
    ? Effect.flatMap(checkedKvKey(given.key), (key) => store.delete(space, key))
    : given.op === "get"
    ? Effect.flatMap(checkedKvKey(given.key), (key) => Effect.map(store.get(space, key), (value) => value ?? null))
    : given.op === "list"
    ? store.list(space)
    : Effect.fail(invalid(`unknown kv operation ${JSON.stringify(clip(String(given.op), 40))}; use "set", "get", "list" or "delete"`))
  return Effect.mapError(run, (refused) => new AgentBridgeError({ name: refused.name, message: refused.reason }))
}

const entryNames = (dir: string): Array<string> => {
  try {
    return NodeFs.readdirSync(dir).filter((name) => KV_FILE.test(name))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return []
    throw error
  }
}

/** An entry file's bytes, or undefined when it is missing or not a regular file of ours. */
const readOwnEntry = (file: string): Buffer | undefined => {
  let fd: number
  try {
    fd = NodeFs.openSync(file, NodeFs.constants.O_RDONLY | (NodeFs.constants.O_NOFOLLOW ?? 0))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT" || code === "ELOOP") return undefined
    throw error
  }
  try {
    if (ownFileProblem(NodeFs.fstatSync(fd)) !== undefined) return undefined
    return NodeFs.readFileSync(fd)
  } finally {
    NodeFs.closeSync(fd)
  }
}

/** The value's text as written in a compact `{"key":"...","value":...}` entry (so big integers keep their digits). */
const writtenValue = (text: string): string | undefined => {
  const head = `{"key":"`
  if (!text.startsWith(head) || !text.endsWith("}")) return undefined
  let at = head.length
  while (at < text.length && text[at] !== `"`) at += text[at] === "\\" ? 2 : 1
  const marker = `,"value":`
  return text.startsWith(marker, at + 1) ? text.slice(at + 1 + marker.length, -1) : undefined
}

/** The key and value JSON text of an entry file, or undefined when it is not an entry. */
const decodeEntry = (data: Buffer): { readonly key: string; readonly valueJson: string } | undefined => {
  const text = data.toString("utf8")
  let entry: { readonly key?: unknown; readonly value?: unknown }
  try {
    entry = JSON.parse(text) as typeof entry
  } catch {
    return undefined
  }
  if (typeof entry !== "object" || entry === null || !("value" in entry) || typeof entry.key !== "string") return undefined
  return { key: entry.key, valueJson: writtenValue(text) ?? JSON.stringify(entry.value) }
}

const entriesSize = (dir: string, skip?: string): number => {
  let names: Array<string>
  try {
    names = entryNames(dir)
  } catch {
    return 0
  }
  let total = 0
  for (const name of names) {
    if (name === skip) continue
    try {
      const stats = NodeFs.lstatSync(path.join(dir, name))
      if (ownFileProblem(stats) === undefined) total += stats.size
    } catch {
      continue
    }
  }
  return total
}

/** The value's JSON text when it is a string of valid JSON within 256 KiB, else why not. */
export const validKvValue = (key: string, valueJson: unknown): string | KvRefused => {
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
  const locks = new Map<string, Semaphore.Semaphore>()
  const locked = <A, E>(dir: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
    Effect.suspend(() => {
      const key = path.resolve(dir)
      let lock = locks.get(key)
      if (lock === undefined) {
        lock = Semaphore.makeUnsafe(1)
        locks.set(key, lock)
      }
      return lock.withPermits(1)(effect)
    })

  const writeFailed = (dir: string) => (error: unknown) =>
    error instanceof KvRefused ? error : new KvRefused({ name: "KvWriteFailed", reason: `could not write the kv store ${dir}: ${(error as Error).message}` })

  const set = Effect.fnUntraced(function*(dir: string, key: string, valueJson: string) {
    const valid = yield* checkedKvKey(key)
    const value = validKvValue(valid, valueJson)
    if (value instanceof KvRefused) return yield* value
    const data = kvEntryBytes(valid, value)
    const name = kvFileName(valid)
    yield* locked(dir, Effect.gen(function*() {
      const kvDir = yield* ensurePrivateDir(dir).pipe(Effect.mapError((refused) => writeFailed(dir)(new Error(refused.message))))
      const used = entriesSize(kvDir, name)
      if (used + data.length > KV_STORE_MAX) return yield* kvStoreFull(used, data.length)
      yield* Effect.try({ try: () => writeFileAtomically(path.join(kvDir, name), data), catch: writeFailed(kvDir) })
    }))
  })

  const remove = (dir: string, key: string) =>
    Effect.flatMap(checkedKvKey(key), (valid) =>
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

  const readFailed = (dir: string) => (error: unknown) =>
    new KvRefused({ name: "KvReadFailed", reason: `could not read the kv store ${dir}: ${(error as Error).message}` })

  const get = (dir: string, key: string) =>
    Effect.flatMap(checkedKvKey(key), (valid) =>
      Effect.try({
        try: (): string | undefined => {
          const data = readOwnEntry(path.join(dir, kvFileName(valid)))
          if (data === undefined) return undefined
          const entry = decodeEntry(data)
          if (entry?.key !== valid) throw new Error(`the entry for ${JSON.stringify(clip(valid, 60))} is damaged`)
          return entry.valueJson
        },
        catch: readFailed(dir)
      }))

  const list = (dir: string) =>
    Effect.try({
      try: (): ReadonlyArray<string> => {
        const keys: Array<string> = []
        for (const name of entryNames(dir)) {
          const data = readOwnEntry(path.join(dir, name))
          const entry = data === undefined ? undefined : decodeEntry(data)
          if (entry !== undefined) keys.push(entry.key)
        }
        return keys.sort(compareCodePoints)
      },
      catch: readFailed(dir)
    })

  const operations = { set, get, list, delete: remove }
  return {
    spaceOf: (_sessionId, sessionDir) => kvDirOf(sessionDir),
    kernelEnv: {},
    ...operations,
    size: (dir) => Effect.sync(() => entriesSize(dir)),
    answer: (dir, params) => answerKvCall(operations, dir, params)
  }
}

/** The kv directory of a session directory. */
export const kvDirOf = (sessionDir: string): string => path.join(sessionDir, "kv")

/** Whether a bridge call is a kv call (answered by the host, not the embedder's bridge). */
export const isKvCall = (call: BridgeCall): boolean => call.method === KV_BRIDGE_METHOD

/** `bridge` with kv calls answered by `store` on `space`, everything else by `bridge` itself. */
export const withKvWrites = (
  bridge: AgentBridge["Service"],
  store: KvStoreService,
  space: string
): AgentBridge["Service"] => ({
  call: (call) => (isKvCall(call) ? store.answer(space, call.params) : bridge.call(call))
})

/** The host-side kv store. */
export class KvStore extends Context.Service<KvStore, KvStoreService>()("veyyon-eval/KvStore") {
  /** One store for the process. */
  static readonly Live: Layer.Layer<KvStore> = Layer.sync(KvStore, makeKvStore)
}
