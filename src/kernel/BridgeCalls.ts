/**
 * A cell's calls to the host (`agent()`, `completion()`, ...): each runs beside the cell
 * in a fiber set made at its first call and closed when the cell ends, pauses the cell's
 * watchdog while in flight, and answers the runner with a `bridge_result` frame.
 */
import { Cause, Effect, FiberSet, Option, Scope } from "effect"
import type { AgentBridge, AgentBridgeError } from "./AgentBridge.ts"
import type { HostFrame, RunnerFrame } from "./Frame.ts"
import type { CellRequest } from "./RequestTable.ts"

/** A bridge frame from the runner. */
export type BridgeRequest = Extract<RunnerFrame, { type: "bridge" }>

type Bridge = AgentBridge["Service"]

const answerOf = (call: BridgeRequest) => (cause: Cause.Cause<AgentBridgeError>): Effect.Effect<HostFrame> => {
  if (Cause.hasInterruptsOnly(cause)) return Effect.interrupt
  const failure = Cause.findErrorOption(cause)
  const error = Option.isSome(failure)
    ? { name: failure.value.name, message: failure.value.message }
    : { name: "BridgeDefect", message: Cause.pretty(cause) }
  return Effect.succeed({ type: "bridge_result", callId: call.callId, ok: false, error })
}

/** Answers one call through `bridge` and writes the answer with `write`, the watchdog paused meanwhile. */
const answer = Effect.fnUntraced(function*(
  bridge: Bridge,
  write: (frame: HostFrame) => Effect.Effect<void, unknown>,
  kernelKey: string | undefined,
  request: CellRequest,
  call: BridgeRequest
): Effect.fn.Return<void> {
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
      Effect.catchCause(answerOf(call)),
      Effect.ensuring(Effect.suspend(() => request.watchdog?.resume ?? Effect.void))
    )
  yield* Effect.ignore(write(reply))
})

/** Runs each call beside its cell; `closeBridgeRequests` ends those still running. */
export const bridgeCalls = (
  bridge: Bridge,
  write: (frame: HostFrame) => Effect.Effect<void, unknown>,
  kernelKey: string | undefined
): ((request: CellRequest, call: BridgeRequest) => Effect.Effect<void>) =>
  Effect.fnUntraced(function*(request: CellRequest, call: BridgeRequest) {
    let bridges = request.bridges
    if (bridges === undefined) {
      const scope = yield* Scope.make()
      request.bridgeScope = scope
      bridges = yield* Scope.provide(FiberSet.make(), scope)
      request.bridges = bridges
    }
    yield* FiberSet.run(bridges, answer(bridge, write, kernelKey, request, call))
  })
