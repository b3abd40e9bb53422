/**
 * The bridge behind an MCP door: a cell's `completion()`/`agent()` (and each `parallel()`
 * branch) go to its session's client as sampling requests, its `input()` as an
 * elicitation, when that client declared the capability; otherwise the cell gets a
 * sentence naming what the client lacks, at once. The door binds each client's kernel
 * session here when the client initializes and unbinds it when the session ends.
 */
import { Effect, Result } from "effect"
import { AgentBridgeError, type AgentBridge, type BridgeCall, INPUT_METHOD, inputUnanswered } from "../kernel/AgentBridge.ts"
import type { ClientRequestFailed } from "./ClientRequests.ts"
import { inputAnswer, inputRequest } from "./Elicitation.ts"
import { MODEL_METHODS } from "../kernel/ModelCalls.ts"
import { type SamplingDefaults, samplingAnswer, samplingRequest } from "./Sampling.ts"

/** What the door tells the bridge of one connected client. */
export interface ClientLink {
  /** The capabilities the client declared in `initialize`. */
  readonly capabilities: { readonly sampling?: unknown; readonly elicitation?: unknown }
  /** The protocol revision negotiated with it. */
  readonly protocolVersion: string
  /** Sends it a request and waits for the result. */
  readonly ask: (method: string, params: unknown) => Effect.Effect<unknown, ClientRequestFailed>
}

/** The bridge and the table of sessions it answers for. */
export interface McpHostCalls {
  /** The `AgentBridge` to give the kernels. */
  readonly bridge: AgentBridge["Service"]
  /** Answers `sessionId`'s calls through `link` from now on. */
  readonly bind: (sessionId: string, link: ClientLink) => void
  /** Forgets `sessionId`; its calls get the unavailable error. */
  readonly unbind: (sessionId: string) => void
}

/** How the bridge sizes its requests. */
export interface HostCallsOptions extends SamplingDefaults {}

/** Whether a client's `elicitation` capability covers form mode (an empty one does, as before modes existed). */
export const offersFormElicitation = (capability: unknown): boolean => {
  if (typeof capability !== "object" || capability === null) return false
  const modes = capability as { readonly form?: unknown; readonly url?: unknown }
  return modes.form !== undefined || modes.url === undefined
}

const unavailable = (message: string) => new AgentBridgeError({ name: "AgentBridgeUnavailable", message })

/** A short label of a session for the person to tell sessions apart. */
const sessionLabel = (sessionId: string) => sessionId.replace(/^mcp-/, "").slice(0, 8)

const failedRequest = (what: string, error: ClientRequestFailed): AgentBridgeError => {
  switch (error.reason) {
    case "error":
      return new AgentBridgeError({ name: "SamplingFailed", message: `the MCP client refused or failed ${what}: ${error.message}${error.code === undefined ? "" : ` (code ${error.code})`}` })
    case "timeout":
      return new AgentBridgeError({ name: "SamplingTimeout", message: `${error.message} (${what})` })
    default:
      return unavailable(`${what} cannot reach the MCP client: ${error.message}`)
  }
}

/** A bridge with no session bound yet. */
export const makeMcpHostCalls = (options: HostCallsOptions): McpHostCalls => {
  const links = new Map<string, ClientLink>()

  const sample = (link: ClientLink, call: BridgeCall) =>
    Effect.gen(function*() {
      if (link.capabilities.sampling === undefined) {
        return yield* unavailable(`the MCP client does not offer sampling, so ${call.method}() has no model to ask; connect with a client that declares the sampling capability, or embed veyyon with an AgentBridge`)
      }
      const params = samplingRequest(call.method, call.params, options)
      if (Result.isFailure(params)) return yield* params.failure
      const result = yield* Effect.mapError(link.ask("sampling/createMessage", params.success), (error) =>
        failedRequest(`the sampling request for ${call.method}()`, error))
      const answer = samplingAnswer(call.method, result)
      return Result.isFailure(answer) ? yield* answer.failure : answer.success
    })

  const elicit = (link: ClientLink, call: BridgeCall, sessionId: string) =>
    Effect.gen(function*() {
      if (!offersFormElicitation(link.capabilities.elicitation)) {
        return yield* inputUnanswered("the MCP client does not offer elicitation (in form mode), so there is no one to ask")
      }
      const result = yield* Effect.mapError(
        link.ask("elicitation/create", inputRequest(call.params, sessionLabel(sessionId), link.protocolVersion)),
        (error) => inputUnanswered(error.reason === "error" ? `the MCP client failed the request: ${error.message}` : error.message)
      )
      const line = inputAnswer(result)
      return Result.isFailure(line) ? yield* line.failure : line.success
    })

  const bridge: AgentBridge["Service"] = {
    call: (call) =>
      Effect.suspend((): Effect.Effect<unknown, AgentBridgeError> => {
        const link = call.sessionId === undefined ? undefined : links.get(call.sessionId)
        const isInput = call.method === INPUT_METHOD
        if (link === undefined || call.sessionId === undefined) {
          return Effect.fail(isInput ? inputUnanswered("no MCP client is connected for this session") : unavailable(`no MCP client is connected for this session, so ${call.method}() has no one to answer it`))
        }
        if (isInput) return elicit(link, call, call.sessionId)
        if (MODEL_METHODS.has(call.method)) return sample(link, call)
        return Effect.fail(unavailable(`${call.method}() is not answered through the MCP door`))
      })
  }

  return {
    bridge,
    bind: (sessionId, link) => void links.set(sessionId, link),
    unbind: (sessionId) => void links.delete(sessionId)
  }
}
