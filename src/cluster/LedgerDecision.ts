/**
 * What a runner does with an `Execute` call given the session's ledger row: run it, run it
 * on a fresh kernel with a notice (the session was re-homed), or answer it with a notice
 * and never run it (its cell was in flight on a runner that is gone, or it already ran).
 * Pure: the ledger service applies the decision's next row.
 */

/** A session's row in the ledger. */
export interface LedgerRow {
  readonly sessionId: string
  /** The runner incarnation holding the session's kernels, or null when none does. */
  readonly owner: string | null
  /** The owner's advertised address (host:port), for people reading the table. */
  readonly ownerAddress: string | null
  /** Bumped every time a runner takes the session over. */
  readonly generation: number
  /** The call running now (or when its runner vanished). */
  readonly inflightCall: string | null
  /** A call whose cell was in flight on a runner that is gone: answered with a notice if it comes again. */
  readonly lostCall: string | null
  /** The last call that finished: a second delivery of it is answered, not run. */
  readonly doneCall: string | null
  /** That call's result as JSON, when it was small enough to keep: a second delivery gets it back. */
  readonly doneResult: string | null
  /** True when the session was ended on purpose (`Reset`, `Shutdown`): the next cell starts fresh without a notice. */
  readonly ended: boolean
}

/** The notice of a call whose cell was running when its runner was lost. */
export const LOST_CELL_NOTICE =
  "the kernel's host was lost during this cell; it may have partly run, and it was not run again. kv is kept; the session's variables come back " +
  "at its next cell as of its last snapshot (with snapshots off, they are gone)."

/** The notice of the first call on a session that moved to another runner. */
export const REHOMED_NOTICE =
  "this session's kernel was gone (its runner stopped or handed the session off, the cluster rebalanced, or the kernel idled out) and this cell ran in a fresh kernel: " +
  "kv is kept, and variables as far as the session's snapshot restored them (the notice after this one says; with snapshots off, they are gone)."

/** The notice of a call delivered again after it finished. */
export const ALREADY_RAN_NOTICE = "this call already ran; its answer was lost on the way and the cell was not run again."

/** What to do with one call. */
export type LedgerDecision =
  | { readonly _tag: "Run"; readonly notice: string | undefined; readonly next: LedgerRow }
  | { readonly _tag: "Answer"; readonly notice: string; readonly next: LedgerRow | undefined }
  | { readonly _tag: "Replay"; readonly result: string; readonly next: undefined }

/** Decides what runner `me` (at `address`) does with call `callId` on a session whose row is `row`. */
export const decideExecute = (
  row: LedgerRow | undefined,
  sessionId: string,
  me: string,
  address: string,
  callId: string
): LedgerDecision => {
  if (row === undefined) {
    return {
      _tag: "Run",
      notice: undefined,
      next: { sessionId, owner: me, ownerAddress: address, generation: 1, inflightCall: callId, lostCall: null, doneCall: null, doneResult: null, ended: false }
    }
  }
  const mine = row.owner === me
  const lostHere = row.lostCall === callId || (!mine && row.inflightCall === callId)
  const takeOver = mine ? {} : { owner: me, ownerAddress: address, generation: row.generation + 1 }
  if (lostHere) {
    return {
      _tag: "Answer",
      notice: LOST_CELL_NOTICE,
      next: { ...row, ...takeOver, inflightCall: null, lostCall: null, doneCall: callId, doneResult: null, ended: false }
    }
  }
  if (row.doneCall === callId) {
    return row.doneResult === null
      ? { _tag: "Answer", notice: ALREADY_RAN_NOTICE, next: undefined }
      : { _tag: "Replay", result: row.doneResult, next: undefined }
  }
  if (mine) return { _tag: "Run", notice: undefined, next: { ...row, inflightCall: callId } }
  return {
    _tag: "Run",
    notice: row.ended ? undefined : REHOMED_NOTICE,
    next: { ...row, ...takeOver, inflightCall: callId, lostCall: row.inflightCall ?? row.lostCall, ended: false }
  }
}

/** The row after call `callId` finished on its owner, with its result as JSON when kept. */
export const finishedRow = (row: LedgerRow, callId: string, result: string | null): LedgerRow =>
  ({ ...row, inflightCall: row.inflightCall === callId ? null : row.inflightCall, doneCall: callId, doneResult: result })

/** The row after the owner let the session go (its kernels are gone): the next runner's first cell carries the notice. */
export const releasedRow = (row: LedgerRow, me: string): LedgerRow =>
  row.owner === me ? { ...row, owner: null, ownerAddress: null } : row

/** The row after the session was ended on purpose (`Reset`, `Shutdown`). */
export const endedRow = (row: LedgerRow): LedgerRow =>
  ({ ...row, owner: null, ownerAddress: null, ended: true, lostCall: row.inflightCall ?? row.lostCall, inflightCall: null })

/**
 * The address of the runner that still holds call `callId` in flight, when another runner
 * got it: that runner may be alive and finishing the cell (a shard moving on a rebalance
 * or a hand-off), so the new owner waits while it answers before calling the cell lost.
 */
export const inflightElsewhere = (row: LedgerRow | undefined, me: string, callId: string): string | undefined =>
  row !== undefined && row.owner !== null && row.owner !== me && row.inflightCall === callId && row.ownerAddress !== null
    ? row.ownerAddress
    : undefined
