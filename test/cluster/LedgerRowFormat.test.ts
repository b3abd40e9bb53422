/**
 * The ledger row's stored layouts: a format-1 row's one lane read as the lane of unknown
 * language, a format-2 row read back as written (kept results apart from the lanes), and a
 * newer or malformed row refused with a sentence.
 */
import { describe, expect, it } from "vitest"
import { EMPTY_LANE, LEGACY_LANE, type LedgerRow } from "../../src/cluster/LedgerDecision.ts"
import { LEDGER_FORMAT, readRow, type StoredRow, storedLanes, storedResults } from "../../src/cluster/LedgerRowFormat.ts"

const stored = (fields: Partial<StoredRow>): StoredRow => ({
  session_id: "s",
  owner: "A",
  owner_address: "a:1",
  generation: "3",
  inflight_call: null,
  lost_call: null,
  done_call: null,
  done_result: null,
  ended: false,
  version: "7",
  format: LEDGER_FORMAT,
  lanes: null,
  lane_results: null,
  ...fields
})

const header = { sessionId: "s", owner: "A", ownerAddress: "a:1", generation: 3, ended: false }

describe("readRow", () => {
  it("reads a format-1 row's calls as the lane of unknown language, and one without calls as no lane", () => {
    expect(readRow(stored({ format: 1, inflight_call: "c2", done_call: "c1", done_result: "{}" }))).toEqual({
      ...header,
      lanes: { [LEGACY_LANE]: { inflightCall: "c2", lostCall: null, doneCall: "c1", doneResult: "{}" } }
    })
    expect(readRow(stored({ format: 1, lost_call: "c0" }))).toEqual({ ...header, lanes: { [LEGACY_LANE]: { ...EMPTY_LANE, lostCall: "c0" } } })
    expect(readRow(stored({ format: 1, inflight_call: "c2" }))).toEqual({ ...header, lanes: { [LEGACY_LANE]: { ...EMPTY_LANE, inflightCall: "c2" } } })
    expect(readRow(stored({ format: 1, done_call: "c1" }))).toEqual({ ...header, lanes: { [LEGACY_LANE]: { ...EMPTY_LANE, doneCall: "c1" } } })
    expect(readRow(stored({ format: 1, done_result: "{}" }))).toEqual({ ...header, lanes: { [LEGACY_LANE]: { ...EMPTY_LANE, doneResult: "{}" } } })
    expect(readRow(stored({ format: 1 }))).toEqual({ ...header, lanes: {} })
  })

  it("reads a format-2 row back as it was written, each lane with its own kept result", () => {
    const row: LedgerRow = {
      ...header,
      lanes: {
        py: { inflightCall: "p2", lostCall: null, doneCall: "p1", doneResult: `{"p":1}` },
        js: { inflightCall: null, lostCall: "j0", doneCall: "j1", doneResult: null }
      }
    }
    expect(JSON.parse(storedResults(row))).toEqual({ py: `{"p":1}` })
    expect(storedLanes(row)).not.toContain(`{"p":1}`)
    expect(readRow(stored({ lanes: storedLanes(row), lane_results: storedResults(row) }))).toEqual(row)
    expect(readRow(stored({ lanes: null, lane_results: null }))).toEqual({ ...header, lanes: {} })
    expect(readRow(stored({ lanes: storedLanes(row), lane_results: `{"py":null}` }))).toEqual({
      ...row,
      lanes: { ...row.lanes, py: { ...row.lanes["py"]!, doneResult: null } }
    })
  })

  it("refuses a row of a newer format, naming both formats", () => {
    expect(readRow(stored({ format: LEDGER_FORMAT + 1 }))).toBe(
      `the ledger row of session s is format ${LEDGER_FORMAT + 1}, written by a newer release; this release reads formats up to ${LEDGER_FORMAT} (finish the upgrade of every runner)`
    )
  })

  it("refuses a format-2 row whose lanes or kept results do not parse", () => {
    const problem = "the ledger row of session s (format 2) does not parse: its lanes or kept results are not the JSON this format keeps"
    expect(readRow(stored({ lanes: "{" }))).toBe(problem)
    expect(readRow(stored({ lanes: `{"py":{"inflightCall":1,"lostCall":null,"doneCall":null}}` }))).toBe(problem)
    expect(readRow(stored({ lanes: `[]` }))).toBe(problem)
    expect(readRow(stored({ lane_results: `{"py":5}` }))).toBe(problem)
  })
})
