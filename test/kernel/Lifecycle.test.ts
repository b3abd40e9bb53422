import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import {
  inFlight,
  type InterruptReason,
  LifecycleEvent,
  LifecycleState,
  transition,
  type LifecycleState as State
} from "../../src/kernel/Lifecycle.ts"
import { constantFrom, oneOf, sized } from "./arbitraries.ts"

const ids = constantFrom("r1", "r2", "r3")
const event = oneOf<LifecycleEvent>(
  Arbitrary.Constant(LifecycleEvent.Ready()),
  Arbitrary.map(ids, (requestId) => LifecycleEvent.Execute({ requestId })),
  Arbitrary.map(ids, (requestId) => LifecycleEvent.Done({ requestId })),
  Arbitrary.map(Arbitrary.all([ids, constantFrom<InterruptReason>("timeout", "cancel", "abandon")]), ([requestId, reason]) =>
    LifecycleEvent.Interrupt({ requestId, reason })
  ),
  Arbitrary.map(ids, (requestId) => LifecycleEvent.EscalationTimeout({ requestId })),
  Arbitrary.Constant(LifecycleEvent.Shutdown()),
  Arbitrary.Constant(LifecycleEvent.Exited({ exit: { code: 1, signal: null } }))
)

describe("Lifecycle", () => {
  it("walks the happy path", () => {
    let state: State = LifecycleState.Starting()
    for (const e of [LifecycleEvent.Ready(), LifecycleEvent.Execute({ requestId: "r1" }), LifecycleEvent.Done({ requestId: "r1" })]) {
      state = transition(state, e).state
    }
    expect(state._tag).toBe("Idle")
  })

  it("sends SIGINT only for the running request", () => {
    const busy = LifecycleState.Busy({ requestId: "r1" })
    expect(transition(busy, LifecycleEvent.Interrupt({ requestId: "r1", reason: "cancel" })).actions.map((a) => a._tag)).toEqual(["SendSigint"])
    expect(transition(busy, LifecycleEvent.Interrupt({ requestId: "r2", reason: "cancel" })).actions).toEqual([])
    expect(transition(LifecycleState.Idle(), LifecycleEvent.Interrupt({ requestId: "r1", reason: "cancel" })).actions).toEqual([])
  })

  it("kills after an escalation timeout and fails the request", () => {
    const interrupting = LifecycleState.Interrupting({ requestId: "r1", reason: "timeout" })
    const next = transition(interrupting, LifecycleEvent.EscalationTimeout({ requestId: "r1" }))
    expect(next.state._tag).toBe("ShuttingDown")
    expect(next.actions.map((a) => a._tag)).toEqual(["FailActive", "Escalate"])
    const dead = transition(next.state, LifecycleEvent.Exited({ exit: { code: null, signal: "SIGTERM" } }))
    expect(dead.state._tag === "Dead" && dead.state.cause._tag).toBe("Killed")
  })

  it.prop("keeps its invariants under any sequence of events", [Arbitrary.array(event, { maxLength: 60 })], ([events]) => {
    let state: State = LifecycleState.Starting()
    let episode: { id: string; ended: boolean } | undefined
    for (const e of events) {
      const before = state
      const next = transition(state, e)
      state = next.state
      if (before._tag === "Dead") expect(state).toBe(before)
      if (e._tag === "Execute" && next.accepted) {
        expect(before._tag).toBe("Idle")
        expect(episode === undefined || episode.ended).toBe(true)
        episode = { id: e.requestId, ended: false }
      }
      if (e._tag === "Done" && next.accepted) {
        expect(episode).toEqual({ id: e.requestId, ended: false })
        episode!.ended = true
      }
      for (const action of next.actions) {
        if (action._tag === "SendSigint") {
          expect(before._tag).toBe("Busy")
          expect(inFlight(before)).toBe(action.requestId)
        }
        if (action._tag === "FailActive") {
          expect(episode).toEqual({ id: action.requestId, ended: false })
          episode!.ended = true
        }
      }
      if (inFlight(state) === undefined) expect(episode === undefined || episode.ended).toBe(true)
      else expect(inFlight(state)).toBe(episode?.id)
      if (e._tag === "Exited") expect(state._tag).toBe("Dead")
    }
  }, sized(60))
})
