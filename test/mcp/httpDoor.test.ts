/**
 * The HTTP door in process, over a scripted door: sessions start with initialize, are
 * refused once ended, and end on their own after the idle time with nothing running; an
 * unsupported protocol version header is refused, and a body over the limit is refused
 * whether or not it says its length.
 */
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { HttpClient, HttpClientRequest, HttpServer } from "effect/http"
import type { McpSessions } from "../../src/mcp/EvalMcpServer.ts"
import { makeHttpDoor } from "../../src/mcp/HttpDoor.ts"
import { resultReply } from "../../src/mcp/JsonRpc.ts"
import type { McpDoor } from "../../src/mcp/McpDoor.ts"

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
