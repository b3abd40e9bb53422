/**
 * Where sealed snapshots are kept: one per session and language, the metadata (sealed) and
 * the payload. The store neither seals nor opens; `SessionSnapshots` does, with the store's
 * `key`. `FileSnapshotStore` keeps them in a private directory; a cluster keeps them in its
 * database.
 */
import { Context, type Effect, Schema } from "effect"
import type { SealedMeta } from "./SnapshotSeal.ts"

/** A snapshot as stored: the sealed metadata and the payload (not yet checked). */
export interface StoredSnapshot {
  readonly sealed: SealedMeta
  readonly payload: Uint8Array
}

/** A stored snapshot's sealed metadata, with when it was last written. */
export interface StoredSnapshotMeta {
  readonly sealed: SealedMeta
  readonly modifiedAt: number
}

/** Reading or writing the store failed. */
export class SnapshotStoreError extends Schema.TaggedError<SnapshotStoreError>()("SnapshotStoreError", {
  reason: Schema.String
}) {
  override get message(): string {
    return `the session snapshot store failed: ${this.reason}`
  }
}

/** The store service. */
export interface SnapshotStoreService {
  /** The key this store's snapshots are sealed with. */
  readonly key: Uint8Array
  /** Keeps a sealed snapshot of `digest`; `payload` undefined keeps the payload stored (it has that digest). */
  readonly write: (
    sessionId: string,
    language: string,
    sealed: SealedMeta,
    digest: string,
    payload: Uint8Array | undefined
  ) => Effect.Effect<void, SnapshotStoreError>
  /** The stored snapshot of a session and language, if any. */
  readonly read: (sessionId: string, language: string) => Effect.Effect<StoredSnapshot | undefined, SnapshotStoreError>
  /** Forgets a session's snapshot of `language`, or all of them. */
  readonly remove: (sessionId: string, language?: string) => Effect.Effect<void, SnapshotStoreError>
  /** The metadata of every stored snapshot. */
  readonly list: Effect.Effect<ReadonlyArray<StoredSnapshotMeta>, SnapshotStoreError>
}

/** The store of session snapshots in context. */
export class SnapshotStore extends Context.Service<SnapshotStore, SnapshotStoreService>()("veyyon-eval/SnapshotStore") {}
