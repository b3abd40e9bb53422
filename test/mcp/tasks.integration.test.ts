/**
 * Long cells as MCP tasks, with the official SDK client's experimental tasks API on stdio
 * and over HTTP: the server declares the capability and `eval`'s `execution.taskSupport`;
 * a 20 s cell started as a task is answered at once, polled (its latest line in the
 * status), listed, and its result fetched, the same a plain call gives; another is
 * cancelled mid-run and the kernel lives with its variables; another session's task id
 * is not found; a plain call works as before.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { childEnv, cliEntry, isAlive, repoRoot, tempDir } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { type McpChild, startMcp } from "./support.ts"

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly isError?: boolean
  readonly _meta?: Record<string, unknown>
}

const python = findPython()
const TOKEN = "tasks-token-0123456789abcdef0123456789"
const text = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")

const taskCases = (connect: () => Promise<Client>) => {
  let client: Client
  let other: Client

  beforeAll(async () => {
    client = await connect()
    other = await connect()
  }, 120_000)

  const startTask = async (on: Client, code: string) => {
    const stream = on.experimental.tasks.callToolStream({ name: "eval", arguments: { language: "py", code, timeout: 120 } }, CallToolResultSchema, { task: { ttl: 60_000 }, timeout: 90_000 })
    const first = await stream.next()
    expect(first.value).toMatchObject({ type: "taskCreated", task: { status: "working" } })
    await stream.return(undefined)
    return (first.value as { readonly task: { readonly taskId: string } }).task.taskId
  }

  it("declares tasks and eval's task support", async () => {
    expect(client.getServerCapabilities()?.tasks).toMatchObject({ list: {}, cancel: {}, requests: { tools: { call: {} } } })
    const { tools } = await client.listTools()
    expect(tools[0]!.execution).toEqual({ taskSupport: "optional" })
  })

  it("runs a 20 s cell as a task: answered at once, polled with its latest line, listed, its result the plain call's", async () => {
    await client.callTool({ name: "eval", arguments: { language: "py", code: "before = 'kept'" } }, undefined, { timeout: 90_000 })
    const started = Date.now()
    const taskId = await startTask(client, "import time\nfor i in range(20):\n    print('step', i, flush=True)\n    time.sleep(1)\n'done'")
    expect(Date.now() - started).toBeLessThan(15_000)
    let status = await client.experimental.tasks.getTask(taskId)
    const deadline = Date.now() + 60_000
    while (status.statusMessage === undefined && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      status = await client.experimental.tasks.getTask(taskId)
    }
    expect(status).toMatchObject({ taskId, status: "working", statusMessage: expect.stringMatching(/^step \d+$/) })
    expect((await client.experimental.tasks.listTasks()).tasks.map((task) => task.taskId)).toContain(taskId)
    await expect(other.experimental.tasks.getTask(taskId)).rejects.toThrow(/no task/)
    const result = (await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema, { timeout: 90_000 })) as ToolResult
    expect(result.isError).toBe(false)
    expect(text(result)).toContain("step 19\n'done'")
    expect(result._meta).toMatchObject({ "io.modelcontextprotocol/related-task": { taskId } })
    expect(await client.experimental.tasks.getTask(taskId)).toMatchObject({ status: "completed" })
  }, 120_000)

  it("cancels a running task: the cell is interrupted, the kernel keeps its variables", async () => {
    const taskId = await startTask(client, "import time\nprint('waiting', flush=True)\ntime.sleep(90)")
    const deadline = Date.now() + 60_000
    while ((await client.experimental.tasks.getTask(taskId)).statusMessage !== "waiting" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    expect(await client.experimental.tasks.cancelTask(taskId)).toMatchObject({ taskId, status: "cancelled" })
    await expect(client.experimental.tasks.cancelTask(taskId)).rejects.toThrow(/already ended/)
    const after = (await client.callTool({ name: "eval", arguments: { language: "py", code: "before" } }, undefined, { timeout: 90_000 })) as ToolResult
    expect(text(after)).toBe("'kept'")
  }, 120_000)
}

describe.skipIf(!integrationEnabled() || python === undefined)(titled("MCP tasks through veyyon mcp (stdio)", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 120_000 }, () => {
  const transports: Array<StdioClientTransport> = []
  afterAll(async () => {
    for (const transport of transports) {
      const pid = transport.pid
      await transport.close().catch(() => {})
      if (pid !== null && isAlive(pid)) process.kill(pid, "SIGKILL")
    }
  }, 30_000)
  taskCases(async () => {
    const transport = new StdioClientTransport({
      command: cliEntry.command,
      args: [...cliEntry.args, "mcp"],
      cwd: repoRoot,
      env: childEnv(tempDir("veyyon-mcp-tasks-")),
      stderr: "pipe"
    })
    transports.push(transport)
    const client = new Client({ name: "veyyon-tasks-test", version: "0.0.0" })
    await client.connect(transport, { timeout: 90_000 })
    return client
  })
})

describe.skipIf(!integrationEnabled() || python === undefined)(titled("MCP tasks through veyyon mcp --http", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 120_000 }, () => {
  let server: McpChild | undefined
  let url: URL
  const clients: Array<Client> = []
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => {})
    await server?.kill()
  }, 30_000)
  taskCases(async () => {
    if (server === undefined) {
      server = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKEN: TOKEN, VEYYON_SANDBOX: "off" })
      url = new URL((await server.stderrMatch(/serving MCP \(streamable HTTP\) at (http:\S+)/, 90_000))[1]!)
    }
    const client = new Client({ name: "veyyon-tasks-test", version: "0.0.0" })
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }), { timeout: 90_000 })
    clients.push(client)
    return client
  })
})
