/**
 * The MCP SDK's own low-level `Server` replaying a recorded tool: `tools/list` answers
 * with the tool definition and `tools/call` with the result in the fixture file, with
 * no work behind them; the baseline `bench/mcpdoors.ts` holds our doors to. Over stdio,
 * or over streamable HTTP (stateful sessions, `tools/call` answered as an event stream,
 * as the SDK does by default) on a free loopback port it prints as `listening <port>`.
 * `node --import tsx bench/mcpsdkserver.ts stdio|http fixture.json`
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import { createServer } from "node:http"

/** What the bench recorded from our server. */
export interface SdkFixture {
  readonly tools: ReadonlyArray<Record<string, unknown>>
  readonly result: Record<string, unknown>
}

const makeServer = (fixture: SdkFixture): Server => {
  const server = new Server({ name: "sdk-baseline", version: "0.0.0" }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: fixture.tools as never }))
  server.setRequestHandler(CallToolRequestSchema, () => fixture.result as never)
  return server
}

const [mode, file] = process.argv.slice(2)
if ((mode !== "stdio" && mode !== "http") || file === undefined) {
  process.stderr.write("usage: mcpsdkserver.ts stdio|http fixture.json\n")
  process.exit(2)
}
const fixture = JSON.parse(fs.readFileSync(file, "utf8")) as SdkFixture

if (mode === "stdio") {
  await makeServer(fixture).connect(new StdioServerTransport())
} else {
  const transports = new Map<string, StreamableHTTPServerTransport>()
  const http = createServer(async (request, response) => {
    const id = request.headers["mcp-session-id"]
    const known = typeof id === "string" ? transports.get(id) : undefined
    if (known !== undefined) return known.handleRequest(request, response)
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (sessionId) => void transports.set(sessionId, transport)
    })
    transport.onclose = () => {
      if (transport.sessionId !== undefined) transports.delete(transport.sessionId)
    }
    await makeServer(fixture).connect(transport)
    await transport.handleRequest(request, response)
  })
  http.listen(0, "127.0.0.1", () => {
    const address = http.address()
    process.stdout.write(`listening ${typeof address === "object" && address !== null ? address.port : 0}\n`)
  })
  process.on("SIGTERM", () => http.close(() => process.exit(0)))
}
