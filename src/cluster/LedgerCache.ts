/**
 * What a runner remembers of the ledger rows of the sessions it owns, so a ledger step is
 * one conditional write: each row as this runner last wrote it, with the row's version.
 * The kept result (up to a MiB a session) is not remembered: a step that needs it (a call
 * delivered again after it finished) reads the row instead, and a write from a remembered
 * row leaves the stored result alone unless the step changes it. Pure.
 */
import type { LedgerRow } from "./LedgerDecision.ts"

/** A session's row as this runner last wrote it (its kept result left out) and the version that write gave it. */
export interface CachedRow {
  readonly row: LedgerRow
  readonly version: number
}

/** The entry to remember after `row` was written at `version` by runner `me`: none when the row is not `me`'s. */
export const cachedRow = (row: LedgerRow, version: number, me: string): CachedRow | undefined =>
  row.owner !== me ? undefined : { row: row.doneResult === null ? row : { ...row, doneResult: null }, version }

/** Whether call `callId` can be decided from the remembered row: not when it is the call done last, whose kept result the decision may need. */
export const decidesFromCache = (cached: CachedRow, callId: string): boolean => cached.row.doneCall !== callId

/**
 * Whether a call's decision, writing `next` over the remembered row, changes the kept result:
 * only when it changes the done call (a call answered as lost). A finished call's step always
 * writes its result.
 */
export const decisionWritesResult = (cached: CachedRow, next: LedgerRow): boolean => next.doneCall !== cached.row.doneCall
