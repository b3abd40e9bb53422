/**
 * The viewer beside the HTTP door on a real socket: `/viewer` goes to the viewer and
 * `/mcp` stays the door's (same refusals as without it); a page that goes away stops
 * listening to its session (no watcher left behind per closed event stream).
 */
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpServer } from "effect/http"
import { createServer } from "node:http"
import type { McpSessions } from "../../../src/mcp/EvalMcpServer.ts"
import { makeHttpDoor } from "../../../src/mcp/HttpDoor.ts"
import { resultReply } from "../../../src/mcp/JsonRpc.ts"
import type { McpDoor } from "../../../src/mcp/McpDoor.ts"
import { makeSessionWatch } from "../../../src/mcp/viewer/SessionWatch.ts"
import { SOLE_TOKEN } from "../../../src/mcp/viewer/ViewerAccess.ts"
import { makeViewerAuth } from "../../../src/mcp/viewer/ViewerAuth.ts"
import { VIEWER_PATH } from "../../../src/mcp/viewer/ViewerHtml.ts"
import { makeViewer, viewerOrigin } from "../../../src/mcp/viewer/ViewerRoutes.ts"

const door: McpDoor = {
  connect: () => Effect.void,
  receive: (_clientId, frame, reply) => (frame._tag === "Request" ? reply.end(resultReply(frame.id, { ok: true })) : reply.end()),
  disconnect: () => Effect.void,
  inFlight: () => 0
}
const sessions: McpSessions = { sessionIdOf: (clientId) => `s${clientId}`, end: () => Effect.void }

describe("viewer beside the HTTP door", () => {
  it.live("routes /viewer to the viewer, keeps /mcp the door's, and drops a closed page's watcher", () =>
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const port = server.address._tag === "UnixPathAddress" ? 0 : server.address.port
      const origin = viewerOrigin("127.0.0.1", port)
      const watch = makeSessionWatch()
      const auth = makeViewerAuth()
      const viewer = makeViewer({ origin, watch, auth, authenticate: () => undefined, notebook: () => Effect.succeed({}) })
      const router = yield* makeHttpDoor(door, sessions, { token: "t", host: "127.0.0.1", idleTtlMs: 60_000, beside: { prefix: VIEWER_PATH, app: viewer } })
      yield* server.serve(router)

      const get = (path: string, init: RequestInit = {}) => Effect.promise(() => fetch(`${origin}${path}`, init))
      expect((yield* get("/viewer/")).status).toBe(401)
      expect((yield* get("/viewerish")).status).toBe(404)
      const mcp = yield* get("/mcp", { method: "POST", body: "{}", headers: { "content-type": "application/json" } })
      expect(mcp.status).toBe(401)
      expect(mcp.headers.get("www-authenticate")).toBe("Bearer")

      const signIn = yield* get(`/viewer/?code=${auth.mint(SOLE_TOKEN).code}`)
      const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!
      watch.observer.opened("s1", "agent")
      const controller = new AbortController()
      const events = yield* get("/viewer/s/s1/events", { headers: { cookie }, signal: controller.signal })
      expect(events.status).toBe(200)
      const reader = events.body!.getReader()
      yield* Effect.promise(() => reader.read())
      expect(watch.session("s1")!.listeners.size).toBe(1)
      controller.abort()
      yield* Effect.promise(() => reader.read().catch(() => undefined))
      for (let waited = 0; watch.session("s1")!.listeners.size > 0 && waited < 200; waited++) yield* Effect.sleep("50 millis")
      expect(watch.session("s1")!.listeners.size).toBe(0)
    }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }))), 30_000)
})
