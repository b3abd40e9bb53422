/**
 * The streamable HTTP door (MCP 2025-06-18) at one path, on the Effect platform's HTTP
 * server: POST carries one JSON-RPC message (answered as JSON, or as an SSE stream with
 * progress before the answer when the client accepts one), DELETE ends the session,
 * GET is 405 (this server has nothing to say outside a request).
 *
 * Every request needs `Authorization: Bearer <token>` (compared in constant time; 401
 * otherwise) and, when it has an `Origin`, one on a loopback host or the host the server
 * listens on (403 otherwise: DNS-rebinding protection). `initialize` without a session
 * starts one and returns its `Mcp-Session-Id`; every later request must carry it (404
 * for an unknown or ended one, so the client starts again), and an `MCP-Protocol-Version`
 * header, when sent, must name a version the server speaks (400 otherwise). A session idle for longer
 * than `idleTtlMs` with nothing running is ended like a DELETE. A path under the prefix of
 * an app served `beside` the door (the viewer page) goes to that app, which authenticates
 * its own requests; any other path is 404.
 */
import { ByteSize, Duration, Effect, Option, Queue, Schedule, type Scope, Stream } from "effect"
import { HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "effect/http"
import { createHash, randomBytes, timingSafeEqual } from "node:crypto"
import {
  ErrorCode,
  errorReply,
  type Frame,
  type JsonRpcOut,
  MAX_MESSAGE_BYTES,
  parseFrame,
  SUPPORTED_PROTOCOL_VERSIONS,
  tooLargeReply
} from "./JsonRpc.ts"
import type { McpDoor, Reply } from "./McpDoor.ts"
import type { McpSessions } from "./EvalMcpServer.ts"

/** The path the door serves. */
export const MCP_PATH = "/mcp"

/** The session header of the streamable HTTP transport. */
export const SESSION_HEADER = "mcp-session-id"

/** The header a client names its negotiated protocol version in, after `initialize`. */
export const PROTOCOL_VERSION_HEADER = "mcp-protocol-version"


/** How the door checks and bounds requests. */
export interface HttpDoorOptions {
  readonly token: string
  /** The host the server listens on (its name is an allowed Origin host too). */
  readonly host: string
  /** A session with nothing running ends after this long without a request. */
  readonly idleTtlMs: number
  readonly maxMessageBytes?: number
  /** Another app served beside the door under its own path prefix (the viewer page); it does its own authentication. */
  readonly beside?: { readonly prefix: string; readonly app: Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | Scope.Scope> }
}

const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(["localhost", "127.0.0.1", "[::1]", "::1"])

/** Whether an `Origin` header may talk to a server listening on `host` (absent: a non-browser client, allowed). */
export const originAllowed = (origin: string | undefined, host: string): boolean => {
  if (origin === undefined) return true
  let hostname: string
  try {
    const url = new URL(origin)
    if (url.protocol !== "http:" && url.protocol !== "https:") return false
    hostname = url.hostname
  } catch {
    return false
  }
  return LOOPBACK_HOSTS.has(hostname) || (hostname === host && host !== "0.0.0.0" && host !== "::")
}

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest()

/** Whether an `Authorization` header carries `token` (constant time in the header's content). */
export const bearerMatches = (header: string | undefined, token: string): boolean => {
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header)
  const given = digest(match === null ? "" : match[1]!)
  return timingSafeEqual(given, digest(token)) && match !== null
}

const jsonResponse = (status: number, body: JsonRpcOut, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers })

const httpError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  jsonResponse(status, errorReply(null, code, message), headers)

interface Session {
  readonly id: string
  readonly clientId: number
  lastSeen: number
  running: number
}

type Body =
  | { readonly _tag: "Read"; readonly text: string }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Unreadable"; readonly reason: string }

const TOO_LARGE: Body = { _tag: "TooLarge" }

type Outgoing = { readonly message: JsonRpcOut | undefined; readonly final: boolean }

const sseEvent = (message: JsonRpcOut) => new TextEncoder().encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`)

/** The door's HTTP app; ends idle sessions in the background for as long as the scope lives. */
export const makeHttpDoor = (door: McpDoor, sessions: McpSessions, options: HttpDoorOptions) =>
  Effect.gen(function*() {
    const maxBytes = options.maxMessageBytes ?? MAX_MESSAGE_BYTES
    const open = new Map<string, Session>()
    let nextClientId = 1

    const endSession = (session: Session, options?: { readonly forget?: boolean }) =>
      Effect.suspend(() => {
        if (!open.delete(session.id)) return Effect.void
        return sessions.end(session.clientId, options)
      })

    const sweep = Effect.suspend(() => {
      const now = Date.now()
      const idle = [...open.values()].filter((session) => session.running === 0 && now - session.lastSeen > options.idleTtlMs)
      return Effect.forEach(idle, (session) => endSession(session), { discard: true })
    })
    const sweepEvery = Duration.millis(Math.max(1_000, Math.min(60_000, Math.floor(options.idleTtlMs / 2))))
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(sweep, sweepEvery), Schedule.spaced(sweepEvery)))
    yield* Effect.addFinalizer(() => Effect.forEach([...open.values()], (session) => endSession(session), { discard: true }))

    const guard = (request: HttpServerRequest.HttpServerRequest): Option.Option<HttpServerResponse.HttpServerResponse> => {
      if (!originAllowed(request.headers["origin"], options.host)) {
        return Option.some(httpError(403, ErrorCode.InvalidRequest, "Forbidden: this Origin may not use the server (DNS-rebinding protection); connect from a loopback origin or without one."))
      }
      if (!bearerMatches(request.headers["authorization"], options.token)) {
        return Option.some(
          httpError(401, ErrorCode.InvalidRequest, "Unauthorized: send Authorization: Bearer <token> (VEYYON_MCP_TOKEN, or the token the server printed at start).", {
            "www-authenticate": "Bearer"
          })
        )
      }
      const version = request.headers[PROTOCOL_VERSION_HEADER]
      if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version.trim())) {
        return Option.some(
          httpError(
            400,
            ErrorCode.InvalidRequest,
            `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(version.slice(0, 64))}; this server speaks ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")}.`
          )
        )
      }
      return Option.none()
    }

    const readBody = (request: HttpServerRequest.HttpServerRequest): Effect.Effect<Body> => {
      const length = Number(request.headers["content-length"])
      if (Number.isFinite(length) && length > maxBytes) return Effect.succeed(TOO_LARGE)
      return request.text.pipe(
        Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(maxBytes)),
        Effect.map((text): Body => (Buffer.byteLength(text, "utf8") > maxBytes ? TOO_LARGE : { _tag: "Read", text })),
        Effect.catch((error) =>
          Effect.succeed<Body>(
            error.reason._tag === "RequestParseError" && error.reason.reason === "BodyTooLarge"
              ? TOO_LARGE
              : { _tag: "Unreadable", reason: error.message }
          )
        )
      )
    }

    const sessionOf = (request: HttpServerRequest.HttpServerRequest, frame: Frame) => {
      const header = request.headers[SESSION_HEADER]
      if (header === undefined) {
        if (frame._tag === "Request" && frame.method === "initialize") {
          const session: Session = { id: randomBytes(16).toString("hex"), clientId: nextClientId++, lastSeen: Date.now(), running: 0 }
          open.set(session.id, session)
          return Effect.as(door.connect(session.clientId), { _tag: "Session" as const, session })
        }
        return Effect.succeed({
          _tag: "Refused" as const,
          response: httpError(400, ErrorCode.InvalidRequest, "Bad Request: the Mcp-Session-Id header is missing; send initialize first and then the session id it returns.")
        })
      }
      const session = open.get(header)
      return Effect.succeed(
        session === undefined
          ? { _tag: "Refused" as const, response: httpError(404, ErrorCode.InvalidRequest, "Session not found: it ended (DELETE or idle) or never existed; send initialize to start a new one.") }
          : { _tag: "Session" as const, session }
      )
    }

    const answer = (session: Session, frame: Frame & { readonly _tag: "Request" }, wantsStream: boolean) =>
      Effect.gen(function*() {
        const queue = yield* Queue.unbounded<Outgoing>()
        let ended = false
        const reply: Reply = {
          send: (message) => (ended ? Effect.void : Queue.offer(queue, { message, final: false })),
          end: (message) =>
            Effect.suspend(() => {
              if (ended) return Effect.void
              ended = true
              return Queue.offer(queue, { message, final: true })
            })
        }
        session.running++
        const done = Effect.sync(() => {
          session.running--
          session.lastSeen = Date.now()
        })
        const headers = { "mcp-session-id": session.id }
        yield* door.receive(session.clientId, frame, reply)
        if (wantsStream) {
          const events = Stream.fromQueue(queue).pipe(
            Stream.takeUntil((item) => item.final),
            Stream.flatMap((item) => (item.message === undefined ? Stream.empty : Stream.make(sseEvent(item.message)))),
            Stream.ensuring(done)
          )
          return HttpServerResponse.stream(events, { contentType: "text/event-stream", headers: { ...headers, "cache-control": "no-cache" } })
        }
        const final = yield* Queue.take(queue).pipe(Effect.repeat({ until: (item) => item.final }), Effect.ensuring(done))
        return final.message === undefined
          ? HttpServerResponse.empty({ status: 204, headers })
          : jsonResponse(200, final.message, headers)
      })

    const post = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const refused = guard(request)
      if (Option.isSome(refused)) return refused.value
      const body = yield* readBody(request)
      if (body._tag === "TooLarge") return jsonResponse(413, tooLargeReply(maxBytes))
      if (body._tag === "Unreadable") return httpError(400, ErrorCode.ParseError, `Bad Request: the body could not be read (${body.reason}).`)
      const frame = parseFrame(body.text)
      if (frame._tag === "Invalid") return jsonResponse(400, frame.reply)
      const found = yield* sessionOf(request, frame)
      if (found._tag === "Refused") return found.response
      const session = found.session
      session.lastSeen = Date.now()
      if (frame._tag !== "Request") {
        yield* door.receive(session.clientId, frame, { send: () => Effect.void, end: () => Effect.void })
        return HttpServerResponse.empty({ status: 202 })
      }
      const accept = request.headers["accept"] ?? ""
      return yield* answer(session, frame, frame.method === "tools/call" && accept.includes("text/event-stream"))
    })

    const del = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const refused = guard(request)
      if (Option.isSome(refused)) return refused.value
      const session = open.get(request.headers[SESSION_HEADER] ?? "")
      if (session === undefined) return httpError(404, ErrorCode.InvalidRequest, "Session not found: nothing to end.")
      yield* endSession(session, { forget: true })
      return HttpServerResponse.empty({ status: 204 })
    })

    const get = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const refused = guard(request)
      if (Option.isSome(refused)) return refused.value
      return HttpServerResponse.empty({ status: 405, headers: { allow: "POST, DELETE" } })
    })

    const notFound = HttpServerResponse.empty({ status: 404 })
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const pathname = new URL(request.url, "http://door").pathname
      const beside = options.beside
      if (beside !== undefined && (pathname === beside.prefix || pathname.startsWith(`${beside.prefix}/`))) return yield* beside.app
      if (pathname !== MCP_PATH) return notFound
      switch (request.method) {
        case "POST":
          return yield* post
        case "DELETE":
          return yield* del
        case "GET":
          return yield* get
        default:
          return notFound
      }
    }).pipe(Effect.interruptible)
  })
