/**
 * How a ledger row is stored, by its `format` column (separate from its concurrency
 * `version`). Format 1 (rows of the releases before language lanes, and before the column)
 * keeps one lane of calls in the columns `inflight_call`, `lost_call`, `done_call` and
 * `done_result`; it is read as `LEGACY_LANE`, whose calls are found by id whatever their
 * language. Format 2 keeps every language's lane in `lanes` (JSON, without results) and the
 * kept results in `lane_results` (JSON, by language), and leaves the format-1 columns null.
 * A row of a newer format, or one that does not parse, is refused with a sentence. Pure.
 */
import { Exit, Schema } from "effect"
import { type CallLane, EMPTY_LANE, LEGACY_LANE, type LedgerRow } from "./LedgerDecision.ts"

/** The format of the rows this release writes, and the newest it reads. */
export const LEDGER_FORMAT = 2

/** A row as Postgres returns it. */
export interface StoredRow {
  readonly session_id: string
  readonly owner: string | null
  readonly owner_address: string | null
  readonly generation: number | string
  readonly inflight_call: string | null
  readonly lost_call: string | null
  readonly done_call: string | null
  readonly done_result: string | null
  readonly ended: boolean
  readonly version: number | string
  readonly format: number
  readonly lanes: string | null
  readonly lane_results: string | null
}

/** Why this release must not act on a row of `format`, or undefined when it may. */
export const rowFormatProblem = (sessionId: string, format: number): string | undefined =>
  format <= LEDGER_FORMAT
    ? undefined
    : `the ledger row of session ${sessionId} is format ${format}, written by a newer release; this release reads formats up to ${LEDGER_FORMAT} (finish the upgrade of every runner)`

const StoredLanes = Schema.fromJsonString(Schema.Record(
  Schema.String,
  Schema.Struct({ inflightCall: Schema.NullOr(Schema.String), lostCall: Schema.NullOr(Schema.String), doneCall: Schema.NullOr(Schema.String) })
))
const StoredResults = Schema.fromJsonString(Schema.Record(Schema.String, Schema.NullOr(Schema.String)))
const decodeLanes = Schema.decodeUnknownExit(StoredLanes)
const decodeResults = Schema.decodeUnknownExit(StoredResults)

const legacyLanes = (stored: StoredRow): Record<string, CallLane> => {
  const lane = { inflightCall: stored.inflight_call, lostCall: stored.lost_call, doneCall: stored.done_call, doneResult: stored.done_result }
  return lane.inflightCall === null && lane.lostCall === null && lane.doneCall === null && lane.doneResult === null ? {} : { [LEGACY_LANE]: lane }
}

/** The row `stored` holds, or why this release cannot read it. */
export const readRow = (stored: StoredRow): LedgerRow | string => {
  const format = Number(stored.format)
  const problem = rowFormatProblem(stored.session_id, format)
  if (problem !== undefined) return problem
  const header = {
    sessionId: stored.session_id,
    owner: stored.owner,
    ownerAddress: stored.owner_address,
    generation: Number(stored.generation),
    ended: stored.ended
  }
  if (format < 2) return { ...header, lanes: legacyLanes(stored) }
  const lanes = decodeLanes(stored.lanes ?? "{}")
  const results = decodeResults(stored.lane_results ?? "{}")
  if (Exit.isFailure(lanes) || Exit.isFailure(results)) {
    return `the ledger row of session ${stored.session_id} (format ${format}) does not parse: its lanes or kept results are not the JSON this format keeps`
  }
  return {
    ...header,
    lanes: Object.fromEntries(Object.entries(lanes.value).map(([language, lane]) => [language, { ...EMPTY_LANE, ...lane, doneResult: results.value[language] ?? null }]))
  }
}

/** A row's lanes as format 2 stores them, without their kept results (JSON). */
export const storedLanes = (row: LedgerRow): string =>
  JSON.stringify(Object.fromEntries(Object.entries(row.lanes).map(([language, lane]) => [language, { inflightCall: lane.inflightCall, lostCall: lane.lostCall, doneCall: lane.doneCall }])))

/** A row's kept results as format 2 stores them, by language (JSON). */
export const storedResults = (row: LedgerRow): string =>
  JSON.stringify(Object.fromEntries(Object.entries(row.lanes).flatMap(([language, lane]) => (lane.doneResult === null ? [] : [[language, lane.doneResult]]))))
