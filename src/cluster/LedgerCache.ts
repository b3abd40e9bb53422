/**
 * What a runner remembers of the ledger rows of the sessions it owns, so a ledger step is
 * one conditional write: each row as this runner last wrote it, with the row's version.
 * The kept results (up to a MiB per language of a session) are not remembered: a step that
 * needs one (a call delivered again after it finished) reads the row instead, and a write
 * from a remembered row changes only the kept results of the lanes whose done call or
 * result the step changes. Pure.
 */
import type { LedgerRow } from "./LedgerDecision.ts"

/** A session's row as this runner last wrote it (its kept results left out) and the version that write gave it. */
export interface CachedRow {
  readonly row: LedgerRow
  readonly version: number
}

const withoutResults = (row: LedgerRow): LedgerRow =>
  Object.values(row.lanes).every((lane) => lane.doneResult === null)
    ? row
    : { ...row, lanes: Object.fromEntries(Object.entries(row.lanes).map(([language, lane]) => [language, { ...lane, doneResult: null }])) }

/** The entry to remember after `row` was written at `version` by runner `me`: none when the row is not `me`'s. */
export const cachedRow = (row: LedgerRow, version: number, me: string): CachedRow | undefined =>
  row.owner !== me ? undefined : { row: withoutResults(row), version }

/** Whether call `callId` can be decided from the remembered row: not when it is a lane's call done last, whose kept result the decision may need. */
export const decidesFromCache = (cached: CachedRow, callId: string): boolean =>
  Object.values(cached.row.lanes).every((lane) => lane.doneCall !== callId)

/**
 * The kept results a step writing `next` over the remembered row changes, by language (null:
 * none kept): the lanes whose done call or result differs from the remembered one's, new
 * lanes with a done call, and lanes gone from `next`. Empty when the step leaves every kept result as it is.
 */
export const changedResults = (cached: CachedRow, next: LedgerRow): Record<string, string | null> => {
  const changed: Record<string, string | null> = {}
  for (const [language, before] of Object.entries(cached.row.lanes)) {
    if (next.lanes[language] === undefined) changed[language] = null
    else if (before.doneCall !== next.lanes[language].doneCall || before.doneResult !== next.lanes[language].doneResult) changed[language] = next.lanes[language].doneResult
  }
  for (const [language, lane] of Object.entries(next.lanes)) {
    if (cached.row.lanes[language] === undefined && lane.doneCall !== null) changed[language] = lane.doneResult
  }
  return changed
}
