/**
 * Room `snapshots`: sessions that outlive their kernels. A snapshot of a session's user
 * state (one per language) is sealed (this module), kept by a `SnapshotStore` (files in a
 * private directory, or a cluster's database), saved after cells and restored into a fresh
 * kernel by `SessionSnapshots`, and explained to the caller by `SnapshotNotice`. It uses
 * the kernel, storage and settings; the registry uses it.
 *
 * The seal: loading a snapshot runs code (unpickling), so a snapshot is loaded only when
 * its metadata carries a valid HMAC-SHA256 under a key private to the install (or the
 * cluster's secret), names the session and language it is loaded for, and its payload
 * hashes to the digest the metadata holds. The MAC covers the metadata's exact text, which
 * holds the payload's SHA-256, so the payload is authenticated without a MAC of its own and
 * the metadata can be renewed (a later cell, same state) without reading the payload.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import { Result, Schema } from "effect"
import { SkippedName } from "../../kernel/Frame.ts"

/** The metadata format this release writes and reads. */
export const SNAPSHOT_FORMAT = 1

/** What the host records of a snapshot beside its payload. */
export const SnapshotMeta = Schema.Struct({
  format: Schema.Literal(SNAPSHOT_FORMAT),
  sessionId: Schema.String,
  language: Schema.String,
  /** The execution count of the last cell the state includes. */
  asOfCell: Schema.Number,
  /** The first line of that cell's code, shortened, to name it. */
  cellTitle: Schema.String,
  /** Hex SHA-256 of the payload. */
  digest: Schema.String,
  bytes: Schema.Number,
  names: Schema.Array(Schema.String),
  skipped: Schema.Array(SkippedName),
  /** Milliseconds since the epoch. */
  savedAt: Schema.Number
})
/** A snapshot's metadata. */
export type SnapshotMeta = typeof SnapshotMeta.Type

/** Sealed metadata: its exact text and the MAC over it. */
export interface SealedMeta {
  readonly text: string
  readonly mac: string
}

const DOMAIN = "veyyon-snapshot-v1\u0000"

const macOf = (key: Uint8Array, text: string): Buffer => createHmac("sha256", key).update(DOMAIN).update(text, "utf8").digest()

/** Seals `meta` under `key`. */
export const sealMeta = (key: Uint8Array, meta: SnapshotMeta): SealedMeta => {
  const text = JSON.stringify(meta)
  return { text, mac: macOf(key, text).toString("hex") }
}

const decodeMeta = Schema.decodeUnknownResult(Schema.fromJsonString(SnapshotMeta))

/** The metadata of a sealed text whose MAC is valid under `key` and which belongs to `sessionId` and `language`, else why it is refused. */
export const openMeta = (key: Uint8Array, sealed: SealedMeta, sessionId: string, language: string): Result.Result<SnapshotMeta, string> => {
  const expected = macOf(key, sealed.text)
  const given = /^[0-9a-f]{64}$/.test(sealed.mac) ? Buffer.from(sealed.mac, "hex") : Buffer.alloc(0)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return Result.fail("its seal does not match: it was modified, or sealed with another key")
  }
  const meta = decodeMeta(sealed.text)
  if (Result.isFailure(meta)) return Result.fail("its metadata is not in a format this release reads")
  if (meta.success.sessionId !== sessionId) return Result.fail("it belongs to another session")
  if (meta.success.language !== language) return Result.fail(`it holds ${meta.success.language} state, not ${language}`)
  return Result.succeed(meta.success)
}

/** Hex SHA-256 of a payload. */
export const payloadDigest = (payload: Uint8Array): string => createHash("sha256").update(payload).digest("hex")

/** Why `payload` is not the one `meta` was sealed with, or undefined when it is. */
export const payloadProblem = (meta: SnapshotMeta, payload: Uint8Array): string | undefined =>
  payload.length !== meta.bytes || payloadDigest(payload) !== meta.digest ? "its payload was modified after it was sealed" : undefined
