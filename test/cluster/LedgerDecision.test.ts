import { describe, expect, it } from "vitest"
import {
  ALREADY_RAN_NOTICE,
  type CallLane,
  decideExecute,
  EMPTY_LANE,
  laneOf,
  LEGACY_LANE,
  endedRow,
  finishedRow,
  inflightElsewhere,
  type LedgerDecision,
  type LedgerRow,
  LOST_CELL_NOTICE,
  REHOMED_NOTICE,
  releasedRow
} from "../../src/cluster/LedgerDecision.ts"

const noticeOf = (decision: LedgerDecision): string | undefined => ("notice" in decision ? decision.notice : undefined)

type LaneFields = Partial<CallLane>

/** A row of runner A whose "py" lane has `lane` (and `fields` for the session). */
const row = (lane: LaneFields = {}, fields: Partial<LedgerRow> = {}): LedgerRow => {
  const py = { ...EMPTY_LANE, ...lane }
  const empty = py.inflightCall === null && py.lostCall === null && py.doneCall === null && py.doneResult === null
  return { sessionId: "s", owner: "A", ownerAddress: "a:1", generation: 1, ended: false, lanes: empty ? {} : { py }, ...fields }
}

const decide = (found: LedgerRow | undefined, me: string, callId: string, language = "py") =>
  decideExecute(found, "s", me, me === "A" ? "a:1" : "b:1", language, callId)

const takenByB = { owner: "B", ownerAddress: "b:1", generation: 2 }

describe("decideExecute", () => {
  it("runs the first call of a new session without a notice and records it in flight in its language's lane", () => {
    expect(decide(undefined, "A", "c1")).toEqual({ _tag: "Run", notice: undefined, next: row({ inflightCall: "c1" }) })
    expect(decide(undefined, "A", "j1", "js").next?.lanes).toEqual({ js: { ...EMPTY_LANE, inflightCall: "j1" } })
  })

  it("runs calls on the session's own runner without a notice", () => {
    const decision = decide(row({ doneCall: "c1" }), "A", "c2")
    expect(decision._tag).toBe("Run")
    expect(noticeOf(decision)).toBeUndefined()
    expect(decision.next).toEqual(row({ doneCall: "c1", inflightCall: "c2" }))
  })

  it("runs a call of another language beside the one in flight, in a lane of its own", () => {
    const decision = decide(row({ inflightCall: "c1" }), "A", "j1", "js")
    expect(decision).toEqual({ _tag: "Run", notice: undefined, next: row({ inflightCall: "c1" }, { lanes: { py: { ...EMPTY_LANE, inflightCall: "c1" }, js: { ...EMPTY_LANE, inflightCall: "j1" } } }) })
    const finished = finishedRow(decision.next!, "js", "j1", "{}")
    expect(laneOf(finished, "py").inflightCall).toBe("c1")
    expect(laneOf(finished, "js")).toEqual({ inflightCall: null, lostCall: null, doneCall: "j1", doneResult: "{}" })
  })

  it("answers the dead owner's in-flight call with the lost-cell notice, never runs it, and takes the session over", () => {
    const decision = decide(row({ inflightCall: "c1" }), "B", "c1")
    expect(decision._tag).toBe("Answer")
    expect(noticeOf(decision)).toBe(LOST_CELL_NOTICE)
    expect(decision.next).toEqual(row({ doneCall: "c1" }, takenByB))
  })

  it("taking a session over for one language counts every lane's call in flight lost, and answers each with the notice", () => {
    const both = row({ inflightCall: "c1" }, { lanes: { py: { ...EMPTY_LANE, inflightCall: "c1" }, js: { ...EMPTY_LANE, inflightCall: "j1", doneCall: "j0" } } })
    const decision = decide(both, "B", "j1", "js")
    expect(decision).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    expect(decision.next).toEqual(row({}, { ...takenByB, lanes: { py: { ...EMPTY_LANE, lostCall: "c1" }, js: { ...EMPTY_LANE, doneCall: "j1" } } }))
    expect(decide(decision.next, "B", "c1")).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    const fresh = decide(both, "B", "r1", "rb")
    expect(fresh).toMatchObject({ _tag: "Run", notice: REHOMED_NOTICE })
    expect(fresh.next?.lanes).toEqual({ py: { ...EMPTY_LANE, lostCall: "c1" }, js: { ...EMPTY_LANE, lostCall: "j1", doneCall: "j0" }, rb: { ...EMPTY_LANE, inflightCall: "r1" } })
  })

  it("finds a call by its id in any lane: a format-1 row's one lane, whose language is unknown, included", () => {
    expect(LEGACY_LANE).toBe("")
    const legacy = row({}, { lanes: { [LEGACY_LANE]: { ...EMPTY_LANE, inflightCall: "c1", doneCall: "c0", doneResult: "{}" } } })
    expect(decide(legacy, "B", "c0", "js")).toEqual({ _tag: "Replay", result: "{}", next: undefined })
    expect(decide(legacy, "B", "c1", "js")).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
    expect(decide(legacy, "A", "c1", "js")).toMatchObject({ _tag: "Run", notice: undefined })
  })

  it("runs a different call on a re-homed session with the re-home notice and keeps the lost call to refuse it later", () => {
    const decision = decide(row({ inflightCall: "c1" }), "B", "c2")
    expect(decision._tag).toBe("Run")
    expect(noticeOf(decision)).toBe(REHOMED_NOTICE)
    expect(decision.next).toEqual(row({ inflightCall: "c2", lostCall: "c1" }, takenByB))
    const later = decide(decision.next, "B", "c1")
    expect(later._tag).toBe("Answer")
    expect(noticeOf(later)).toBe(LOST_CELL_NOTICE)
  })

  it("gives the re-home notice after a graceful release too (the kernels were ended)", () => {
    const released = releasedRow(row({ doneCall: "c1" }), "A")
    expect(released.owner).toBeNull()
    const again = decide(released, "A", "c2")
    expect(noticeOf(again)).toBe(REHOMED_NOTICE)
    expect(again.next?.generation).toBe(2)
  })

  it("answers a call delivered again after it finished, without running it", () => {
    const done = finishedRow(row({ inflightCall: "c1" }), "py", "c1", null)
    expect(laneOf(done, "py").inflightCall).toBeNull()
    expect(decide(done, "A", "c1")).toEqual({ _tag: "Answer", notice: ALREADY_RAN_NOTICE, next: undefined })
  })

  it("gives a call delivered again after it finished its kept result, without running it (on any runner)", () => {
    const done = finishedRow(row({ inflightCall: "c1" }), "py", "c1", "{\"status\":\"ok\"}")
    expect(decide(done, "B", "c1")).toEqual({ _tag: "Replay", result: "{\"status\":\"ok\"}", next: undefined })
  })

  it("starts fresh without a notice after the session was ended on purpose, wherever the next cell runs", () => {
    const ended = endedRow(row({ doneCall: "c1" }))
    const decision = decide(ended, "B", "c2")
    expect(decision._tag).toBe("Run")
    expect(noticeOf(decision)).toBeUndefined()
    expect(decision.next?.ended).toBe(false)
  })

  it("keeps every lane's cell in flight at the end as lost, so its re-delivery is answered and not run", () => {
    const ended = endedRow(row({ inflightCall: "c1" }, { lanes: { py: { ...EMPTY_LANE, inflightCall: "c1" }, js: { ...EMPTY_LANE, inflightCall: "j1" } } }))
    expect(decide(ended, "A", "c1")._tag).toBe("Answer")
    expect(decide(ended, "A", "j1", "js")._tag).toBe("Answer")
  })

  it("leaves another runner's row alone on release", () => {
    expect(releasedRow(row(), "B")).toEqual(row())
  })

  it("names the old owner to wait for only while it holds the session with a call in flight, in any lane", () => {
    expect(inflightElsewhere(row({ inflightCall: "c1" }), "B")).toBe("a:1")
    expect(inflightElsewhere(row({}, { lanes: { js: { ...EMPTY_LANE, inflightCall: "j1" } } }), "B")).toBe("a:1")
    expect(inflightElsewhere(row({ doneCall: "c1", lostCall: "c0" }), "B")).toBeUndefined()
    expect(inflightElsewhere(row({ doneCall: "c1" }, { lanes: { py: { ...EMPTY_LANE, doneCall: "c1" }, js: { ...EMPTY_LANE, inflightCall: "j1" } } }), "B")).toBe("a:1")
    expect(inflightElsewhere(row({ inflightCall: "c1" }), "A")).toBeUndefined()
    expect(inflightElsewhere(releasedRow(row({ inflightCall: "c1" }), "A"), "B")).toBeUndefined()
    expect(inflightElsewhere(undefined, "B")).toBeUndefined()
    expect(inflightElsewhere(row({ inflightCall: "c1" }, { owner: null }), "B")).toBeUndefined()
    expect(inflightElsewhere(row({ inflightCall: "c1" }, { ownerAddress: null }), "B")).toBeUndefined()
  })
})

describe("finishedRow", () => {
  it("clears the in-flight marker of the call that finished and keeps its result", () => {
    expect(finishedRow(row({ inflightCall: "c1" }), "py", "c1", "{}")).toEqual(row({ inflightCall: null, doneCall: "c1", doneResult: "{}" }))
  })

  it("a late finish of an older call keeps the current call in flight, so its loss is still detected", () => {
    const late = finishedRow(row({ inflightCall: "c2" }), "py", "c1", null)
    expect(laneOf(late, "py").inflightCall).toBe("c2")
    expect(decide(late, "B", "c2")).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
  })

  it("leaves the other lanes as they are", () => {
    const both = row({}, { lanes: { js: { ...EMPTY_LANE, inflightCall: "j1" } } })
    expect(finishedRow(both, "py", "c1", null).lanes).toEqual({ js: { ...EMPTY_LANE, inflightCall: "j1" }, py: { ...EMPTY_LANE, doneCall: "c1" } })
  })
})

describe("notices", () => {
  it("say what happened in words a person can act on", () => {
    expect(LOST_CELL_NOTICE).toBe(
      "the kernel's host was lost during this cell; it may have partly run, and it was not run again. kv is kept; the session's variables come back " +
        "at its next cell as of its last snapshot (with snapshots off, they are gone)."
    )
    expect(REHOMED_NOTICE).toBe(
      "this session's kernel was gone (its runner stopped or handed the session off, the cluster rebalanced, or the kernel idled out) and this cell ran in a fresh kernel: " +
        "kv is kept, and variables as far as the session's snapshot restored them (the notice after this one says; with snapshots off, they are gone)."
    )
    expect(ALREADY_RAN_NOTICE).toBe("this call already ran; its answer was lost on the way and the cell was not run again.")
  })
})
