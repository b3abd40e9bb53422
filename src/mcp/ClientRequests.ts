/**
 * Requests the server sends to its clients (sampling, elicitation): an id minted per
 * request, a table of those awaiting an answer, the client's response routed back by
 * (client, id), a time limit, and `notifications/cancelled` sent when the asker stops
 * waiting (its cell was cancelled, the limit passed). A response from another client,
 * or for an id nobody waits on, is dropped.
 */
import { Data, Deferred, Duration, Effect } from "effect"
import { randomBytes } from "node:crypto"
import { type JsonRpcId, type JsonRpcOut, notification, requestMessage, type ResponseError } from "./JsonRpc.ts"

/** Why a request to a client got no result. */
export class ClientRequestFailed extends Data.TaggedError("ClientRequestFailed")<{
  /** `error`: the client answered with an error; `timeout`: no answer in time; `gone`: the client ended; `unreachable`: no channel to it. */
  readonly reason: "error" | "timeout" | "gone" | "unreachable"
  /** The client's JSON-RPC error code, for `error`. */
  readonly code?: number
  readonly message: string
}> {}

/** Sends one message to a client; false when it has no channel for it now. */
export type ClientChannel = (message: JsonRpcOut) => Effect.Effect<boolean>

/** What a response frame carries. */
export interface ClientResponse {
  readonly id: JsonRpcId | null
  readonly result?: unknown
  readonly error?: ResponseError
}

/** The table of a door's requests to its clients. */
export interface ClientRequests {
  /** Sends `method(params)` through `channel` and waits up to `timeoutMs` for the client's result. */
  readonly ask: (
    clientId: number,
    channel: ClientChannel,
    method: string,
    params: unknown,
    timeoutMs: number
  ) => Effect.Effect<unknown, ClientRequestFailed>
  /** Routes a client's response to the request awaiting it; false when none does. */
  readonly settle: (clientId: number, response: ClientResponse) => Effect.Effect<boolean>
  /** Fails every request still awaiting `clientId` (it ended). */
  readonly forget: (clientId: number) => Effect.Effect<void>
  /** How many requests await an answer from `clientId`. */
  readonly waiting: (clientId: number) => number
}

/** The most requests one client may have awaiting its answer: a cell's threads cannot flood their client. */
export const MAX_WAITING_PER_CLIENT = 32

/** A fresh table; ids are `veyyon-` and 64 random bits. */
export const makeClientRequests = (maxWaiting: number = MAX_WAITING_PER_CLIENT): ClientRequests => {
  const pending = new Map<string, { readonly clientId: number; readonly deferred: Deferred.Deferred<unknown, ClientRequestFailed> }>()
  const keyOf = (clientId: number, id: JsonRpcId | null) => `${clientId}/${typeof id}:${id}`

  const waiting = (clientId: number) => {
    let count = 0
    for (const entry of pending.values()) if (entry.clientId === clientId) count++
    return count
  }

  const ask: ClientRequests["ask"] = (clientId, channel, method, params, timeoutMs) =>
    Effect.suspend(() => {
      if (waiting(clientId) >= maxWaiting) {
        return Effect.fail(new ClientRequestFailed({
          reason: "unreachable",
          message: `${maxWaiting} requests already await this client's answer, the most the server sends at once; wait for some to finish`
        }))
      }
      const id = `veyyon-${randomBytes(8).toString("hex")}`
      const key = keyOf(clientId, id)
      const deferred = Deferred.makeUnsafe<unknown, ClientRequestFailed>()
      pending.set(key, { clientId, deferred })
      const cancelled = (reason: string) =>
        Effect.asVoid(channel(notification("notifications/cancelled", { requestId: id, reason })))
      return Effect.gen(function*() {
        const sent = yield* channel(requestMessage(id, method, params))
        if (!sent) {
          return yield* new ClientRequestFailed({
            reason: "unreachable",
            message: "the client has no open channel for requests from the server (over HTTP, a client receives them on the GET event stream of its session or on the stream of a call in flight)"
          })
        }
        return yield* Deferred.await(deferred).pipe(
          Effect.timeoutOrElse({
            duration: Duration.millis(timeoutMs),
            orElse: () =>
              Effect.andThen(
                cancelled("the server stopped waiting for an answer"),
                Effect.fail(new ClientRequestFailed({ reason: "timeout", message: `the client did not answer ${method} within ${Math.round(timeoutMs / 1000)} s` }))
              )
          }),
          Effect.onInterrupt(() => cancelled("the cell that asked was cancelled"))
        )
      }).pipe(Effect.ensuring(Effect.sync(() => pending.delete(key))))
    })

  const settle: ClientRequests["settle"] = (clientId, response) =>
    Effect.suspend(() => {
      const entry = pending.get(keyOf(clientId, response.id))
      if (entry === undefined) return Effect.succeed(false)
      pending.delete(keyOf(clientId, response.id))
      const outcome = response.error === undefined
        ? Deferred.succeed(entry.deferred, response.result)
        : Deferred.fail(entry.deferred, new ClientRequestFailed({ reason: "error", code: response.error.code, message: response.error.message }))
      return Effect.as(outcome, true)
    })

  const forget: ClientRequests["forget"] = (clientId) =>
    Effect.suspend(() => {
      const ended = [...pending].filter(([, entry]) => entry.clientId === clientId)
      for (const [key] of ended) pending.delete(key)
      return Effect.forEach(ended, ([, entry]) =>
        Deferred.fail(entry.deferred, new ClientRequestFailed({ reason: "gone", message: "the client's session ended before it answered" })), { discard: true })
    })

  return { ask, settle, forget, waiting }
}
