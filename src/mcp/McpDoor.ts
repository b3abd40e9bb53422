/**
 * The framing layer between the MCP doors (stdio, HTTP) and `@effect/ai`'s `McpServer`:
 * an `RpcServer.Protocol` we own. It parses JSON-RPC itself so the server's guarantees
 * hold whatever the library does: malformed JSON gets -32700 with `id: null`, an unknown
 * method -32601 with the request's own id, params that do not fit the method's schema
 * -32602 with one sentence, and the door keeps serving after each. Request ids go back
 * exactly as the client sent them (strings included).
 *
 * Every request carries a `Reply`: where its progress notifications and its one answer
 * go (stdout on stdio, the POST's response over HTTP). Handlers see the call as the
 * `McpCall` service, so a tool can send progress for its own request.
 */
import { ClientNotificationRpcs, ClientRpcs } from "@effect/ai/McpSchema"
import type { FromClientEncoded, FromServerEncoded, RequestEncoded } from "@effect/rpc/RpcMessage"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Context, Data, Deferred, Effect, Either, FiberSet, Mailbox, Schema } from "effect"
import { type FieldHints, paramsProblem } from "../services/ParamsProblem.ts"
import { ErrorCode, errorReply, type Frame, type JsonRpcId, type JsonRpcOut, notification, progressTokenOf, resultReply } from "./JsonRpc.ts"

/** Where the messages about one request go. */
export interface Reply {
  /** A message before the answer (a progress notification). */
  readonly send: (message: JsonRpcOut) => Effect.Effect<void>
  /** The answer, or nothing (a cancelled request gets none); nothing is sent after it. */
  readonly end: (message?: JsonRpcOut) => Effect.Effect<void>
}

/** The request a handler is answering, as the door knows it. */
export interface McpCallInfo {
  readonly clientId: number
  readonly method: string
  /** The request's `_meta.progressToken`, when it asked for progress. */
  readonly progressToken?: JsonRpcId
  /** Sends a notification about this request to its client. */
  readonly notify: (message: JsonRpcOut) => Effect.Effect<void>
}

/** The call being handled; present in every request handler the door starts. */
export class McpCall extends Context.Tag("veyyon-eval/McpCall")<McpCall, McpCallInfo>() {}

/** A JSON-RPC error a door method answers with. */
export class McpFailure extends Data.TaggedError("McpFailure")<{ readonly code: number; readonly message: string }> {}

/** A method the door answers itself for a client, given the request's params. */
export type LocalMethod = (clientId: number, params: Record<string, unknown>) => Effect.Effect<unknown, McpFailure>

/** How a door is built. */
export interface DoorOptions {
  /** Methods answered here instead of by `McpServer` (per-session ones, such as resources). */
  readonly localMethods: Readonly<Record<string, LocalMethod>>
  /** Adjusts a result of `McpServer` before it is sent (e.g. tool fields its schema drops). */
  readonly decorate?: (method: string, result: unknown) => unknown
}

/** The door: the protocol for `McpServer`, and the entry points for a transport. */
export interface McpDoor {
  /** The `RpcServer.Protocol` to run `McpServer` on. */
  readonly protocol: RpcServer.Protocol["Type"]
  /** Registers a client; `push` receives messages not tied to a request (list changes), when the transport has a channel for them. */
  readonly connect: (clientId: number, push?: (message: JsonRpcOut) => Effect.Effect<void>) => Effect.Effect<void>
  /** Handles one frame from a client. Returns once it is dispatched, not answered. */
  readonly receive: (clientId: number, frame: Frame, reply: Reply) => Effect.Effect<void>
  /** Ends a client: its calls are interrupted and their replies ended without an answer. */
  readonly disconnect: (clientId: number) => Effect.Effect<void>
  /** How many of a client's requests await their answer. */
  readonly inFlight: (clientId: number) => number
}

interface Pending {
  readonly id: JsonRpcId
  readonly method: string
  readonly reply: Reply
  cancelled: boolean
}

type Dispatch = (clientId: number, data: FromClientEncoded) => Effect.Effect<void>

const PARAM_HINTS: FieldHints = {
  name: "pass the tool's name as a string, e.g. \"eval\"",
  arguments: "pass the tool's arguments as an object",
  uri: "pass the URI as a string, e.g. an artifact:// URI a result named",
  protocolVersion: "pass the protocol version as a string, e.g. \"2025-06-18\"",
  capabilities: "pass the client's capabilities as an object",
  clientInfo: "pass { name, version } strings",
  cursor: "pass the cursor string from the previous page, or leave it out",
  _meta: "pass an object, e.g. { \"progressToken\": 1 }"
}

const KNOWN_METHODS = [...ClientRpcs.requests.keys()].filter((method) => !ClientNotificationRpcs.requests.has(method))

interface EncodedCause {
  readonly _tag: string
  readonly error?: { readonly code?: unknown; readonly message?: unknown }
  readonly defect?: unknown
  readonly left?: EncodedCause
  readonly right?: EncodedCause
}

const firstFailure = (cause: EncodedCause | undefined): EncodedCause | undefined => {
  if (cause === undefined) return undefined
  if (cause._tag === "Fail" || cause._tag === "Die") return cause
  return firstFailure(cause.left) ?? firstFailure(cause.right)
}

const defectText = (defect: unknown): string => {
  if (typeof defect === "string") return defect.split("\n")[0]!
  if (typeof defect === "object" && defect !== null && "message" in defect) return String(defect.message).split("\n")[0]!
  return "an unexpected failure"
}

/** The JSON-RPC answer for an `Exit` of `McpServer`, or undefined when it was interrupted. */
export const exitReply = (id: JsonRpcId, exit: FromServerEncoded & { readonly _tag: "Exit" }, decorate: (result: unknown) => unknown): JsonRpcOut | undefined => {
  const encoded = exit.exit as { readonly _tag: "Success"; readonly value: unknown } | { readonly _tag: "Failure"; readonly cause: EncodedCause }
  if (encoded._tag === "Success") return resultReply(id, decorate(encoded.value))
  const failure = firstFailure(encoded.cause)
  if (failure === undefined) return undefined
  if (failure._tag === "Fail" && typeof failure.error?.code === "number") {
    return errorReply(id, failure.error.code, String(failure.error.message ?? "request failed"))
  }
  return errorReply(id, ErrorCode.InternalError, `Internal error: ${defectText(failure._tag === "Die" ? failure.defect : failure.error)}.`)
}

/** Builds a door; its background work lives in the current scope. */
export const makeMcpDoor = (options: DoorOptions) =>
  Effect.gen(function*() {
    const dispatch = yield* Deferred.make<Dispatch>()
    const disconnects = yield* Mailbox.make<number>()
    const fibers = yield* FiberSet.make()
    const pending = new Map<string, Pending>()
    const byClientId = new Map<string, string>()
    const pushes = new Map<number, ((message: JsonRpcOut) => Effect.Effect<void>) | undefined>()
    const decorate = options.decorate ?? ((_method: string, result: unknown) => result)
    let counter = 0

    const pendingKey = (clientId: number, requestId: string) => `${clientId}/${requestId}`
    const idKey = (clientId: number, id: JsonRpcId) => `${clientId}/${typeof id}:${id}`

    const settle = (clientId: number, requestId: string): Pending | undefined => {
      const entry = pending.get(pendingKey(clientId, requestId))
      if (entry === undefined) return undefined
      pending.delete(pendingKey(clientId, requestId))
      byClientId.delete(idKey(clientId, entry.id))
      return entry
    }

    const send = (clientId: number, sent: FromServerEncoded): Effect.Effect<void> => {
      // McpServer also sends its notifications (list changes) through here, as requests.
      const message = sent as FromServerEncoded | RequestEncoded
      switch (message._tag) {
        case "Exit": {
          const entry = settle(clientId, message.requestId)
          if (entry === undefined) return Effect.void
          if (entry.cancelled) return entry.reply.end()
          const answer = exitReply(entry.id, message, (result) => decorate(entry.method, result))
          return entry.reply.end(
            answer ?? errorReply(entry.id, ErrorCode.InternalError, "The request was interrupted: its session ended or the server is stopping.")
          )
        }
        case "Request": {
          const push = pushes.get(clientId)
          return push === undefined ? Effect.void : push(notification(message.tag, message.payload))
        }
        case "Defect":
          return Effect.logWarning("MCP server defect", defectText(message.defect))
        default:
          return Effect.void
      }
    }

    const protocol = RpcServer.Protocol.of({
      run: (f) => Effect.zipRight(Deferred.succeed(dispatch, f), Effect.never),
      disconnects,
      send,
      end: () => Effect.void,
      clientIds: Effect.sync(() => new Set(pushes.keys())),
      initialMessage: Effect.succeedNone,
      supportsAck: false,
      supportsTransferables: false,
      supportsSpanPropagation: false
    })

    const answerLocally = (clientId: number, id: JsonRpcId, method: LocalMethod, params: Record<string, unknown>, reply: Reply) =>
      FiberSet.run(
        fibers,
        method(clientId, params).pipe(
          Effect.matchEffect({
            onFailure: (failure) => reply.end(errorReply(id, failure.code, failure.message)),
            onSuccess: (result) => reply.end(resultReply(id, result))
          }),
          Effect.catchAllDefect((defect) => reply.end(errorReply(id, ErrorCode.InternalError, `Internal error: ${defectText(defect)}.`)))
        )
      ).pipe(Effect.asVoid)

    const request = (clientId: number, frame: Frame & { readonly _tag: "Request" }, reply: Reply) =>
      Effect.gen(function*() {
        const params = (frame.params ?? {}) as Record<string, unknown>
        const local = options.localMethods[frame.method]
        if (local !== undefined) return yield* answerLocally(clientId, frame.id, local, params, reply)
        const rpc = ClientRpcs.requests.get(frame.method)
        if (rpc === undefined || ClientNotificationRpcs.requests.has(frame.method)) {
          return yield* reply.end(
            errorReply(frame.id, ErrorCode.MethodNotFound, `Method not found: ${frame.method}. This server answers ${[...KNOWN_METHODS].join(", ")}.`)
          )
        }
        const decoded = Schema.decodeUnknownEither(rpc.payloadSchema as Schema.Schema<unknown, unknown>)(params)
        if (Either.isLeft(decoded)) {
          return yield* reply.end(errorReply(frame.id, ErrorCode.InvalidParams, `Invalid params: ${paramsProblem(decoded.left, frame.method, PARAM_HINTS)}.`))
        }
        if (byClientId.has(idKey(clientId, frame.id))) {
          return yield* reply.end(errorReply(frame.id, ErrorCode.InvalidRequest, `Request id ${JSON.stringify(frame.id)} is already in use by a request still running; use a new id.`))
        }
        const requestId = String(++counter)
        pending.set(pendingKey(clientId, requestId), { id: frame.id, method: frame.method, reply, cancelled: false })
        byClientId.set(idKey(clientId, frame.id), requestId)
        const progressToken = progressTokenOf(params)
        const call: McpCallInfo = {
          clientId,
          method: frame.method,
          ...(progressToken === undefined ? {} : { progressToken }),
          notify: reply.send
        }
        const f = yield* Deferred.await(dispatch)
        yield* f(clientId, { _tag: "Request", id: requestId, tag: frame.method, payload: params, headers: [] }).pipe(
          Effect.provideService(McpCall, call)
        )
      })

    const cancel = (clientId: number, params: unknown) =>
      Effect.gen(function*() {
        const target = (params as { readonly requestId?: unknown } | undefined)?.requestId
        if (typeof target !== "string" && typeof target !== "number") return
        const requestId = byClientId.get(idKey(clientId, target))
        if (requestId === undefined) return
        const entry = pending.get(pendingKey(clientId, requestId))
        if (entry !== undefined) entry.cancelled = true
        const f = yield* Deferred.await(dispatch)
        yield* f(clientId, { _tag: "Interrupt", requestId })
      })

    const receive = (clientId: number, frame: Frame, reply: Reply): Effect.Effect<void> => {
      switch (frame._tag) {
        case "Request":
          return request(clientId, frame, reply)
        case "Notification":
          return frame.method === "notifications/cancelled" ? cancel(clientId, frame.params) : reply.end()
        case "Response":
          return reply.end()
        case "Invalid":
          return reply.end(frame.reply)
      }
    }

    const disconnect = (clientId: number) =>
      Effect.gen(function*() {
        pushes.delete(clientId)
        const prefix = `${clientId}/`
        for (const key of [...pending.keys()]) {
          if (!key.startsWith(prefix)) continue
          const entry = settle(clientId, key.slice(prefix.length))
          if (entry !== undefined) yield* entry.reply.end()
        }
        yield* disconnects.offer(clientId)
      })

    const door: McpDoor = {
      protocol,
      connect: (clientId, push) => Effect.sync(() => void pushes.set(clientId, push)),
      receive,
      disconnect,
      inFlight: (clientId) => {
        let count = 0
        for (const key of pending.keys()) if (key.startsWith(`${clientId}/`)) count++
        return count
      }
    }
    return door
  })

/** A `Reply` that writes every message with `write` (stdio: one line each). */
export const writerReply = (write: (message: JsonRpcOut) => Effect.Effect<void>): Reply => ({
  send: write,
  end: (message) => (message === undefined ? Effect.void : write(message))
})

