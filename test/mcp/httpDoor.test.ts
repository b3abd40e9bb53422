/**
 * The HTTP door in process, over a scripted door: sessions start with initialize, are
 * refused once ended, and end on their own after the idle time with nothing running.
 */
import { HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { McpSessions } from "../../src/mcp/EvalMcpServer.ts"
import { makeHttpDoor } from "../../src/mcp/HttpDoor.ts"
import { resultReply } from "../../src/mcp/JsonRpc.ts"
import type { McpDoor } from "../../src/mcp/McpDoor.ts"

const TOKEN = "t0ken"

const scriptedDoor = (ended: Array<number>) => {
  const door: McpDoor = {
    protocol: undefined as never,
    connect: () => Effect.void,
    receive: (_clientId, frame, reply) => (frame._tag === "Request" ? reply.end(resultReply(frame.id, { ok: true })) : reply.end()),
    disconnect: () => Effect.void,
    inFlight: () => 0
  }
  const sessions: McpSessions = { sessionIdOf: (clientId) => `s${clientId}`, end: (clientId) => Effect.sync(() => void ended.push(clientId)) }
  return { door, sessions }
}

const rpc = (body: unknown, session?: string) =>
  HttpClientRequest.post("/mcp").pipe(
    HttpClientRequest.setHeaders({ authorization: `Bearer ${TOKEN}`, ...(session === undefined ? {} : { "mcp-session-id": session }) }),
    HttpClientRequest.bodyUnsafeJson(body)
  )

describe("HttpDoor", () => {
  it.scopedLive("ends a session idle past the TTL, shutting it down, and answers 404 for it afterwards", () =>
    Effect.gen(function*() {
      const ended: Array<number> = []
      const { door, sessions } = scriptedDoor(ended)
      const router = yield* makeHttpDoor(door, sessions, { token: TOKEN, host: "127.0.0.1", idleTtlMs: 300 })
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
