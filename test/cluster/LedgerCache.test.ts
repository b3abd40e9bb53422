/**
 * What a runner remembers of a row and what a write from it changes: kept results are left
 * out of memory, a call done last is decided from the stored row, and a step's write merges
 * only the kept results of the lanes whose done call or result it changes.
 */
import { describe, expect, it } from "vitest"
import { cachedRow, changedResults, decidesFromCache } from "../../src/cluster/LedgerCache.ts"
import { EMPTY_LANE, type LedgerRow } from "../../src/cluster/LedgerDecision.ts"

const row = (lanes: LedgerRow["lanes"], owner = "A"): LedgerRow => ({ sessionId: "s", owner, ownerAddress: "a:1", generation: 1, ended: false, lanes })

describe("LedgerCache", () => {
  it("remembers its own rows without their kept results, and nobody else's", () => {
    const written = row({ py: { ...EMPTY_LANE, doneCall: "p1", doneResult: "{}" }, js: { ...EMPTY_LANE, inflightCall: "j1" } })
    expect(cachedRow(written, 4, "A")).toEqual({ row: row({ py: { ...EMPTY_LANE, doneCall: "p1" }, js: { ...EMPTY_LANE, inflightCall: "j1" } }), version: 4 })
    const plain = row({ js: { ...EMPTY_LANE, inflightCall: "j1" } })
    expect(cachedRow(plain, 5, "A")?.row).toBe(plain)
    expect(cachedRow(written, 4, "B")).toBeUndefined()
  })

  it("decides from memory unless the call is a lane's call done last", () => {
    const cached = { row: row({ py: { ...EMPTY_LANE, doneCall: "p1" }, js: { ...EMPTY_LANE, doneCall: "j1" } }), version: 1 }
    expect(decidesFromCache(cached, "p2")).toBe(true)
    expect(decidesFromCache(cached, "p1")).toBe(false)
    expect(decidesFromCache(cached, "j1")).toBe(false)
  })

  it("names only the kept results a step changes: a new done call or result, a new lane with one, a lane gone", () => {
    const cached = {
      row: row({ py: { ...EMPTY_LANE, doneCall: "p1" }, js: { ...EMPTY_LANE, doneCall: "j1" }, rb: { ...EMPTY_LANE, doneCall: "r1" }, sh: { ...EMPTY_LANE, doneCall: "s1" } }),
      version: 1
    }
    expect(changedResults(cached, { ...cached.row, lanes: { ...cached.row.lanes, py: { ...EMPTY_LANE, doneCall: "p1", inflightCall: "p2" } } })).toEqual({})
    expect(changedResults(cached, {
      ...cached.row,
      lanes: {
        py: { ...EMPTY_LANE, doneCall: "p2", doneResult: "{}" },
        js: { ...EMPTY_LANE, doneCall: "j1", doneResult: "[]" },
        sh: { ...EMPTY_LANE, doneCall: "s2" },
        go: { ...EMPTY_LANE, doneCall: "g1" },
        jl: { ...EMPTY_LANE, inflightCall: "l1" }
      }
    })).toEqual({ py: "{}", js: "[]", sh: null, go: null, rb: null })
  })
})
