/**
 * Snapshots and restores of a kernel's user state (see PROTOCOL.md, "Snapshots and
 * restores"): a snapshot collects the runner's payload between cells, which it never
 * holds back (the runner yields to a cell); a restore hands a payload back in pieces
 * before the first cell. Each waits for its end, the kernel's death or a generous
 * timeout, whichever comes first. The payload is the runner's own, checked here only
 * against the digest and length the runner announced.
 */
import { createHash } from "node:crypto"
import { Deferred, Duration, Effect } from "effect"
import type { RestoreDoneFrame, SkippedName, SnapshotDoneFrame } from "./Frame.ts"
import { KernelClosed } from "./KernelError.ts"
import type { QueryContext } from "./Queries.ts"

/** The most payload bytes one `restore` piece carries (decoded). */
export const RESTORE_PIECE_BYTES = 4 * 1024 * 1024

/** How long a snapshot or a restore may take before the host stops waiting for it. */
export const STATE_TRANSFER_TIMEOUT = Duration.minutes(10)

/** What the host asks a snapshot to respect. */
export interface SnapshotOptions {
  /** Bytes the whole payload may take. */
  readonly budget: number
  /** Bytes one value may take. */
  readonly valueBudget: number
  /** The digest of the payload the host holds, if any. */
  readonly known?: string | undefined
}

/** A snapshot's end: the payload when `saved`, else why there is none. */
export interface TakenSnapshot {
  readonly status: SnapshotDoneFrame["status"]
  /** The payload (`saved` only). */
  readonly payload: Uint8Array | undefined
  /** Hex SHA-256 of the payload (`saved` and `unchanged`). */
  readonly digest: string | undefined
  readonly names: ReadonlyArray<string>
  readonly skipped: ReadonlyArray<SkippedName>
  /** Why nothing was saved (`failed`). */
  readonly error: string | undefined
}

/** A restore's end: what came back and what did not; `error` when nothing could be read. */
export interface RestoreOutcome {
  readonly restored: ReadonlyArray<string>
  readonly skipped: ReadonlyArray<SkippedName>
  readonly error: string | undefined
}

/** A kernel's snapshot and restore. */
export interface StateTransfers {
  /** Sends the request (the outer effect, so it precedes any later cell) and gives the wait for its end. */
  readonly snapshot: (options: SnapshotOptions) => Effect.Effect<Effect.Effect<TakenSnapshot, KernelClosed>, KernelClosed>
  readonly restore: (payload: Uint8Array, executionCount?: number) => Effect.Effect<RestoreOutcome, KernelClosed>
}

const failed = (error: string): TakenSnapshot => ({ status: "failed", payload: undefined, digest: undefined, names: [], skipped: [], error })

const concat = (chunks: ReadonlyArray<Uint8Array>, bytes: number): Uint8Array => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes))

/** The snapshot of a `done` frame over the chunks that came before it, checked against what it announced. */
export const takenSnapshot = (frame: SnapshotDoneFrame, chunks: ReadonlyArray<Uint8Array>, bytes: number): TakenSnapshot => {
  const common = { names: frame.names, skipped: frame.skipped, error: frame.error }
  if (frame.status !== "saved") return { ...common, status: frame.status, payload: undefined, digest: frame.digest }
  if (frame.digest === undefined || frame.bytes !== bytes) return failed(`the runner announced ${frame.bytes ?? "no"} bytes and a digest ${frame.digest ?? "(none)"}, and sent ${bytes} bytes`)
  const payload = concat(chunks, bytes)
  const digest = createHash("sha256").update(payload).digest("hex")
  if (digest !== frame.digest) return failed("the payload the runner sent does not match the digest it announced")
  return { ...common, status: "saved", payload, digest }
}

/** The snapshot and restore of the kernel `context` describes. */
export const stateTransfers = (context: QueryContext): StateTransfers => {
  /** Sends a request (the outer effect) and gives the wait for its end (the inner one). */
  const transfer = <A>(
    prefix: string,
    maxBytes: number,
    send: (id: string) => Effect.Effect<void, KernelClosed>,
    end: (frame: SnapshotDoneFrame | RestoreDoneFrame, chunks: ReadonlyArray<Uint8Array>, bytes: number) => A,
    onFailure: (reason: string) => A
  ): Effect.Effect<Effect.Effect<A, KernelClosed>, KernelClosed> =>
    Effect.gen(function*() {
      if (context.closed()) return yield* new KernelClosed({ reason: "it was shut down" })
      const id = context.table.newId(prefix)
      const state = { chunks: [] as Array<Uint8Array>, bytes: 0, maxBytes, ended: Deferred.makeUnsafe<SnapshotDoneFrame | RestoreDoneFrame, string>() }
      context.table.transfers.set(id, state)
      const forget = Effect.sync(() => context.table.transfers.delete(id))
      yield* Effect.onError(send(id), () => forget)
      const ended = Effect.flatMap(context.dead, () => new KernelClosed({ reason: "it ended before answering" }))
      return Effect.raceFirst(
        Deferred.await(state.ended).pipe(
          Effect.map((frame) => end(frame, state.chunks, state.bytes)),
          Effect.catch((reason: string) => Effect.succeed(onFailure(reason)))
        ),
        ended
      ).pipe(
        Effect.timeoutOrElse({
          duration: STATE_TRANSFER_TIMEOUT,
          orElse: () => Effect.succeed(onFailure(`the kernel did not answer within ${Duration.format(STATE_TRANSFER_TIMEOUT)}`))
        }),
        Effect.ensuring(forget)
      )
    })

  return {
    snapshot: (options) =>
      transfer(
        "s",
        options.budget,
        (id) => context.write({ type: "snapshot", id, budget: options.budget, valueBudget: options.valueBudget, ...(options.known === undefined ? {} : { known: options.known }) }),
        (frame, chunks, bytes) => frame.type === "snapshot_done" ? takenSnapshot(frame, chunks, bytes) : failed(`the runner answered a snapshot with ${frame.type}`),
        failed
      ),
    restore: (payload, executionCount) =>
      Effect.flatten(transfer(
        "t",
        0,
        (id) =>
          Effect.gen(function*() {
            const pieces = Math.max(1, Math.ceil(payload.length / RESTORE_PIECE_BYTES))
            for (let piece = 0; piece < pieces; piece++) {
              const start = piece * RESTORE_PIECE_BYTES
              const data = Buffer.from(payload.buffer, payload.byteOffset + start, Math.min(RESTORE_PIECE_BYTES, payload.length - start)).toString("base64")
              const more = piece < pieces - 1
              yield* context.write({ type: "restore", id, data, more, ...(more || executionCount === undefined ? {} : { executionCount }) })
            }
          }),
        (frame): RestoreOutcome =>
          frame.type === "restore_done"
            ? { restored: frame.restored, skipped: frame.skipped, error: frame.error }
            : { restored: [], skipped: [], error: `the runner answered a restore with ${frame.type}` },
        (reason): RestoreOutcome => ({ restored: [], skipped: [], error: reason })
      ))
  }
}
