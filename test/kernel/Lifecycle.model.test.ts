/**
 * The lifecycle against a reference model written here, independently of the module: a
 * table of what each event does in each state, compared transition by transition (next
 * state with its request id, reason and cause; actions with theirs; accepted) over random
 * event sequences, plus progress properties a do-nothing machine fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import {
  DeathCause,
  inFlight,
  isTerminal,
  LifecycleAction,
  LifecycleEvent,
  LifecycleState,
  transition,
  type InterruptReason,
  type LifecycleAction as Action,
  type LifecycleEvent as Event,
  type LifecycleState as State,
  type Transition
} from "../../src/kernel/Lifecycle.ts"
import type { ProcessExit } from "../../src/kernel/KernelProcess.ts"
import { constantFrom, integer, oneOf, sized } from "./arbitraries.ts"

type Row = (state: State, event: Event) => Transition | "ignored"

const ignored = "ignored" as const
const to = (state: State, ...actions: Array<Action>): Transition => ({ state, actions, accepted: true })
const requestOf = (state: State): string | undefined =>
  state._tag === "Busy" ? state.requestId : state._tag === "Interrupting" ? state.requestId : undefined
/** The active request, failed with `cause`, when there is one. */
const failing = (state: State, cause: DeathCause): Array<Action> => {
  const id = requestOf(state)
  return id === undefined ? [] : [LifecycleAction.FailActive({ requestId: id, cause })]
}

/** The model: one row per event; each row says what every state does with it. */
const model: Record<Event["_tag"], Row> = {
  Ready: (state) => (state._tag === "Starting" ? to(LifecycleState.Idle()) : ignored),
  Execute: (state, event) =>
    state._tag === "Idle" && event._tag === "Execute" ? to(LifecycleState.Busy({ requestId: event.requestId })) : ignored,
  Done: (state, event) =>
    event._tag === "Done" && (state._tag === "Busy" || state._tag === "Interrupting") && state.requestId === event.requestId
      ? to(LifecycleState.Idle())
      : ignored,
  Interrupt: (state, event) =>
    event._tag === "Interrupt" && state._tag === "Busy" && state.requestId === event.requestId
      ? to(
        LifecycleState.Interrupting({ requestId: event.requestId, reason: event.reason }),
        LifecycleAction.SendSigint({ requestId: event.requestId })
      )
      : ignored,
  EscalationTimeout: (state, event) => {
    if (event._tag !== "EscalationTimeout") return ignored
    if (!((state._tag === "Busy" || state._tag === "Interrupting") && state.requestId === event.requestId)) return ignored
    const cause = DeathCause.Killed({ requestId: event.requestId })
    return to(LifecycleState.ShuttingDown({ cause }), ...failing(state, cause), LifecycleAction.Escalate())
  },
  Shutdown: (state) => {
    if (state._tag === "ShuttingDown" || state._tag === "Dead") return ignored
    const cause = DeathCause.Shutdown()
    return to(LifecycleState.ShuttingDown({ cause }), ...failing(state, cause), LifecycleAction.Escalate())
  },
  Exited: (state, event) => {
    if (state._tag === "Dead" || event._tag !== "Exited") return ignored
    if (state._tag === "ShuttingDown") return to(LifecycleState.Dead({ cause: state.cause }))
    const cause = DeathCause.Exited({ exit: event.exit })
    return to(LifecycleState.Dead({ cause }), ...failing(state, cause))
  }
}

const expected = (state: State, event: Event): Transition => {
  const row = model[event._tag](state, event)
  return row === ignored ? { state, actions: [], accepted: false } : row
}

const ids = constantFrom("r1", "r2", "r3")
const reasons = constantFrom<InterruptReason>("timeout", "cancel", "abandon")
const exits = constantFrom<ProcessExit>({ code: 1, signal: null }, { code: 0, signal: null }, { code: null, signal: "SIGKILL" })
const events: Arbitrary.Arbitrary<Event> = oneOf<Event>(
  Arbitrary.Constant(LifecycleEvent.Ready()),
  Arbitrary.map(ids, (requestId) => LifecycleEvent.Execute({ requestId })),
  Arbitrary.map(ids, (requestId) => LifecycleEvent.Done({ requestId })),
  Arbitrary.map(Arbitrary.all([ids, reasons]), ([requestId, reason]) => LifecycleEvent.Interrupt({ requestId, reason })),
  Arbitrary.map(ids, (requestId) => LifecycleEvent.EscalationTimeout({ requestId })),
  Arbitrary.Constant(LifecycleEvent.Shutdown()),
  Arbitrary.map(exits, (exit) => LifecycleEvent.Exited({ exit }))
)
/** Sequences that mostly follow a kernel's life, so deep states are reached often. */
const lives: Arbitrary.Arbitrary<Array<Event>> = Arbitrary.map(
  Arbitrary.all([ids, reasons, Arbitrary.array(events, { maxLength: 40 })]),
  ([id, reason, tail]) => [
    LifecycleEvent.Ready(),
    LifecycleEvent.Execute({ requestId: id }),
    LifecycleEvent.Interrupt({ requestId: id, reason }),
    ...tail
  ]
)

/** Every state the machine has, with each request id, reason and cause the tests use. */
const states: ReadonlyArray<State> = [
  LifecycleState.Starting(),
  LifecycleState.Idle(),
  LifecycleState.Busy({ requestId: "r1" }),
  LifecycleState.Interrupting({ requestId: "r1", reason: "timeout" }),
  LifecycleState.ShuttingDown({ cause: DeathCause.Shutdown() }),
  LifecycleState.ShuttingDown({ cause: DeathCause.Killed({ requestId: "r1" }) }),
  LifecycleState.Dead({ cause: DeathCause.Exited({ exit: { code: 3, signal: null } }) })
]

describe("Lifecycle against a reference model", () => {
  it.prop("every transition of any event sequence equals the model's", [oneOf(lives, Arbitrary.array(events, { maxLength: 60 }))], ([sequence]) => {
    let state: State = LifecycleState.Starting()
    for (const event of sequence) {
      const actual = transition(state, event)
      expect(actual).toEqual(expected(state, event))
      state = actual.state
    }
  }, { arbitrary: { runs: 400, size: 60 } })

  it("agrees with the model on every state and event", () => {
    const every: Array<Event> = [
      LifecycleEvent.Ready(),
      LifecycleEvent.Execute({ requestId: "r1" }),
      LifecycleEvent.Execute({ requestId: "r2" }),
      LifecycleEvent.Done({ requestId: "r1" }),
      LifecycleEvent.Done({ requestId: "r2" }),
      LifecycleEvent.Interrupt({ requestId: "r1", reason: "cancel" }),
      LifecycleEvent.Interrupt({ requestId: "r2", reason: "abandon" }),
      LifecycleEvent.EscalationTimeout({ requestId: "r1" }),
      LifecycleEvent.EscalationTimeout({ requestId: "r2" }),
      LifecycleEvent.Shutdown(),
      LifecycleEvent.Exited({ exit: { code: null, signal: "SIGTERM" } })
    ]
    for (const state of states) for (const event of every) expect(transition(state, event)).toEqual(expected(state, event))
  })

  describe("progress", () => {
    it("from Idle an Execute is accepted and its request is in flight", () => {
      const next = transition(LifecycleState.Idle(), LifecycleEvent.Execute({ requestId: "r7" }))
      expect(next.accepted).toBe(true)
      expect(next.state).toEqual(LifecycleState.Busy({ requestId: "r7" }))
      expect(inFlight(next.state)).toBe("r7")
      expect(next.actions).toEqual([])
    })

    it("Done of the in-flight request returns to Idle, from Busy and from Interrupting", () => {
      for (const state of [LifecycleState.Busy({ requestId: "r7" }), LifecycleState.Interrupting({ requestId: "r7", reason: "cancel" })]) {
        const next = transition(state, LifecycleEvent.Done({ requestId: "r7" }))
        expect(next).toEqual({ state: LifecycleState.Idle(), actions: [], accepted: true })
        expect(inFlight(next.state)).toBeUndefined()
      }
    })

    it("Interrupt of the in-flight request sends SIGINT for that id and remembers why", () => {
      const next = transition(LifecycleState.Busy({ requestId: "r7" }), LifecycleEvent.Interrupt({ requestId: "r7", reason: "timeout" }))
      expect(next.state).toEqual(LifecycleState.Interrupting({ requestId: "r7", reason: "timeout" }))
      expect(next.actions).toEqual([LifecycleAction.SendSigint({ requestId: "r7" })])
      expect(transition(next.state, LifecycleEvent.Interrupt({ requestId: "r7", reason: "cancel" })).actions).toEqual([])
    })

    it.prop("Shutdown from any live state escalates exactly once, however often it comes", [Arbitrary.array(events, { maxLength: 30 }), integer(1, 4)], ([prefix, repeats]) => {
      let state: State = LifecycleState.Starting()
      for (const event of prefix) state = transition(state, event).state
      if (isTerminal(state)) return
      const active = inFlight(state)
      const actions: Array<Action> = []
      for (let i = 0; i < repeats; i++) {
        const next = transition(state, LifecycleEvent.Shutdown())
        actions.push(...next.actions)
        state = next.state
      }
      expect(actions.filter((a) => a._tag === "Escalate")).toHaveLength(1)
      expect(actions.filter((a) => a._tag === "FailActive")).toEqual(
        active === undefined ? [] : [LifecycleAction.FailActive({ requestId: active, cause: DeathCause.Shutdown() })]
      )
      expect(state).toEqual(LifecycleState.ShuttingDown({ cause: DeathCause.Shutdown() }))
      const dead = transition(state, LifecycleEvent.Exited({ exit: { code: 0, signal: null } }))
      expect(dead.state).toEqual(LifecycleState.Dead({ cause: DeathCause.Shutdown() }))
      expect(dead.actions).toEqual([])
    }, sized(30))

    it("an exit while Busy fails the request with the exit as its cause", () => {
      const exit = { code: 9, signal: null }
      const next = transition(LifecycleState.Busy({ requestId: "r7" }), LifecycleEvent.Exited({ exit }))
      expect(next.state).toEqual(LifecycleState.Dead({ cause: DeathCause.Exited({ exit }) }))
      expect(next.actions).toEqual([LifecycleAction.FailActive({ requestId: "r7", cause: DeathCause.Exited({ exit }) })])
    })
  })

  it("isTerminal holds for ShuttingDown and Dead only", () => {
    expect(states.map((s) => [s._tag, isTerminal(s)])).toEqual([
      ["Starting", false],
      ["Idle", false],
      ["Busy", false],
      ["Interrupting", false],
      ["ShuttingDown", true],
      ["ShuttingDown", true],
      ["Dead", true]
    ])
  })
})
