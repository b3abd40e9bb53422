/**
 * `veyyon mcp --http` on its default configuration, played by an attacker holding the
 * bearer token: a cell reaches no host network, a fork bomb and a big allocation are stopped
 * by the default limits with an error naming the limit and its setting, the session goes
 * on, and no cell reads the door's token (its own environment, argv, or the host's /proc).
 * The local doors (`veyyon eval`, `veyyon mcp` on stdio) keep the host's network.
 */
import { credentialScanCell, environReachableCell } from "../support/credentialScan.ts"
import { execFile, spawnSync } from "node:child_process"
import * as net from "node:net"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { childEnv, cliEntry, tempDir } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import * as fs from "node:fs"
import * as path from "node:path"
import { initializeRequest, type McpChild, poll, startMcp } from "./support.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()
const TOKEN = "door-token-5f0c1e9a7b3d4c2e8a6f"

const bwrapProblem = (): string | undefined => {
  const probe = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"], { encoding: "utf8" })
  if (probe.error !== undefined) return `bwrap is not installed (${probe.error.message})`
  return probe.status === 0 ? undefined : `bwrap cannot create namespaces here: ${probe.stderr.trim()}`
}
const noBwrap = bwrapProblem()

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly isError?: boolean
  readonly structuredContent?: Record<string, unknown>
}

describe.skipIf(!integrationEnabled() || python === undefined || noBwrap !== undefined)(titled("veyyon mcp --http, default sandbox", skipReason(integrationOff(), python === undefined && "no python3 found", noBwrap)), { timeout: 120_000 }, () => {
  let server: McpChild
  let url: string
  let client: Client
  const artifacts = tempDir("veyyon-mcp-sandbox-artifacts-")
  const listener = net.createServer((socket) => socket.end("hello"))
  let listenerPort = 0

  const call = async (code: string, language = "py") =>
    (await client.callTool({ name: "eval", arguments: { language, code, timeout: 60 } }, undefined, { timeout: 90_000 })) as ToolResult
  const text = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")

  beforeAll(async () => {
    listenerPort = await new Promise<number>((resolve) => listener.listen(0, "127.0.0.1", () => resolve((listener.address() as net.AddressInfo).port)))
    server = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKEN: TOKEN, VEYYON_ARTIFACTS_DIR: artifacts })
    url = (await server.stderrMatch(/serving MCP \(streamable HTTP\) at (http:\S+)/))[1]!
    client = new Client({ name: "veyyon-sandbox-test", version: "0.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }), { timeout: 60_000 })
  }, 100_000)

  afterAll(async () => {
    await client?.close().catch(() => {})
    await server?.kill()
    listener.close()
  }, 30_000)

  it("a cell reaches neither a listener on the host's loopback nor the door's own port", async () => {
    const doorPort = new URL(url).port
    const result = await call([
      "import socket",
      `for port in (${listenerPort}, ${doorPort}):`,
      "    try:",
      "        print(socket.create_connection(('127.0.0.1', port), 5).recv(5))",
      "    except OSError as e:",
      "        print(type(e).__name__)"
    ].join("\n"))
    expect(text(result)).toBe("ConnectionRefusedError\nConnectionRefusedError")
  })

  it("a fork bomb is stopped by the pids limit: the error names the limit and its setting, the kernel is replaced with the session's variables restored, the next cell works", async () => {
    const named = text(await call("kept = 41\nimport os\nprint(os.path.basename(os.environ['VEYYON_ARTIFACTS_DIR']))")).split("\n")[0]!
    // Saved once the session settles, off the answer's path: the bomb comes after the save.
    const meta = path.join(artifacts, ".snapshots", named, "py.meta")
    // An earlier test's cell left a snapshot of this session already: wait for the one that holds `kept`.
    await poll(() => (fs.existsSync(meta) && fs.readFileSync(meta, "utf8").includes("kept = 41") ? true : undefined), 30_000, "the session's snapshot of `kept`")
    const bomb = await call("import os\nwhile True:\n    os.fork()")
    expect(bomb.isError).toBe(true)
    expect(text(bomb)).toContain("BlockingIOError")
    expect(text(bomb)).toContain("limit of 256 processes and threads (limits.pids / VEYYON_KERNEL_PIDS")
    expect(bomb.structuredContent!.notice).toMatch(/The kernel was replaced/)
    const next = await call("try:\n    kept\nexcept NameError:\n    print('fresh kernel')\nprint(1 + 1)")
    expect(text(next)).toMatch(/^2\n/)
    expect(next.structuredContent!.notice).toMatch(/restored as of cell \d+ \("kept = 41"\): \d+ names? came back \([^)]*kept/)
  })

  it("a 4 GiB allocation is stopped by the memory limit with an error naming it, and the kernel lives on", async () => {
    await call("kept = 41")
    const big = await call("block = bytearray(4 * 1024 ** 3)")
    expect(big.isError).toBe(true)
    expect(text(big)).toContain("MemoryError")
    expect(text(big)).toContain("memory limit of 2048 MiB (limits.memoryMb / VEYYON_KERNEL_MEMORY_MB")
    expect(text(await call("kept + 1"))).toBe("42")
  })

  it("a JavaScript kernel that fills its heap dies of the memory limit once (no retry), with an error naming it; the next cell works", async () => {
    const filled = await call("const a = []; for (;;) a.push(new Array(1e6).fill(1.5))", "js")
    expect(filled.isError).toBe(true)
    expect(filled.structuredContent!.retried).toBeUndefined()
    expect(text(filled)).toContain("memory limit of 2048 MiB (limits.memoryMb / VEYYON_KERNEL_MEMORY_MB")
    expect(text(await call("1 + 1", "js"))).toBe("2")
  })

  it("no cell reads the door's token: not in its environment, its argv, or any /proc it can see", async () => {
    const seen = await call(credentialScanCell(TOKEN, "TOKEN"))
    expect(text(seen)).toBe("[] []")
    const host = await call(environReachableCell(server.child.pid!))
    expect(text(host)).toBe("unreachable")
  })
})

const connectCell = (port: number) =>
  `import socket\ntry:\n    print(socket.create_connection(('127.0.0.1', ${port}), 5).recv(5).decode())\nexcept OSError as e:\n    print(type(e).__name__)`

describe.skipIf(!integrationEnabled() || python === undefined)(titled("the local doors keep the host's network", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 120_000 }, () => {
  const listener = net.createServer((socket) => socket.end("hello"))
  const listening = new Promise<number>((resolve) => listener.listen(0, "127.0.0.1", () => resolve((listener.address() as net.AddressInfo).port)))
  afterAll(() => listener.close())

  it("veyyon eval: a cell reaches a listener on the host's loopback", async () => {
    const port = await listening
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(cliEntry.command, [...cliEntry.args, "eval", connectCell(port)], { env: childEnv(tempDir("veyyon-eval-net-")), timeout: 90_000 }, (error, out, err) =>
        error === null ? resolve(out) : reject(new Error(`${error.message}\n${err}`))))
    expect(stdout.trim()).toBe("hello")
  })

  it("veyyon mcp on stdio: a cell reaches a listener on the host's loopback", async () => {
    const port = await listening
    const server = startMcp(["mcp"])
    try {
      const line = (message: unknown) => server.write(`${JSON.stringify(message)}\n`)
      line(initializeRequest(0))
      await server.next((message) => message.id === 0)
      line({ jsonrpc: "2.0", method: "notifications/initialized" })
      line({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "eval", arguments: { language: "py", code: connectCell(port) } } })
      const reply = await server.next((message) => message.id === 1 && "result" in message, 90_000)
      expect((reply.result as { content: Array<{ text: string }> }).content[0]!.text).toBe("hello")
    } finally {
      await server.kill()
    }
  })
})
