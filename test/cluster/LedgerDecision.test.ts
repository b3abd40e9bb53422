import { describe, expect, it } from "vitest"
import {
  ALREADY_RAN_NOTICE,
  decideExecute,
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

const row = (fields: Partial<LedgerRow> = {}): LedgerRow => ({
  sessionId: "s",
  owner: "A",
  ownerAddress: "a:1",
  generation: 1,
  inflightCall: null,
  lostCall: null,
  doneCall: null,
  doneResult: null,
  ended: false,
  ...fields
})

describe("decideExecute", () => {
  it("runs the first call of a new session without a notice and records it in flight", () => {
    const decision = decideExecute(undefined, "s", "A", "a:1", "c1")
    expect(decision).toEqual({ _tag: "Run", notice: undefined, next: row({ inflightCall: "c1" }) })
  })

  it("runs calls on the session's own runner without a notice", () => {
    const decision = decideExecute(row({ doneCall: "c1" }), "s", "A", "a:1", "c2")
    expect(decision._tag).toBe("Run")
    expect(noticeOf(decision)).toBeUndefined()
    expect(decision.next).toEqual(row({ doneCall: "c1", inflightCall: "c2" }))
  })

  it("answers the dead owner's in-flight call with the lost-cell notice, never runs it, and takes the session over", () => {
    const decision = decideExecute(row({ inflightCall: "c1" }), "s", "B", "b:1", "c1")
    expect(decision._tag).toBe("Answer")
    expect(noticeOf(decision)).toBe(LOST_CELL_NOTICE)
    expect(decision.next).toEqual(row({ owner: "B", ownerAddress: "b:1", generation: 2, inflightCall: null, doneCall: "c1" }))
  })

  it("runs a different call on a re-homed session with the re-home notice and keeps the lost call to refuse it later", () => {
    const decision = decideExecute(row({ inflightCall: "c1" }), "s", "B", "b:1", "c2")
    expect(decision._tag).toBe("Run")
    expect(noticeOf(decision)).toBe(REHOMED_NOTICE)
    expect(decision.next).toEqual(row({ owner: "B", ownerAddress: "b:1", generation: 2, inflightCall: "c2", lostCall: "c1" }))
    const later = decideExecute(decision.next, "s", "B", "b:1", "c1")
    expect(later._tag).toBe("Answer")
    expect(noticeOf(later)).toBe(LOST_CELL_NOTICE)
  })

  it("gives the re-home notice after a graceful release too (the kernels were ended)", () => {
    const released = releasedRow(row({ doneCall: "c1" }), "A")
    expect(released.owner).toBeNull()
    const again = decideExecute(released, "s", "A", "a:1", "c2")
    expect(noticeOf(again)).toBe(REHOMED_NOTICE)
    expect(again.next?.generation).toBe(2)
  })

  it("answers a call delivered again after it finished, without running it", () => {
    const done = finishedRow(row({ inflightCall: "c1" }), "c1", null)
    expect(done.inflightCall).toBeNull()
    expect(decideExecute(done, "s", "A", "a:1", "c1")).toEqual({ _tag: "Answer", notice: ALREADY_RAN_NOTICE, next: undefined })
  })

  it("gives a call delivered again after it finished its kept result, without running it (on any runner)", () => {
    const done = finishedRow(row({ inflightCall: "c1" }), "c1", "{\"status\":\"ok\"}")
    expect(decideExecute(done, "s", "B", "b:1", "c1")).toEqual({ _tag: "Replay", result: "{\"status\":\"ok\"}", next: undefined })
  })

  it("starts fresh without a notice after the session was ended on purpose, wherever the next cell runs", () => {
    const ended = endedRow(row({ doneCall: "c1" }))
    const decision = decideExecute(ended, "s", "B", "b:1", "c2")
    expect(decision._tag).toBe("Run")
    expect(noticeOf(decision)).toBeUndefined()
    expect(decision.next?.ended).toBe(false)
  })

  it("keeps a cell in flight at the end as lost, so its re-delivery is answered and not run", () => {
    const ended = endedRow(row({ inflightCall: "c1" }))
    expect(decideExecute(ended, "s", "A", "a:1", "c1")._tag).toBe("Answer")
  })

  it("leaves another runner's row alone on release", () => {
    expect(releasedRow(row(), "B")).toEqual(row())
  })

  it("names the old owner to wait for only while it still holds the very call in flight", () => {
    expect(inflightElsewhere(row({ inflightCall: "c1" }), "B", "c1")).toBe("a:1")
    expect(inflightElsewhere(row({ inflightCall: "c1" }), "B", "c2")).toBeUndefined()
    expect(inflightElsewhere(row({ inflightCall: "c1" }), "A", "c1")).toBeUndefined()
    expect(inflightElsewhere(releasedRow(row({ inflightCall: "c1" }), "A"), "B", "c1")).toBeUndefined()
    expect(inflightElsewhere(undefined, "B", "c1")).toBeUndefined()
    expect(inflightElsewhere(row({ inflightCall: "c1", owner: null }), "B", "c1")).toBeUndefined()
    expect(inflightElsewhere(row({ inflightCall: "c1", ownerAddress: null }), "B", "c1")).toBeUndefined()
  })
})

describe("finishedRow", () => {
  it("clears the in-flight marker of the call that finished and keeps its result", () => {
    expect(finishedRow(row({ inflightCall: "c1" }), "c1", "{}")).toEqual(row({ inflightCall: null, doneCall: "c1", doneResult: "{}" }))
  })

  it("a late finish of an older call keeps the current call in flight, so its loss is still detected", () => {
    const late = finishedRow(row({ inflightCall: "c2" }), "c1", null)
    expect(late.inflightCall).toBe("c2")
    expect(decideExecute(late, "s", "B", "b:1", "c2")).toMatchObject({ _tag: "Answer", notice: LOST_CELL_NOTICE })
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
