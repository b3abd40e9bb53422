/**
 * `veyyon mcp --http`: the official SDK's streamable HTTP client with the bearer token,
 * and raw requests for what a client must not get past (no token, a foreign Origin) or
 * must get a JSON-RPC error for.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { tempDir, waitForExit } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { initializeRequest, kernelProcesses, type McpChild, poll, startMcp } from "./support.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()
const TOKEN = "test-token-0123456789abcdef"


interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly isError?: boolean
  readonly structuredContent?: Record<string, unknown>
}

describe.skipIf(!integrationEnabled() || python === undefined)(titled("veyyon mcp --http", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 90_000 }, () => {
  let server: McpChild
  let url: string
  const artifacts = tempDir("veyyon-mcp-http-artifacts-")
  const clients: Array<Client> = []

  const connect = async () => {
    const client = new Client({ name: "veyyon-http-test", version: "0.0.0" })
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } })
    await client.connect(transport, { timeout: 60_000 })
    clients.push(client)
    return { client, transport }
  }
  const call = async (client: Client, code: string) =>
    (await client.callTool({ name: "eval", arguments: { language: "py", code } }, undefined, { timeout: 60_000 })) as ToolResult
  const text = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")
  const post = (body: string, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream", authorization: `Bearer ${TOKEN}`, ...headers },
      body
    })

  beforeAll(async () => {
    server = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKEN: TOKEN, VEYYON_MCP_PROGRESS_INTERVAL_MS: "250", VEYYON_ARTIFACTS_DIR: artifacts })
    url = (await server.stderrMatch(/serving MCP \(streamable HTTP\) at (http:\S+)/))[1]!
  }, 100_000)

  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => {})
    await server?.kill()
  }, 30_000)

  it("refuses a request without the token (401) or with a foreign Origin (403), and never prints a given token", async () => {
    const body = JSON.stringify(initializeRequest(1))
    const none = await post(body, { authorization: "" })
    expect(none.status).toBe(401)
    expect(none.headers.get("www-authenticate")).toBe("Bearer")
    expect((await post(body, { authorization: "Bearer wrong" })).status).toBe(401)
    expect((await post(body, { origin: "http://evil.example" })).status).toBe(403)
    expect(server.stderr()).not.toContain(TOKEN)
  })

  it("keeps state across calls of one session, and sessions do not share kernels or artifacts", async () => {
    const { client: first } = await connect()
    const { client: second } = await connect()
    expect(text(await call(first, "total = 40"))).toBe("(no output)")
    expect(text(await call(first, "total + 2"))).toBe("42")
    expect((await call(second, "total")).isError).toBe(true)

    const truncated = await call(first, "for i in range(20000): print(f'line-{i}')")
    const uri = (truncated.structuredContent!.truncation as { artifactUri: string }).artifactUri
    const { contents } = await first.readResource({ uri })
    expect((contents[0] as { text: string }).text.trimEnd().split("\n").at(-1)).toBe("line-19999")
    await expect(second.readResource({ uri })).rejects.toThrow(/not found/i)
    expect((await second.listResources()).resources).toEqual([])
  })

  it("streams progress for a long call, so it outlives the client's request timeout", async () => {
    const { client } = await connect()
    const progress: Array<{ progress: number; total?: number | undefined; message?: string | undefined }> = []
    const result = (await client.callTool(
      { name: "eval", arguments: { language: "py", code: "import time\nprint('working', flush=True)\ntime.sleep(5)", timeout: 30 } },
      undefined,
      { timeout: 2_000, resetTimeoutOnProgress: true, onprogress: (update) => void progress.push(update) }
    )) as ToolResult
    expect(result.isError).toBe(false)
    expect(progress.length).toBeGreaterThan(2)
    expect(progress.at(-1)).toMatchObject({ total: 30, message: "working" })
  })

  it("answers raw JSON-RPC errors with the right codes and ids", async () => {
    const malformed = await post("{not json")
    expect(malformed.status).toBe(400)
    expect(await malformed.json()).toMatchObject({ id: null, error: { code: -32700 } })

    const init = await post(JSON.stringify(initializeRequest("init")))
    expect(init.status).toBe(200)
    const session = init.headers.get("mcp-session-id")!
    expect(session).toBeTruthy()
    const unknown = await post(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "no/such" }), { "mcp-session-id": session })
    expect(await unknown.json()).toMatchObject({ id: 3, error: { code: -32601 } })
    expect((await post(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "ping" }))).status).toBe(400)
    expect((await post(JSON.stringify({ jsonrpc: "2.0", id: 4, method: "ping" }), { "mcp-session-id": "nope" })).status).toBe(404)
    const tooLarge = await post(`{"pad":"${"x".repeat(9 * 1024 * 1024)}"}`, { "mcp-session-id": session })
    expect(tooLarge.status).toBe(413)
    const ping = await post(JSON.stringify({ jsonrpc: "2.0", id: 5, method: "ping" }), { "mcp-session-id": session })
    expect(await ping.json()).toMatchObject({ id: 5, result: {} })
  })

  it("a client's cancel interrupts the cell; the session's kernel and state stay", async () => {
    const { client } = await connect()
    await call(client, "kept = 'yes'")
    const controller = new AbortController()
    const running = client.callTool(
      { name: "eval", arguments: { language: "py", code: "import time\nprint('started', flush=True)\ntime.sleep(60)", timeout: 120 } },
      undefined,
      { timeout: 60_000, signal: controller.signal, onprogress: () => controller.abort() }
    )
    await expect(running).rejects.toThrow()
    const started = Date.now()
    expect(text(await call(client, "kept"))).toBe("'yes'")
    expect(Date.now() - started).toBeLessThan(50_000)
  })

  it("runs kernels in the sandbox by default (sandbox auto), where a cell sees its own pid namespace", async () => {
    const { client } = await connect()
    const result = await call(client, "import os; print(os.getpid() < 10); open('/proc/1/cmdline').read().split('\\0')[0]")
    expect(text(result)).toMatch(/^True$/m)
    expect(text(result)).toContain("bwrap")
  })

  it("DELETE ends the session, shuts its kernels down and forgets its saved variables", async () => {
    const { client, transport } = await connect()
    const before = new Set(kernelProcesses(server.child.pid!))
    // The session's snapshot directory has the name of its artifacts directory (both by its session id).
    const named = text(await call(client, "import os; print(os.path.basename(os.environ['VEYYON_ARTIFACTS_DIR']))")).split("\n")[0]!
    const ours = path.join(artifacts, ".snapshots", named)
    await poll(() => (fs.existsSync(ours) ? true : undefined), 30_000, "the session's snapshot")
    const kernels = kernelProcesses(server.child.pid!).filter((pid) => !before.has(pid))
    expect(kernels.length).toBeGreaterThan(0)
    const session = transport.sessionId!
    await transport.terminateSession()
    for (const pid of kernels) expect(await waitForExit(pid, 20_000)).toBe(true)
    const after = await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }), { "mcp-session-id": session })
    expect(after.status).toBe(404)
    expect(fs.existsSync(ours)).toBe(false)
  }, 60_000)
})

describe.skipIf(!integrationEnabled() || python === undefined)(titled("veyyon mcp --http without VEYYON_MCP_TOKEN", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 60_000 }, () => {
  it("generates a token, prints it once on stderr, and requires it", async () => {
    const server = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKEN: "" })
    try {
      const url = (await server.stderrMatch(/at (http:\S+)/))[1]!
      const token = (await server.stderrMatch(/bearer token[^:]*: (\S+)/))[1]!
      expect(token.length).toBeGreaterThanOrEqual(32)
      const body = JSON.stringify(initializeRequest(1))
      const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" }
      expect((await fetch(url, { method: "POST", headers, body })).status).toBe(401)
      expect((await fetch(url, { method: "POST", headers: { ...headers, authorization: `Bearer ${token}` }, body })).status).toBe(200)
      expect(server.stderr().split(token).length).toBe(2)
    } finally {
      await server.kill()
    }
  })
})
