/**
 * A cell's calls to the host (`agent()`, `completion()`, ...): each runs beside the cell
 * in a fiber set made at its first call and closed when the cell ends, pauses the cell's
 * watchdog while in flight, and answers the runner with a `bridge_result` frame.
 */
import { Cause, type Context, Effect, FiberSet, Option, Scope } from "effect"
import type { AgentBridge, AgentBridgeError } from "../services/AgentBridge.ts"
import type { HostFrame, RunnerFrame } from "./Frame.ts"
import type { CellRequest } from "./RequestTable.ts"

/** A bridge frame from the runner. */
export type BridgeRequest = Extract<RunnerFrame, { type: "bridge" }>

type Bridge = Context.Tag.Service<AgentBridge>

const answerOf = (call: BridgeRequest) => (cause: Cause.Cause<AgentBridgeError>): Effect.Effect<HostFrame> => {
  if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
  const failure = Cause.failureOption(cause)
  const error = Option.isSome(failure)
    ? { name: failure.value.name, message: failure.value.message }
    : { name: "BridgeDefect", message: Cause.pretty(cause) }
  return Effect.succeed({ type: "bridge_result", callId: call.callId, ok: false, error })
}

/** Answers one call through `bridge` and writes the answer with `write`, the watchdog paused meanwhile. */
const answer = (
  bridge: Bridge,
  write: (frame: HostFrame) => Effect.Effect<void, unknown>,
  kernelKey: string | undefined,
  request: CellRequest,
  call: BridgeRequest
) =>
  Effect.gen(function*() {
    yield* request.watchdog?.pause ?? Effect.void
    const reply = yield* bridge
      .call({
        method: call.method,
        params: call.params,
        callId: call.callId,
        requestId: call.id,
        ...(kernelKey === undefined ? {} : { kernelKey })
      })
      .pipe(
        Effect.map((value): HostFrame => ({ type: "bridge_result", callId: call.callId, ok: true, ...(value === undefined ? {} : { value }) })),
        Effect.catchAllCause(answerOf(call)),
        Effect.ensuring(Effect.suspend(() => request.watchdog?.resume ?? Effect.void))
      )
    yield* Effect.ignore(write(reply))
  })

/** Runs each call beside its cell; `closeBridgeRequests` ends those still running. */
export const bridgeCalls = (
  bridge: Bridge,
  write: (frame: HostFrame) => Effect.Effect<void, unknown>,
  kernelKey: string | undefined
) =>
(request: CellRequest, call: BridgeRequest): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (request.bridges === undefined) {
      const scope = yield* Scope.make()
      request.bridgeScope = scope
      request.bridges = yield* Scope.extend(FiberSet.make(), scope)
    }
    yield* FiberSet.run(request.bridges, answer(bridge, write, kernelKey, request, call))
  })
