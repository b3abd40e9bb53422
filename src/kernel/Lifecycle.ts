/**
 * The kernel lifecycle as a pure state machine. The actor feeds it events and carries
 * out the actions it returns; nothing here performs effects.
 */
import { Data } from "effect"
import type { ProcessExit } from "./KernelProcess.ts"

/** Why a running cell is being interrupted. */
export type InterruptReason = "timeout" | "cancel" | "abandon"

/** Why a kernel is no longer usable. */
export type DeathCause = Data.TaggedEnum<{
  /** Shut down on request. */
  Shutdown: {}
  /** Killed because a cell did not stop after SIGINT. */
  Killed: { readonly requestId: string }
  /** The process exited on its own. */
  Exited: { readonly exit: ProcessExit }
}>
/** Constructors of `DeathCause`. */
export const DeathCause = Data.taggedEnum<DeathCause>()

/** Where a kernel is in its life. */
export type LifecycleState = Data.TaggedEnum<{
  Starting: {}
  Idle: {}
  Busy: { readonly requestId: string }
  Interrupting: { readonly requestId: string; readonly reason: InterruptReason }
  ShuttingDown: { readonly cause: DeathCause }
  Dead: { readonly cause: DeathCause }
}>
/** Constructors and matchers of `LifecycleState`. */
export const LifecycleState = Data.taggedEnum<LifecycleState>()

/** What happens to a kernel. */
export type LifecycleEvent = Data.TaggedEnum<{
  /** Init and prelude finished. */
  Ready: {}
  /** A request is about to be written. */
  Execute: { readonly requestId: string }
  /** The runner sent `done` for a request. */
  Done: { readonly requestId: string }
  /** The host wants the running cell stopped. */
  Interrupt: { readonly requestId: string; readonly reason: InterruptReason }
  /** No `done` arrived within the escalation delay after SIGINT (or the cell never started). */
  EscalationTimeout: { readonly requestId: string }
  /** The owner is closing the kernel. */
  Shutdown: {}
  /** The process is gone. */
  Exited: { readonly exit: ProcessExit }
}>
/** Constructors of `LifecycleEvent`. */
export const LifecycleEvent = Data.taggedEnum<LifecycleEvent>()

/** What the actor must do after a transition. */
export type LifecycleAction = Data.TaggedEnum<{
  /** Deliver SIGINT to the running cell. */
  SendSigint: { readonly requestId: string }
  /** Start the shutdown escalation (exit request, SIGTERM, SIGKILL). */
  Escalate: {}
  /** End the in-flight request with this death. */
  FailActive: { readonly requestId: string; readonly cause: DeathCause }
}>
/** Constructors of `LifecycleAction`. */
export const LifecycleAction = Data.taggedEnum<LifecycleAction>()

/** The outcome of one transition: the next state, actions, and whether the event applied. */
export interface Transition {
  readonly state: LifecycleState
  readonly actions: ReadonlyArray<LifecycleAction>
  readonly accepted: boolean
}

const stay = (state: LifecycleState): Transition => ({ state, actions: [], accepted: false })
const go = (state: LifecycleState, ...actions: Array<LifecycleAction>): Transition => ({
  state,
  actions,
  accepted: true
})

const activeRequest = (state: LifecycleState): string | undefined =>
  state._tag === "Busy" || state._tag === "Interrupting" ? state.requestId : undefined

/** The request in flight, if any. */
export const inFlight = activeRequest

/** Whether the kernel can never run another cell. */
export const isTerminal = (state: LifecycleState): boolean => state._tag === "Dead" || state._tag === "ShuttingDown"

/** Applies one event to a state. */
export const transition = (state: LifecycleState, event: LifecycleEvent): Transition => {
  if (state._tag === "Dead") return stay(state)
  switch (event._tag) {
    case "Ready":
      return state._tag === "Starting" ? go(LifecycleState.Idle()) : stay(state)
    case "Execute":
      return state._tag === "Idle" ? go(LifecycleState.Busy({ requestId: event.requestId })) : stay(state)
    case "Done":
      return activeRequest(state) === event.requestId ? go(LifecycleState.Idle()) : stay(state)
    case "Interrupt":
      return state._tag === "Busy" && state.requestId === event.requestId
        ? go(
          LifecycleState.Interrupting({ requestId: event.requestId, reason: event.reason }),
          LifecycleAction.SendSigint({ requestId: event.requestId })
        )
        : stay(state)
    case "EscalationTimeout": {
      if (activeRequest(state) !== event.requestId) return stay(state)
      const cause = DeathCause.Killed({ requestId: event.requestId })
      return go(
        LifecycleState.ShuttingDown({ cause }),
        LifecycleAction.FailActive({ requestId: event.requestId, cause }),
        LifecycleAction.Escalate()
      )
    }
    case "Shutdown": {
      if (state._tag === "ShuttingDown") return stay(state)
      const cause = DeathCause.Shutdown()
      const active = activeRequest(state)
      return active === undefined
        ? go(LifecycleState.ShuttingDown({ cause }), LifecycleAction.Escalate())
        : go(
          LifecycleState.ShuttingDown({ cause }),
          LifecycleAction.FailActive({ requestId: active, cause }),
          LifecycleAction.Escalate()
        )
    }
    case "Exited": {
      if (state._tag === "ShuttingDown") return go(LifecycleState.Dead({ cause: state.cause }))
      const cause = DeathCause.Exited({ exit: event.exit })
      const active = activeRequest(state)
      return active === undefined
        ? go(LifecycleState.Dead({ cause }))
        : go(LifecycleState.Dead({ cause }), LifecycleAction.FailActive({ requestId: active, cause }))
    }
  }
}
