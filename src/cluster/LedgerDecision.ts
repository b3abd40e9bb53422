/**
 * What a runner does with an `Execute` call given the session's ledger row: run it, run it
 * on a fresh kernel with a notice (the session was re-homed), or answer it with a notice
 * and never run it (its cell was in flight on a runner that is gone, or it already ran).
 * Each language of a session has its own lane of calls, as its cells run beside the other
 * languages' ones; the owner, the generation and a re-home are the whole session's.
 * Pure: the ledger service applies the decision's next row.
 */

/** One language's calls in a session: its cells run one at a time, beside the other languages' cells. */
export interface CallLane {
  /** The call running now (or when its runner vanished). */
  readonly inflightCall: string | null
  /** A call whose cell was in flight on a runner that is gone: answered with a notice if it comes again. */
  readonly lostCall: string | null
  /** The last call that finished: a second delivery of it is answered, not run. */
  readonly doneCall: string | null
  /** That call's result as JSON, when it was small enough to keep: a second delivery gets it back. */
  readonly doneResult: string | null
}

/** A session's row in the ledger. */
export interface LedgerRow {
  readonly sessionId: string
  /** The runner incarnation holding the session's kernels, or null when none does. */
  readonly owner: string | null
  /** The owner's advertised address (host:port), for people reading the table. */
  readonly ownerAddress: string | null
  /** Bumped every time a runner takes the session over. */
  readonly generation: number
  /** True when the session was ended on purpose (`Reset`, `Shutdown`): the next cell starts fresh without a notice. */
  readonly ended: boolean
  /** The calls of each language that has any, by language (`LEGACY_LANE`: a format-1 row's calls). */
  readonly lanes: Readonly<Record<string, CallLane>>
}

/** The lane of a row written before lanes (format 1): its one lane of calls, whose language it did not record (a name no language has; stored in format-2 rows that keep it). */
export const LEGACY_LANE = ""

/** A lane without calls (a row keeps none). */
export const EMPTY_LANE: CallLane = { inflightCall: null, lostCall: null, doneCall: null, doneResult: null }

/** `language`'s lane in `row` (empty when it has none). */
export const laneOf = (row: LedgerRow, language: string): CallLane => row.lanes[language] ?? EMPTY_LANE

/** `lanes` with `language`'s lane replaced by `lane`. */
const withLane = (lanes: Readonly<Record<string, CallLane>>, language: string, lane: CallLane): Readonly<Record<string, CallLane>> => ({ ...lanes, [language]: lane })

/** Every lane's call in flight counted lost: its kernels are gone (a takeover, an end on purpose). */
const orphaned = (lanes: Readonly<Record<string, CallLane>>): Readonly<Record<string, CallLane>> =>
  Object.fromEntries(Object.entries(lanes).map(([language, lane]) => [language, { ...lane, inflightCall: null, lostCall: lane.inflightCall ?? lane.lostCall }]))

/** The language of the lane whose `slot` holds `callId`, if one does. */
const laneHolding = (lanes: Readonly<Record<string, CallLane>>, slot: "inflightCall" | "lostCall" | "doneCall", callId: string): string | undefined =>
  Object.keys(lanes).find((language) => lanes[language]![slot] === callId)

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

/**
 * Decides what runner `me` (at `address`) does with call `callId` of `language` on a
 * session whose row is `row`. A call is found by its id in any lane (ids are random), so
 * a format-1 row's calls are recognised whatever their language.
 */
export const decideExecute = (
  row: LedgerRow | undefined,
  sessionId: string,
  me: string,
  address: string,
  language: string,
  callId: string
): LedgerDecision => {
  if (row === undefined) {
    return {
      _tag: "Run",
      notice: undefined,
      next: { sessionId, owner: me, ownerAddress: address, generation: 1, ended: false, lanes: { [language]: { ...EMPTY_LANE, inflightCall: callId } } }
    }
  }
  const mine = row.owner === me
  const lostIn = laneHolding(row.lanes, "lostCall", callId) ?? (mine ? undefined : laneHolding(row.lanes, "inflightCall", callId))
  const takeOver = mine ? {} : { owner: me, ownerAddress: address, generation: row.generation + 1 }
  const lanes = mine ? row.lanes : orphaned(row.lanes)
  if (lostIn !== undefined) {
    return {
      _tag: "Answer",
      notice: LOST_CELL_NOTICE,
      next: { ...row, ...takeOver, ended: false, lanes: withLane(lanes, lostIn, { ...EMPTY_LANE, doneCall: callId }) }
    }
  }
  const doneIn = laneHolding(row.lanes, "doneCall", callId)
  if (doneIn !== undefined) {
    const kept = row.lanes[doneIn]!.doneResult
    return kept === null ? { _tag: "Answer", notice: ALREADY_RAN_NOTICE, next: undefined } : { _tag: "Replay", result: kept, next: undefined }
  }
  const next = { ...row, ...takeOver, ended: false, lanes: withLane(lanes, language, { ...laneOf({ ...row, lanes }, language), inflightCall: callId }) }
  if (mine) return { _tag: "Run", notice: undefined, next }
  return { _tag: "Run", notice: row.ended ? undefined : REHOMED_NOTICE, next }
}

/** The row after call `callId` of `language` finished on its owner, with its result as JSON when kept. */
export const finishedRow = (row: LedgerRow, language: string, callId: string, result: string | null): LedgerRow => {
  const lane = laneOf(row, language)
  return {
    ...row,
    lanes: withLane(row.lanes, language, { ...lane, inflightCall: lane.inflightCall === callId ? null : lane.inflightCall, doneCall: callId, doneResult: result })
  }
}

/** The row after the owner let the session go (its kernels are gone): the next runner's first cell carries the notice. */
export const releasedRow = (row: LedgerRow, me: string): LedgerRow =>
  row.owner === me ? { ...row, owner: null, ownerAddress: null } : row

/** The row after the session was ended on purpose (`Reset`, `Shutdown`). */
export const endedRow = (row: LedgerRow): LedgerRow => ({ ...row, owner: null, ownerAddress: null, ended: true, lanes: orphaned(row.lanes) })

/**
 * The address of the runner that holds the session with a call in flight, when another
 * runner gets one of its calls: that runner may be alive and finishing its cells (a shard
 * moving on a rebalance or a hand-off), so the new owner waits while it answers before it
 * takes the session over, which would call those cells lost.
 */
export const inflightElsewhere = (row: LedgerRow | undefined, me: string): string | undefined =>
  row !== undefined && row.owner !== null && row.owner !== me && row.ownerAddress !== null &&
    Object.values(row.lanes).some((lane) => lane.inflightCall !== null)
    ? row.ownerAddress
    : undefined
