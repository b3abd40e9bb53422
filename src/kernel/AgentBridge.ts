/**
 * What an embedder provides to answer the prelude's `agent()`, `completion()` and
 * `parallel()` calls, and a cell's `input()` (method `input`). The default answers every
 * call with a clear error.
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
  /** The session whose cell asks, when the kernel runs under a registry. */
  readonly sessionId?: string
}

/** The bridge method of a cell's request for a line of input (Python's `input()`, Ruby's `gets`, the JavaScript prelude's `input()`). */
export const INPUT_METHOD = "input"

/** A failed bridge call; reaches Python as an exception `name: message`. */
export class AgentBridgeError extends Data.TaggedError("AgentBridgeError")<{
  readonly name: string
  readonly message: string
}> {}

/** Answers bridge calls from cells. */
export class AgentBridge extends Context.Service<AgentBridge, {
  readonly call: (call: BridgeCall) => Effect.Effect<unknown, AgentBridgeError>
}>()("veyyon/AgentBridge") {}

/** `bridge` with every call marked as asked by `sessionId`'s cells. */
export const bridgeForSession = (bridge: AgentBridge["Service"], sessionId: string): AgentBridge["Service"] => ({
  call: (call) => bridge.call({ ...call, sessionId })
})

/** The failure for a cell's `input()` that nobody can answer: its cell sees end of input, with `reason`. */
export const inputUnanswered = (reason: string): AgentBridgeError =>
  new AgentBridgeError({ name: "EOFError", message: `input() got no line: ${reason}` })

/** A bridge for a door with no model or person to ask: model calls fail as unavailable and `input()` gets end of input, each saying `reason`. */
export const bridgeUnavailable = (reason: string): Layer.Layer<AgentBridge> =>
  Layer.succeed(AgentBridge, {
    call: (call) =>
      Effect.fail(
        call.method === INPUT_METHOD
          ? inputUnanswered(reason)
          : new AgentBridgeError({ name: "AgentBridgeUnavailable", message: `${call.method}() has no one to answer it: ${reason}` })
      )
  })

/** The bridge used when the embedder provides none: every call fails and says why. */
export const AgentBridgeNotConfigured = Layer.succeed(AgentBridge, {
  call: (call) =>
    Effect.fail(
      call.method === INPUT_METHOD
        ? inputUnanswered("nothing here answers a cell's input (an MCP client that offers elicitation does)")
        : new AgentBridgeError({
          name: "AgentBridgeUnavailable",
          message: `no agent bridge configured: ${call.method}() needs the host application to provide an AgentBridge layer`
        })
    )
})
