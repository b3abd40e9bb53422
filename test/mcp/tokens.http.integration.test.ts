/**
 * `veyyon mcp --http` with VEYYON_MCP_TOKENS_FILE: two clients with two tokens, one
 * session each, neither able to read or drive the other's session (404 for its id); and
 * the door refusing to start with both token variables set, or with a file others may read.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { tempDir } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { type McpChild, startMcp } from "./support.ts"

const python = findPython()
const ALICE = "alice-token-0123456789abcdef0123456789"
const BOB = "bob-token-0123456789abcdef0123456789abcd"

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
}

const tokensFile = (text: string, mode: number) => {
  const file = path.join(tempDir("veyyon-mcp-tokens-"), "tokens")
  fs.writeFileSync(file, text, { mode })
  fs.chmodSync(file, mode)
  return file
}

const exitOf = (server: McpChild) =>
  new Promise<number | null>((resolve) => {
    if (server.child.exitCode !== null) resolve(server.child.exitCode)
    else server.child.once("exit", (code) => resolve(code))
  })

describe.skipIf(!integrationEnabled() || python === undefined)(titled("veyyon mcp --http with a tokens file", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 120_000 }, () => {
  const servers: Array<McpChild> = []
  const clients: Array<Client> = []
  let url: URL

  beforeAll(async () => {
    const server = startMcp(["mcp", "--http", "--port", "0"], {
      VEYYON_MCP_TOKENS_FILE: tokensFile(`# two clients\n${ALICE}\n${BOB}\n`, 0o600),
      VEYYON_SANDBOX: "off"
    })
    servers.push(server)
    url = new URL((await server.stderrMatch(/serving MCP \(streamable HTTP\) at (http:\S+)/, 90_000))[1]!)
  }, 100_000)

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => {})
    for (const server of servers) await server.kill()
  }, 30_000)

  const connect = async (token: string) => {
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${token}` } } })
    const client = new Client({ name: "veyyon-tokens-test", version: "0.0.0" })
    await client.connect(transport, { timeout: 90_000 })
    clients.push(client)
    return { client, session: transport.sessionId! }
  }
  const post = (token: string, session: string, body: unknown) =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${token}`, "mcp-session-id": session },
      body: JSON.stringify(body)
    })

  it("serves each token its own session; another token gets 404 for it and cannot read, drive or end it", async () => {
    const alice = await connect(ALICE)
    const bob = await connect(BOB)
    const run = async (client: Client, code: string) =>
      (await client.callTool({ name: "eval", arguments: { language: "py", code } }, undefined, { timeout: 90_000 })) as ToolResult
    await run(alice.client, "secret = 'alice only'")
    const call = { jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "eval", arguments: { language: "py", code: "secret" } } }
    expect((await post(BOB, alice.session, call)).status).toBe(404)
    expect((await post(BOB, alice.session, { jsonrpc: "2.0", id: 10, method: "resources/list" })).status).toBe(404)
    const events = await fetch(url, { headers: { accept: "text/event-stream", authorization: `Bearer ${BOB}`, "mcp-session-id": alice.session } })
    expect(events.status).toBe(404)
    expect((await fetch(url, { method: "DELETE", headers: { authorization: `Bearer ${BOB}`, "mcp-session-id": alice.session } })).status).toBe(404)
    const bobs = await run(bob.client, "'secret' in dir()")
    expect(bobs.content[0]!.text).toBe("False")
    const alices = await run(alice.client, "secret")
    expect(alices.content[0]!.text).toBe("'alice only'")
  })

  it("refuses to start with both token variables, or with a tokens file others may read, saying why", async () => {
    const both = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKEN: ALICE, VEYYON_MCP_TOKENS_FILE: tokensFile(`${BOB}\n`, 0o600) })
    servers.push(both)
    expect(await exitOf(both)).toBe(2)
    expect(both.stderr()).toContain("set either VEYYON_MCP_TOKEN or VEYYON_MCP_TOKENS_FILE, not both")
    const open = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKENS_FILE: tokensFile(`${BOB}\n`, 0o644) })
    servers.push(open)
    expect(await exitOf(open)).toBe(2)
    expect(open.stderr()).toContain("chmod 600")
    expect(open.stderr()).not.toContain(BOB)
  })
})
