/**
 * What an embedder provides to answer the prelude's `agent()`, `completion()` and
 * `parallel()` calls. The default answers every call with a clear error.
 */
import { Context, Data, Effect, Layer } from "effect"

/** One call from a cell to the host. */
export interface BridgeCall {
  readonly method: string
  readonly params: unknown
  readonly callId: string
  readonly requestId: string
  /** The kernel's key (session, cwd, interpreter) when it runs under a registry. */
  readonly kernelKey?: string
}

/** A failed bridge call; reaches Python as an exception `name: message`. */
export class AgentBridgeError extends Data.TaggedError("AgentBridgeError")<{
  readonly name: string
  readonly message: string
}> {}

/** Answers bridge calls from cells. */
export class AgentBridge extends Context.Service<AgentBridge, {
  readonly call: (call: BridgeCall) => Effect.Effect<unknown, AgentBridgeError>
}>()("veyyon/AgentBridge") {}

/** The bridge used when the embedder provides none: every call fails and says why. */
export const AgentBridgeNotConfigured = Layer.succeed(AgentBridge, {
  call: (call) =>
    Effect.fail(
      new AgentBridgeError({
        name: "AgentBridgeUnavailable",
        message: `no agent bridge configured: ${call.method}() needs the host application to provide an AgentBridge layer`
      })
    )
})
