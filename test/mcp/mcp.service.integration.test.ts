/**
 * `veyyon mcp` on both doors as a client and a service manager see it, through the
 * official SDK client: one session's calls for different languages run at once (a Python
 * cell waits for a key a JavaScript cell sets), a call with bad params is answered while a
 * cell runs, and a signal ends the server with 128 + its number (143 for SIGTERM, 130 for
 * SIGINT) once its kernels are gone.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type ChildProcess, spawn } from "node:child_process"
import { afterAll, describe, expect, it } from "vitest"
import { childEnv, cliEntry, repoRoot, tempDir, waitForExit } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { childTransport, kernelProcesses, startMcp } from "./support.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()
const TOKEN = "service-test-token-0123456789"

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly isError?: boolean
}

const text = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")

/** A Python cell that says it is waiting, then waits (up to its timeout) until the session's kv has `go`. */
const WAIT_FOR_GO = [
  "import time",
  "print('waiting for go', flush=True)",
  "while kv.get('go') is None:",
  "    time.sleep(0.05)",
  "print('py done')"
].join("\n")

const children: Array<ChildProcess> = []

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})

/**
 * The Python cell runs until the JavaScript cell of the same session sets `go`, so the
 * JavaScript call can only finish if it runs beside it; the bad call is answered while
 * the Python cell is still waiting.
 */
const languagesOverlap = async (client: Client) => {
  let pyAnswered = false
  let started!: () => void
  const waiting = new Promise<void>((resolve) => (started = resolve))
  const py = client.callTool(
    { name: "eval", arguments: { language: "py", code: WAIT_FOR_GO, timeout: 60 } },
    undefined,
    {
      timeout: 120_000,
      resetTimeoutOnProgress: true,
      onprogress: (progress) => {
        if (progress.message === "waiting for go") started()
      }
    }
  ).then((result) => {
    pyAnswered = true
    return result as ToolResult
  })
  await waiting

  const bad = (await client.callTool({ name: "eval", arguments: { language: "py", code: "1", timeout: "soon" } }, undefined, { timeout: 30_000 })) as ToolResult
  expect(bad.isError).toBe(true)
  expect(text(bad)).toContain("timeout must be a number of seconds between 1 and 3600")
  expect(pyAnswered).toBe(false)

  const js = (await client.callTool({ name: "eval", arguments: { language: "js", code: "kv.set('go', 1); 'js set go'" } }, undefined, { timeout: 30_000 })) as ToolResult
  expect(js.isError).toBe(false)
  expect(text(js)).toContain("js set go")

  const done = await py
  expect(done.isError).toBe(false)
  expect(text(done)).toBe("waiting for go\npy done")
}

/** Signals `child` and answers how it exited. */
const signal = (child: ChildProcess, name: NodeJS.Signals) => {
  const exited = new Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })))
  child.kill(name)
  return exited
}

const spawnStdio = () => {
  const child = spawn(cliEntry.command, [...cliEntry.args, "mcp"], {
    cwd: repoRoot,
    env: childEnv(tempDir("veyyon-mcp-service-"), { VEYYON_MCP_PROGRESS_INTERVAL_MS: "250" }),
    stdio: ["pipe", "pipe", "pipe"]
  })
  children.push(child)
  child.stderr!.resume()
  return child
}

describe.skipIf(!integrationEnabled() || python === undefined)(titled("veyyon mcp as a service", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 180_000 }, () => {
  it("stdio: calls for different languages overlap, bad params are answered at once, and SIGTERM exits 143 with no kernel left", async () => {
    const child = spawnStdio()
    const client = new Client({ name: "veyyon-service-test", version: "0.0.0" })
    await client.connect(childTransport(child), { timeout: 90_000 })
    await languagesOverlap(client)

    const kernels = kernelProcesses(child.pid!)
    expect(kernels.length).toBeGreaterThanOrEqual(2)
    expect(await signal(child, "SIGTERM")).toEqual({ code: 143, signal: null })
    for (const pid of kernels) expect(await waitForExit(pid, 5_000)).toBe(true)
  })

  it("stdio: SIGINT exits 130 with no kernel left", async () => {
    const child = spawnStdio()
    const client = new Client({ name: "veyyon-service-test", version: "0.0.0" })
    await client.connect(childTransport(child), { timeout: 90_000 })
    const result = (await client.callTool({ name: "eval", arguments: { language: "py", code: "6 * 7" } }, undefined, { timeout: 60_000 })) as ToolResult
    expect(text(result)).toBe("42")
    const kernels = kernelProcesses(child.pid!)
    expect(kernels.length).toBeGreaterThanOrEqual(1)
    expect(await signal(child, "SIGINT")).toEqual({ code: 130, signal: null })
    for (const pid of kernels) expect(await waitForExit(pid, 5_000)).toBe(true)
  })

  it("HTTP: calls for different languages overlap, bad params are answered at once, and SIGTERM exits 143 with no kernel left", async () => {
    const server = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKEN: TOKEN, VEYYON_MCP_PROGRESS_INTERVAL_MS: "250" })
    children.push(server.child)
    const url = (await server.stderrMatch(/serving MCP \(streamable HTTP\) at (http:\S+)/))[1]!
    const client = new Client({ name: "veyyon-service-test", version: "0.0.0" })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }),
      { timeout: 60_000 }
    )
    await languagesOverlap(client)

    const kernels = kernelProcesses(server.child.pid!)
    expect(kernels.length).toBeGreaterThanOrEqual(2)
    expect(await signal(server.child, "SIGTERM")).toEqual({ code: 143, signal: null })
    for (const pid of kernels) expect(await waitForExit(pid, 5_000)).toBe(true)
  })
})
