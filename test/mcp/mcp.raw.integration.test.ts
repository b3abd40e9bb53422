/**
 * `veyyon mcp` on stdio, byte by byte: the JSON-RPC guarantees hold whatever is sent,
 * and the server keeps serving after each bad message.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { findPython, integrationEnabled } from "../support/python.ts"
import { initializeRequest, type McpChild, startMcp } from "./support.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(titled("veyyon mcp on stdio, raw JSON-RPC", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 90_000 }, () => {
  let server: McpChild
  const line = (message: unknown) => server.write(`${JSON.stringify(message)}\n`)
  const reply = (id: unknown) => server.next((message) => message.id === id && ("result" in message || "error" in message))

  beforeAll(async () => {
    server = startMcp(["mcp"], { VEYYON_MCP_PROGRESS_INTERVAL_MS: "200" })
    line(initializeRequest(0))
    expect((await reply(0)).result).toMatchObject({ serverInfo: { name: "veyyon" } })
    line({ jsonrpc: "2.0", method: "notifications/initialized" })
  }, 100_000)

  afterAll(async () => {
    await server?.kill()
  }, 30_000)

  it("answers a malformed line with -32700 and id null, then answers the next request", async () => {
    const before = server.messages.length
    server.write("{not json\n")
    const parseError = await server.next((message) => (message.error as { code?: number } | undefined)?.code === -32700, 30_000, before)
    expect(parseError).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } })
    line({ jsonrpc: "2.0", id: 1, method: "ping" })
    expect(await reply(1)).toMatchObject({ id: 1, result: {} })
  })

  it("keeps an unknown method's id, string ids included", async () => {
    line({ jsonrpc: "2.0", id: 3, method: "no/such" })
    expect(await reply(3)).toMatchObject({ id: 3, error: { code: -32601 } })
    line({ jsonrpc: "2.0", id: "abc", method: "tools/list" })
    const tools = await reply("abc")
    expect((tools.result as { tools: Array<{ name: string; outputSchema?: unknown }> }).tools[0]).toMatchObject({
      name: "eval",
      outputSchema: { type: "object" }
    })
  })

  it("answers params that do not fit with -32602 and one sentence naming the field", async () => {
    line({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { arguments: {} } })
    const error = (await reply(4)).error as { code: number; message: string }
    expect(error.code).toBe(-32602)
    expect(error.message).toContain("`name` is missing")
    expect(error.message).not.toContain("readonly")
    line({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "eval", arguments: { language: "py" } } })
    const result = (await reply(5)).result as { isError: boolean; content: Array<{ text: string }> }
    expect(result.isError).toBe(true)
    expect(result.content[0]!.text).toBe("invalid eval params: `code` is missing: pass the cell's source code as a string")
  })

  it("drops an oversized line with an error reply and keeps serving", async () => {
    const before = server.messages.length
    server.write(`{"jsonrpc":"2.0","id":6,"method":"ping","params":{"pad":"${"x".repeat(9 * 1024 * 1024)}"}}\n`)
    const tooLarge = await server.next((message) => (message.error as { message?: string } | undefined)?.message?.includes("limit") === true, 60_000, before)
    expect(tooLarge).toMatchObject({ id: null, error: { code: -32600 } })
    line({ jsonrpc: "2.0", id: 7, method: "ping" })
    expect(await reply(7)).toMatchObject({ id: 7, result: {} })
  })

  it("sends progress only for a call with a progress token, and none after the result", async () => {
    const before = server.messages.length
    line({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "eval", arguments: { language: "py", code: "import time\ntime.sleep(1.5)" } } })
    await reply(8)
    expect(server.messages.slice(before).filter((message) => message.method === "notifications/progress")).toEqual([])

    const start = server.messages.length
    line({
      jsonrpc: "2.0",
      id: 9,
      method: "tools/call",
      params: {
        name: "eval",
        arguments: { language: "py", code: "import time\nprint('warming up', flush=True)\ntime.sleep(1.5)\nprint('done')", timeout: 20 },
        _meta: { progressToken: "tok" }
      }
    })
    const answer = await reply(9)
    const after = server.messages.slice(start)
    const progress = after.slice(0, after.indexOf(answer)).filter((message) => message.method === "notifications/progress")
    expect(progress.length).toBeGreaterThan(0)
    expect(progress.at(-1)!.params).toMatchObject({ progressToken: "tok", total: 20, message: "warming up" })
    const values = progress.map((message) => (message.params as { progress: number }).progress)
    expect(values).toEqual([...values].sort((a, b) => a - b))
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect(server.messages.slice(start + after.indexOf(answer) + 1).filter((message) => message.method === "notifications/progress")).toEqual([])
  })
})
