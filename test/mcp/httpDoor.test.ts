/**
 * The HTTP door in process, over a scripted door: sessions start with initialize, are
 * refused once ended, and end on their own after the idle time with nothing running; an
 * unsupported protocol version header is refused, and a body over the limit is refused
 * whether or not it says its length; a session answers only the token that started it;
 * the GET event stream carries the server's requests to its client.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Stream } from "effect"
import { HttpClient, HttpClientRequest, HttpServer } from "effect/http"
import type { McpSessions } from "../../src/mcp/EvalMcpServer.ts"
import { makeHttpDoor, tokenIdentity } from "../../src/mcp/HttpDoor.ts"
import { resultReply } from "../../src/mcp/JsonRpc.ts"
import { type McpDoor, makeMcpDoor } from "../../src/mcp/McpDoor.ts"

const TOKEN = "t0ken"

const scriptedDoor = (ended: Array<number>) => {
  const door: McpDoor = {
    connect: () => Effect.void,
    ask: () => Effect.die("the scripted door asks nothing"),
    receive: (_clientId, frame, reply) => (frame._tag === "Request" ? reply.end(resultReply(frame.id, { ok: true })) : reply.end()),
    disconnect: () => Effect.void,
    inFlight: () => 0
  }
  const sessions: McpSessions = { sessionIdOf: (clientId) => `s${clientId}`, end: (clientId) => Effect.sync(() => void ended.push(clientId)) }
  return { door, sessions }
}

const rpc = (body: unknown, session?: string, headers: Record<string, string> = {}) =>
  HttpClientRequest.post("/mcp").pipe(
    HttpClientRequest.setHeaders({ authorization: `Bearer ${TOKEN}`, ...(session === undefined ? {} : { "mcp-session-id": session }), ...headers }),
    HttpClientRequest.bodyJsonUnsafe(body)
  )

const serveScripted = (maxMessageBytes?: number) =>
  Effect.gen(function*() {
    const { door, sessions } = scriptedDoor([])
    const { app: router } = yield* makeHttpDoor(door, sessions, {
      tokens: [TOKEN],
      host: "127.0.0.1",
      idleTtlMs: 60_000,
      ...(maxMessageBytes === undefined ? {} : { maxMessageBytes })
    })
    yield* HttpServer.serveEffect(router)
    const client = yield* HttpClient.HttpClient
    const init = yield* client.execute(rpc({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }))
    expect(init.status).toBe(200)
    return { client, session: init.headers["mcp-session-id"]! }
  })

describe("HttpDoor", () => {
  it.live("ends a session idle past the TTL, shutting it down, and answers 404 for it afterwards", () =>
    Effect.gen(function*() {
      const ended: Array<number> = []
      const { door, sessions } = scriptedDoor(ended)
      const { app: router } = yield* makeHttpDoor(door, sessions, { tokens: [TOKEN], host: "127.0.0.1", idleTtlMs: 300 })
      yield* HttpServer.serveEffect(router)
      const client = yield* HttpClient.HttpClient
      const init = yield* client.execute(rpc({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }))
      expect(init.status).toBe(200)
      const session = init.headers["mcp-session-id"]!
      expect((yield* client.execute(rpc({ jsonrpc: "2.0", id: 2, method: "ping" }, session))).status).toBe(200)
      while (ended.length === 0) yield* Effect.sleep("100 millis")
      expect(ended).toEqual([1])
      expect((yield* client.execute(rpc({ jsonrpc: "2.0", id: 3, method: "ping" }, session))).status).toBe(404)
    }).pipe(Effect.provide(NodeHttpServer.layerTest)), 30_000)
})

describe("HttpDoor request checks", () => {
  it.live("refuses an unsupported MCP-Protocol-Version with 400 and accepts a supported one", () =>
    Effect.gen(function*() {
      const { client, session } = yield* serveScripted()
      const ping = { jsonrpc: "2.0", id: 2, method: "ping" }
      const refused = yield* client.execute(rpc(ping, session, { "mcp-protocol-version": "1999-01-01" }))
      expect(refused.status).toBe(400)
      expect(JSON.stringify(yield* refused.json)).toContain("2025-06-18")
      expect((yield* client.execute(rpc(ping, session, { "mcp-protocol-version": "2025-06-18" }))).status).toBe(200)
      expect((yield* client.execute(rpc(ping, session, { "mcp-protocol-version": "2024-11-05" }))).status).toBe(200)
      expect((yield* client.execute(rpc(ping, session, { "mcp-protocol-version": "2025-11-25" }))).status).toBe(200)
    }).pipe(Effect.provide(NodeHttpServer.layerTest)), 30_000)

  it.live("refuses a body over the limit sent without a length (413, or the connection cut while the client still sends), and keeps serving", () =>
    Effect.gen(function*() {
      const { client, session } = yield* serveScripted(4096)
      const chunks = Stream.make(`{"jsonrpc":"2.0","id":2,"method":"ping","pad":"`, "x".repeat(8192), `"}`).pipe(Stream.encodeText)
      const big = HttpClientRequest.post("/mcp").pipe(
        HttpClientRequest.setHeaders({ authorization: `Bearer ${TOKEN}`, "mcp-session-id": session }),
        HttpClientRequest.bodyStream(chunks, { contentType: "application/json" })
      )
      const answered = yield* Effect.result(client.execute(big))
      if (answered._tag === "Success") expect(answered.success.status).toBe(413)
      else expect(answered.failure.message).toMatch(/Transport error/)
      expect((yield* client.execute(rpc({ jsonrpc: "2.0", id: 3, method: "ping" }, session))).status).toBe(200)
    }).pipe(Effect.provide(NodeHttpServer.layerTest)), 30_000)
})

const OTHER = "another-token-of-the-door"

/** A request with `token` instead of the test's usual one. */
const as = (token: string, request: HttpClientRequest.HttpClientRequest) => HttpClientRequest.setHeader(request, "authorization", `Bearer ${token}`)

const getEvents = (session: string, token = TOKEN) =>
  HttpClientRequest.get("/mcp").pipe(
    HttpClientRequest.setHeaders({ authorization: `Bearer ${token}`, "mcp-session-id": session, accept: "text/event-stream" })
  )

describe("HttpDoor sessions and their tokens", () => {
  it.live("a session answers only the token that started it: another gets 404 for its id on POST, GET and DELETE", () =>
    Effect.gen(function*() {
      const { door, sessions } = scriptedDoor([])
      const httpDoor = yield* makeHttpDoor(door, sessions, { tokens: [TOKEN, OTHER], host: "127.0.0.1", idleTtlMs: 60_000 })
      yield* HttpServer.serveEffect(httpDoor.app)
      const client = yield* HttpClient.HttpClient
      const mine = (yield* client.execute(rpc({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }))).headers["mcp-session-id"]!
      const theirs = (yield* client.execute(as(OTHER, rpc({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} })))).headers["mcp-session-id"]!
      expect(httpDoor.sessionOwner(mine)).toBe(tokenIdentity(TOKEN))
      expect(httpDoor.sessionOwner(theirs)).toBe(tokenIdentity(OTHER))
      expect(tokenIdentity(TOKEN)).not.toContain(TOKEN)
      expect(httpDoor.sessions().map((info) => info.owner).sort()).toEqual([tokenIdentity(TOKEN), tokenIdentity(OTHER)].sort())
      const ping = { jsonrpc: "2.0", id: 2, method: "ping" }
      expect((yield* client.execute(as(OTHER, rpc(ping, mine)))).status).toBe(404)
      expect((yield* client.execute(getEvents(mine, OTHER))).status).toBe(404)
      expect((yield* client.execute(as(OTHER, HttpClientRequest.delete("/mcp").pipe(HttpClientRequest.setHeader("mcp-session-id", mine))))).status).toBe(404)
      expect((yield* client.execute(rpc(ping, mine))).status).toBe(200)
      expect((yield* client.execute(as(OTHER, rpc(ping, theirs)))).status).toBe(200)
      expect((yield* client.execute(as("not-a-token", rpc(ping, mine)))).status).toBe(401)
    }).pipe(Effect.provide(NodeHttpServer.layerTest)), 30_000)
})

describe("HttpDoor event stream", () => {
  it.live("carries the server's requests on a session's GET stream (one per session) and routes the client's POSTed response back", () =>
    Effect.gen(function*() {
      const mcpDoor = yield* makeMcpDoor({ methods: { ping: () => Effect.succeed({}) } })
      const sessions: McpSessions = { sessionIdOf: (clientId) => `s${clientId}`, end: (clientId) => mcpDoor.disconnect(clientId) }
      const httpDoor = yield* makeHttpDoor(mcpDoor, sessions, { tokens: [TOKEN], host: "127.0.0.1", idleTtlMs: 60_000 })
      yield* HttpServer.serveEffect(httpDoor.app)
      const client = yield* HttpClient.HttpClient
      const session = (yield* client.execute(rpc({ jsonrpc: "2.0", id: 1, method: "initialize", params: {} }))).headers["mcp-session-id"]!
      const clientId = httpDoor.sessions()[0]!.clientId
      expect(yield* Effect.flip(mcpDoor.ask(clientId, "roots/list", {}, 10_000))).toMatchObject({ reason: "unreachable" })
      const events = yield* client.execute(getEvents(session))
      expect(events.status).toBe(200)
      expect(events.headers["content-type"]).toContain("text/event-stream")
      expect((yield* client.execute(getEvents(session))).status).toBe(409)
      const asked = yield* Effect.forkChild(mcpDoor.ask(clientId, "roots/list", { why: "test" }, 10_000))
      const received = yield* events.stream.pipe(
        Stream.decodeText,
        Stream.scan(() => "", (text: string, chunk: string) => text + chunk),
        Stream.takeUntil((text) => text.includes("data: ")),
        Stream.runLast
      )
      const data = /data: (.*)\n/.exec(received._tag === "Some" ? received.value : "")
      const request = JSON.parse(data![1]!) as { readonly id: string; readonly method: string }
      expect(request).toMatchObject({ jsonrpc: "2.0", method: "roots/list", params: { why: "test" } })
      expect((yield* client.execute(rpc({ jsonrpc: "2.0", id: request.id, result: { roots: [] } }, session))).status).toBe(202)
      expect(yield* Fiber.join(asked)).toEqual({ roots: [] })
    }).pipe(Effect.provide(NodeHttpServer.layerTest)), 30_000)
})
