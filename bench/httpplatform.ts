/**
 * What the Effect platform's HTTP server adds to a request over Node's own `request`
 * handler: both answer the HTTP door's plain `tools/call` (a bearer token checked before
 * the body is read, the JSON body read and parsed, the captured answer as the one event of
 * a `text/event-stream` body) with no work behind it, each on its own port in this process; `fetch` calls them one at a time, rounds
 * alternated. Prints each round's p50 and the medians.
 * `node --import tsx bench/httpplatform.ts [rounds] [calls]`
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Deferred, Effect } from "effect"
import { HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import { randomBytes } from "node:crypto"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { median } from "./stats.ts"

const rounds = Number(process.argv[2] ?? 6)
const calls = Number(process.argv[3] ?? 500)

const ANSWER = { jsonrpc: "2.0", id: 1, result: { content: [{ type: "text", text: "(no output)" }], structuredContent: { status: "ok", text: "(no output)" }, isError: false } }
const EVENT = new TextEncoder().encode(`event: message\ndata: ${JSON.stringify(ANSWER)}\n\n`)
const HEADERS = { "mcp-session-id": "0123456789abcdef0123456789abcdef", "cache-control": "no-cache" }
const AUTHORIZATION = `Bearer ${randomBytes(32).toString("base64url")}`
const REQUEST = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "eval", arguments: { language: "py", code: "x = 1 + 1" } } })

const node = createServer((request, response) => {
  if (request.headers.authorization !== AUTHORIZATION) return void response.writeHead(401).end()
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    JSON.parse(Buffer.concat(chunks).toString("utf8"))
    response.writeHead(200, { ...HEADERS, "content-type": "text/event-stream", "content-length": EVENT.length })
    response.end(EVENT)
  })
})
await new Promise<void>((listening) => node.listen(0, "127.0.0.1", listening))

const app = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  if (request.headers.authorization !== AUTHORIZATION) return HttpServerResponse.empty({ status: 401 })
  JSON.parse(yield* request.text)
  return HttpServerResponse.uint8Array(EVENT, { contentType: "text/event-stream", headers: HEADERS })
}).pipe(Effect.orDie)

const platformPort = await Effect.runPromise(Effect.gen(function*() {
  const port = yield* Deferred.make<number>()
  yield* Effect.forkDetach(Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    yield* server.serve(app)
    if (server.address._tag !== "UnixPathAddress") yield* Deferred.succeed(port, server.address.port)
    return yield* Effect.never
  }).pipe(Effect.scoped, Effect.provide(NodeHttpServer.layer(createServer, { host: "127.0.0.1", port: 0 }))))
  return yield* Deferred.await(port)
}))

const paths = { node: (node.address() as AddressInfo).port, platform: platformPort }

const p50 = async (port: number, count: number) => {
  const times: Array<number> = []
  for (let i = 0; i < count; i++) {
    const start = performance.now()
    const response = await fetch(`http://127.0.0.1:${port}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: AUTHORIZATION },
      body: REQUEST
    })
    if (response.status !== 200) throw new Error(`the server answered ${response.status}`)
    await response.text()
    times.push(performance.now() - start)
  }
  return median(times) * 1000
}

for (const port of Object.values(paths)) await p50(port, calls)
const seen: Record<keyof typeof paths, Array<number>> = { node: [], platform: [] }
for (let round = 0; round < rounds; round++) {
  const order = round % 2 === 0 ? (["node", "platform"] as const) : (["platform", "node"] as const)
  for (const path of order) seen[path].push(await p50(paths[path], calls))
  console.log(`round ${round}: p50 Node's handler ${seen.node.at(-1)!.toFixed(0)} us, platform server ${seen.platform.at(-1)!.toFixed(0)} us`)
}
const added = seen.platform.map((us, round) => us - seen.node[round]!)
console.log(`median p50: Node's handler ${median(seen.node).toFixed(0)} us, platform server ${median(seen.platform).toFixed(0)} us; the platform adds ${median(added).toFixed(0)} us (median of the rounds' differences)`)
process.exit(0)
