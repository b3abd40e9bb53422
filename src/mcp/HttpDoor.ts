/**
 * The streamable HTTP door (MCP 2025-11-25, and the older revisions) at one path, on the
 * Effect platform's HTTP server: POST carries one JSON-RPC message (answered as JSON, or
 * as an SSE stream with progress before the answer when the client accepts one), GET
 * opens the session's event stream (one per session: the server's requests to its client
 * travel there, or on the stream of a call in flight when none is open), DELETE ends the
 * session.
 *
 * Every request needs `Authorization: Bearer <token>` for one of the door's tokens
 * (each compared in constant time; 401 otherwise) and, when it has an `Origin`, one on a
 * loopback host or the host the server listens on (403 otherwise: DNS-rebinding
 * protection). `initialize` without a session starts one, owned by the token that sent
 * it, and returns its `Mcp-Session-Id`; every later request must carry it and the same
 * token (404 for an unknown or ended id, or one another token owns, so the client starts
 * again), and an `MCP-Protocol-Version` header, when sent, must name a version the server
 * speaks (400 otherwise). A session idle for longer than `idleTtlMs` with nothing running
 * (no call, no task running or holding a result not yet fetched) is ended like a DELETE.
 * A path under the prefix of an app served `beside` the door (the viewer page) goes to
 * that app, which authenticates its own requests; any other path is 404.
 */
import { ByteSize, Duration, Effect, Queue, Result, Schedule, type Scope, Stream } from "effect"
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
import type { ClientChannel } from "./ClientRequests.ts"
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
  /** The bearer tokens admitted; each session belongs to the one that started it. */
  readonly tokens: ReadonlyArray<string>
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
export const bearerMatches = (header: string | undefined, token: string): boolean => bearerIndex(header, [token]) === 0

/** Which of `tokens` an `Authorization` header carries, or -1; every token is compared, each in constant time. */
export const bearerIndex = (header: string | undefined, tokens: ReadonlyArray<string>): number => bearerMatcher(tokens)(header)

/** `bearerIndex` over fixed `tokens`, their digests taken once. */
export const bearerMatcher = (tokens: ReadonlyArray<string>): (header: string | undefined) => number => {
  const digests = tokens.map(digest)
  return (header) => {
    const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header)
    const given = digest(match === null ? "" : match[1]!)
    let found = -1
    for (let i = 0; i < digests.length; i++) if (timingSafeEqual(given, digests[i]!) && found === -1) found = i
    return match === null ? -1 : found
  }
}

/** A token's identity as the door names a session's owner: a fingerprint (16 hex digits of its SHA-256), never the token. */
export const tokenIdentity = (token: string): string => digest(token).toString("hex").slice(0, 16)

const jsonResponse = (status: number, body: JsonRpcOut, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers })

const httpError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  jsonResponse(status, errorReply(null, code, message), headers)

interface Session {
  readonly id: string
  readonly clientId: number
  /** The identity (`tokenIdentity`) of the token that started it. */
  readonly owner: string
  lastSeen: number
  running: number
  /** The open GET event stream, when there is one. */
  events: ((message: JsonRpcOut | undefined) => Effect.Effect<void>) | undefined
  /** The SSE streams of its calls in flight, newest last. */
  readonly calls: Array<(message: JsonRpcOut) => Effect.Effect<void>>
}

/** One session of the door as its owner sees it. */
export interface HttpSessionInfo {
  /** The `Mcp-Session-Id`. */
  readonly id: string
  /** The door's client id (the key of `McpSessions`). */
  readonly clientId: number
  /** The `tokenIdentity` of the token that owns it. */
  readonly owner: string
}

/** The HTTP door: its app and what it knows of its sessions. */
export interface HttpDoor {
  /** The HTTP app to serve. */
  readonly app: Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | Scope.Scope>
  /** The `tokenIdentity` of the token owning a session (by `Mcp-Session-Id`), or undefined when none is open. */
  readonly sessionOwner: (sessionId: string) => string | undefined
  /** The sessions open now. */
  readonly sessions: () => ReadonlyArray<HttpSessionInfo>
}

type Body =
  | { readonly _tag: "Read"; readonly text: string }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "Unreadable"; readonly reason: string }

const TOO_LARGE: Body = { _tag: "TooLarge" }

type Outgoing = { readonly message: JsonRpcOut | undefined; readonly final: boolean }

const encoder = new TextEncoder()

const STREAM_OPENED = encoder.encode(": stream open\n\n")

const NO_EVENTS = new Uint8Array(0)

const sseEvent = (message: JsonRpcOut) => encoder.encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`)

/** The door's HTTP app; ends idle sessions in the background for as long as the scope lives. */
export const makeHttpDoor = (door: McpDoor, sessions: McpSessions, options: HttpDoorOptions) =>
  Effect.gen(function*() {
    const maxBytes = options.maxMessageBytes ?? MAX_MESSAGE_BYTES
    const identities = options.tokens.map(tokenIdentity)
    const bearerOf = bearerMatcher(options.tokens)
    const open = new Map<string, Session>()
    let nextClientId = 1

    const endSession = (session: Session, options?: { readonly forget?: boolean }) =>
      Effect.suspend(() => {
        if (!open.delete(session.id)) return Effect.void
        return Effect.andThen(sessions.end(session.clientId, options), session.events?.(undefined) ?? Effect.void)
      })

    const channelOf = (session: Session): ClientChannel => (message) =>
      Effect.suspend(() => {
        const target = session.events ?? session.calls.at(-1)
        return target === undefined ? Effect.succeed(false) : Effect.as(target(message), true)
      })

    const sweep = Effect.suspend(() => {
      const now = Date.now()
      const idle = [...open.values()].filter((session) =>
        session.running === 0 && door.inFlight(session.clientId) === 0 && now - session.lastSeen > options.idleTtlMs)
      return Effect.forEach(idle, (session) => endSession(session), { discard: true })
    })
    const sweepEvery = Duration.millis(Math.max(1_000, Math.min(60_000, Math.floor(options.idleTtlMs / 2))))
    yield* Effect.forkScoped(Effect.repeat(Effect.delay(sweep, sweepEvery), Schedule.spaced(sweepEvery)))
    yield* Effect.addFinalizer(() => Effect.forEach([...open.values()], (session) => endSession(session), { discard: true }))

    /** The refusal for a request, or the identity of the token it carries. */
    const guard = (request: HttpServerRequest.HttpServerRequest): Result.Result<string, HttpServerResponse.HttpServerResponse> => {
      if (!originAllowed(request.headers["origin"], options.host)) {
        return Result.fail(httpError(403, ErrorCode.InvalidRequest, "Forbidden: this Origin may not use the server (DNS-rebinding protection); connect from a loopback origin or without one."))
      }
      const index = bearerOf(request.headers["authorization"])
      if (index === -1) {
        return Result.fail(
          httpError(401, ErrorCode.InvalidRequest, "Unauthorized: send Authorization: Bearer <token> (VEYYON_MCP_TOKEN, a line of VEYYON_MCP_TOKENS_FILE, or the token the server printed at start).", {
            "www-authenticate": "Bearer"
          })
        )
      }
      const version = request.headers[PROTOCOL_VERSION_HEADER]
      if (version !== undefined && !SUPPORTED_PROTOCOL_VERSIONS.includes(version.trim())) {
        return Result.fail(
          httpError(
            400,
            ErrorCode.InvalidRequest,
            `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(version.slice(0, 64))}; this server speaks ${SUPPORTED_PROTOCOL_VERSIONS.join(", ")}.`
          )
        )
      }
      return Result.succeed(identities[index]!)
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

    const NOT_FOUND = "Session not found: it ended (DELETE or idle), never existed, or belongs to another token; send initialize to start a new one."

    /** The open session a request names, when the token `owner` owns it. */
    const ownedSession = (request: HttpServerRequest.HttpServerRequest, owner: string): Session | undefined => {
      const session = open.get(request.headers[SESSION_HEADER] ?? "")
      return session !== undefined && session.owner === owner ? session : undefined
    }

    const sessionOf = (request: HttpServerRequest.HttpServerRequest, frame: Frame, owner: string) => {
      const header = request.headers[SESSION_HEADER]
      if (header === undefined) {
        if (frame._tag === "Request" && frame.method === "initialize") {
          const session: Session = {
            id: randomBytes(16).toString("hex"),
            clientId: nextClientId++,
            owner,
            lastSeen: Date.now(),
            running: 0,
            events: undefined,
            calls: []
          }
          open.set(session.id, session)
          return Effect.as(door.connect(session.clientId, channelOf(session)), { _tag: "Session" as const, session })
        }
        return Effect.succeed({
          _tag: "Refused" as const,
          response: httpError(400, ErrorCode.InvalidRequest, "Bad Request: the Mcp-Session-Id header is missing; send initialize first and then the session id it returns.")
        })
      }
      const session = ownedSession(request, owner)
      return Effect.succeed(
        session === undefined
          ? { _tag: "Refused" as const, response: httpError(404, ErrorCode.InvalidRequest, NOT_FOUND) }
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
        const toStream = (message: JsonRpcOut) => reply.send(message)
        if (wantsStream) session.calls.push(toStream)
        const unlisted = Effect.sync(() => {
          const at = session.calls.indexOf(toStream)
          if (at !== -1) session.calls.splice(at, 1)
        })
        yield* door.receive(session.clientId, frame, reply)
        if (wantsStream) {
          const ended = Effect.andThen(unlisted, done)
          // An answer with nothing before it (the common call) is the whole stream: one event, written at once.
          const first = yield* Effect.onInterrupt(Queue.take(queue), () => ended)
          const sseHeaders = { contentType: "text/event-stream", headers: { ...headers, "cache-control": "no-cache" } }
          if (first.final) {
            yield* ended
            return HttpServerResponse.uint8Array(first.message === undefined ? NO_EVENTS : sseEvent(first.message), sseHeaders)
          }
          const events = Stream.fromQueue(queue).pipe(
            Stream.takeUntil((item) => item.final),
            Stream.prepend([first]),
            Stream.flatMap((item) => (item.message === undefined ? Stream.empty : Stream.make(sseEvent(item.message)))),
            Stream.ensuring(ended)
          )
          return HttpServerResponse.stream(events, sseHeaders)
        }
        const final = yield* Queue.take(queue).pipe(Effect.repeat({ until: (item) => item.final }), Effect.ensuring(done))
        return final.message === undefined
          ? HttpServerResponse.empty({ status: 204, headers })
          : jsonResponse(200, final.message, headers)
      })

    const post = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const admitted = guard(request)
      if (Result.isFailure(admitted)) return admitted.failure
      const body = yield* readBody(request)
      if (body._tag === "TooLarge") return jsonResponse(413, tooLargeReply(maxBytes))
      if (body._tag === "Unreadable") return httpError(400, ErrorCode.ParseError, `Bad Request: the body could not be read (${body.reason}).`)
      const frame = parseFrame(body.text)
      if (frame._tag === "Invalid") return jsonResponse(400, frame.reply)
      const found = yield* sessionOf(request, frame, admitted.success)
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
      const admitted = guard(request)
      if (Result.isFailure(admitted)) return admitted.failure
      const session = ownedSession(request, admitted.success)
      if (session === undefined) return httpError(404, ErrorCode.InvalidRequest, "Session not found: nothing to end.")
      yield* endSession(session, { forget: true })
      return HttpServerResponse.empty({ status: 204 })
    })

    /** The session's event stream: the server's requests and notifications outside a call, until the session ends or the client goes. */
    const get = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const admitted = guard(request)
      if (Result.isFailure(admitted)) return admitted.failure
      if (request.headers[SESSION_HEADER] === undefined) {
        return httpError(400, ErrorCode.InvalidRequest, "Bad Request: the Mcp-Session-Id header is missing; send initialize first and then the session id it returns.")
      }
      const session = ownedSession(request, admitted.success)
      if (session === undefined) return httpError(404, ErrorCode.InvalidRequest, NOT_FOUND)
      if (!(request.headers["accept"] ?? "").includes("text/event-stream")) {
        return httpError(406, ErrorCode.InvalidRequest, "Not Acceptable: the event stream needs Accept: text/event-stream.")
      }
      if (session.events !== undefined) {
        return httpError(409, ErrorCode.InvalidRequest, "Conflict: this session's event stream is already open; one per session.")
      }
      const queue = yield* Queue.unbounded<Outgoing>()
      const push = (message: JsonRpcOut | undefined) => Queue.offer(queue, { message, final: message === undefined })
      session.events = push
      const events = Stream.fromQueue(queue).pipe(
        Stream.takeUntil((item) => item.final),
        Stream.flatMap((item) => (item.message === undefined ? Stream.empty : Stream.make(sseEvent(item.message)))),
        // A comment first, so the response's headers go out now rather than with the first request.
        Stream.prepend([STREAM_OPENED]),
        Stream.ensuring(Effect.sync(() => {
          if (session.events === push) session.events = undefined
        }))
      )
      return HttpServerResponse.stream(events, {
        contentType: "text/event-stream",
        headers: { "mcp-session-id": session.id, "cache-control": "no-cache" }
      })
    })

    const notFound = HttpServerResponse.empty({ status: 404 })
    const app = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const pathname = request.url === MCP_PATH ? MCP_PATH : new URL(request.url, "http://door").pathname
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
    const httpDoor: HttpDoor = {
      app,
      sessionOwner: (sessionId) => open.get(sessionId)?.owner,
      sessions: () => [...open.values()].map(({ id, clientId, owner }) => ({ id, clientId, owner }))
    }
    return httpDoor
  })
