/**
 * `veyyon mcp` through the official MCP client: one server child process (from
 * source), one connection, cells that share its kernel, and the spare kernel the server
 * starts before the first cell.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import * as fs from "node:fs"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { childEnv, cliEntry, isAlive, PNG_CELL, repoRoot, tempDir, waitForExit } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { poll } from "./support.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string; readonly data?: string; readonly mimeType?: string }>
  readonly isError?: boolean
  readonly structuredContent?: Record<string, unknown>
}

const python = findPython()

/** The Python runners (`boot.py`) among the descendants of `root`, by /proc. */
const pythonRunners = (root: number): Array<number> => {
  const childrenOf = new Map<number, Array<number>>()
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, "utf8")
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
      childrenOf.set(parent, [...(childrenOf.get(parent) ?? []), Number(name)])
    } catch {
      // it exited while we looked
    }
  }
  const found: Array<number> = []
  const queue = [...(childrenOf.get(root) ?? [])]
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    queue.push(...(childrenOf.get(pid) ?? []))
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("boot.py")) found.push(pid)
    } catch {
      // it exited while we looked
    }
  }
  return found
}

describe.skipIf(!integrationEnabled() || python === undefined)(titled("veyyon mcp with the official MCP client", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 90_000 }, () => {
  let client: Client
  let transport: StdioClientTransport
  let stderr = ""
  const kernels = new Set<number>()

  const call = async (args: Record<string, unknown>): Promise<ToolResult> =>
    (await client.callTool({ name: "eval", arguments: args }, undefined, { timeout: 60_000 })) as ToolResult
  const text = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")
  const kernelPid = async () => {
    const pid = Number(text(await call({ language: "py", code: "import os; os.getpid()" })))
    kernels.add(pid)
    return pid
  }

  beforeAll(async () => {
    transport = new StdioClientTransport({
      command: cliEntry.command,
      args: [...cliEntry.args, "mcp"],
      cwd: repoRoot,
      env: childEnv(tempDir("veyyon-mcp-artifacts-"), { VEYYON_MCP_PROGRESS_INTERVAL_MS: "250" }),
      stderr: "pipe"
    })
    transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    client = new Client({ name: "veyyon-test", version: "0.0.0" })
    await client.connect(transport, { timeout: 90_000 })
  }, 100_000)

  afterAll(async () => {
    const pid = transport?.pid ?? undefined
    await client?.close().catch(() => {})
    if (pid !== undefined && pid !== null && isAlive(pid)) process.kill(pid, "SIGKILL")
  }, 20_000)

  it("lists the eval tool with the seed's params, language narrowed to the backends it can run", async () => {
    expect(client.getServerCapabilities()?.tools).toBeDefined()
    expect(client.getServerVersion()?.name).toBe("veyyon")
    const { tools } = await client.listTools()
    expect(tools.map((tool) => tool.name)).toEqual(["eval"])
    const [tool] = tools
    expect(tool!.title).toBe("Run code in a persistent kernel")
    expect(tool!.description).toContain("State persists between calls")
    expect(tool!.inputSchema).toMatchObject({
      type: "object",
      required: ["language", "code"],
      properties: {
        language: { type: "string", enum: ["py", "js"] },
        code: { type: "string" },
        title: { type: "string" },
        timeout: { type: "number", minimum: 1, maximum: 3600 },
        reset: { type: "boolean" }
      }
    })
  })

  it("starts a spare Python kernel before any cell, and the first cell runs in it", async () => {
    const started = await poll(() => {
      const found = pythonRunners(transport.pid!)
      return found.length > 0 ? found : undefined
    }, 60_000, "the server's spare kernel")
    for (const pid of started) kernels.add(pid)
    // The cell may come while the spare's spawn is still under way: it waits for that spare.
    const spare = await kernelPid()
    expect(started).toContain(spare)
    // Only a runner still there 250 ms after it was first seen counts as the replacement: in
    // CI a boot.py process below the server once came and went between two looks.
    let candidate: { readonly pid: number; readonly since: number } | undefined
    const replacement = await poll(() => {
      const others = pythonRunners(transport.pid!).filter((pid) => pid !== spare)
      if (others.length !== 1) return void (candidate = undefined)
      if (candidate?.pid !== others[0]) return void (candidate = { pid: others[0]!, since: Date.now() })
      return Date.now() - candidate.since >= 250 ? candidate.pid : undefined
    }, 60_000, "a replacement spare")
    kernels.add(replacement)
    expect(pythonRunners(transport.pid!).sort()).toEqual([spare, replacement].sort())
  })

  it("keeps state across calls, with the result structured too", async () => {
    const define = await call({ language: "py", code: "total = 40", title: "define" })
    expect(define).toMatchObject({
      isError: false,
      content: [{ type: "text", text: "(no output)" }]
    })
    const result = await call({ language: "py", code: "print('adding')\ntotal + 2" })
    expect(result.isError).toBe(false)
    expect(text(result)).toBe("adding\n42")
    expect(result.structuredContent).toMatchObject({ status: "ok", text: "adding\n42", executionCount: (define.structuredContent!.executionCount as number) + 1 })
  })

  it("a raising cell is isError with its traceback, and earlier state survives", async () => {
    const result = await call({ language: "py", code: "raise KeyError('missing')" })
    expect(result.isError).toBe(true)
    expect(text(result)).toContain("KeyError: 'missing'")
    expect(result.structuredContent).toMatchObject({ status: "error", error: { ename: "KeyError" } })
    expect(text(await call({ language: "py", code: "total" }))).toBe("40")
  })

  it("a cell over its timeout is interrupted: isError with the timeout notice, kernel kept", async () => {
    const before = await kernelPid()
    const result = await call({ language: "py", code: "import time\ntime.sleep(30)", timeout: 1 })
    expect(result.isError).toBe(true)
    expect(text(result)).toContain("eval cell timed out after 1s")
    expect(result.structuredContent).toMatchObject({ timedOut: true, cancelled: true, killed: false })
    expect(await kernelPid()).toBe(before)
  })

  it("returns each PNG as image content", async () => {
    const result = await call({ language: "py", code: PNG_CELL })
    expect(result.isError).toBe(false)
    const images = result.content.filter((block) => block.type === "image")
    expect(images).toHaveLength(1)
    expect(images[0]!.mimeType).toBe("image/png")
    expect(Buffer.from(images[0]!.data!, "base64").subarray(1, 4).toString("ascii")).toBe("PNG")
    expect(text(result)).toContain("[image/png 4x4,")
  })

  it("every image of a result is readable as an artifact:// resource, shown ones too", async () => {
    const svg = "<svg xmlns='http://www.w3.org/2000/svg' width='2' height='2'/>"
    const result = await call({ language: "py", code: `${PNG_CELL}\ndisplay({"image/svg+xml": ${JSON.stringify(svg)}}, raw=True)` })
    expect(result.isError).toBe(false)
    const shown = result.content.filter((block) => block.type === "image")
    expect(shown).toHaveLength(1)
    const ids = (result.structuredContent!.artifactIds as Array<string>).filter((id) => id.startsWith("img-"))
    expect(ids).toHaveLength(2)
    const png = (await client.readResource({ uri: `artifact://${ids[0]}` })).contents[0] as { mimeType: string; blob: string }
    expect(png.mimeType).toBe("image/png")
    expect(png.blob).toBe(shown[0]!.data)
    const drawing = (await client.readResource({ uri: `artifact://${ids[1]}` })).contents[0] as { mimeType: string; text: string }
    expect(drawing).toMatchObject({ mimeType: "image/svg+xml", text: svg })
    const { resources } = await client.listResources()
    expect(resources.map((resource) => resource.uri)).toEqual(expect.arrayContaining(ids.map((id) => `artifact://${id}`)))
  })

  it("bad params are isError with a sentence to act on", async () => {
    const result = await call({ language: "py", code: "1", timeout: "soon" })
    expect(result.isError).toBe(true)
    expect(text(result)).toContain("timeout must be a number of seconds between 1 and 3600")
  })

  it("reset: true starts a fresh kernel and the old one is shut down", async () => {
    const before = await kernelPid()
    const result = await call({ language: "py", code: "'total' in dir()", reset: true })
    expect(text(result)).toBe("False")
    expect(await kernelPid()).not.toBe(before)
    expect(await waitForExit(before)).toBe(true)
  })

  it("declares an outputSchema the structured results fit (the client validates them)", async () => {
    const { tools } = await client.listTools()
    expect(tools[0]!.outputSchema).toMatchObject({ type: "object", required: expect.arrayContaining(["status", "text", "outputs"]) })
    expect(tools[0]!.description).toContain("resources/read")
    expect((await call({ language: "py", code: "1 + 1" })).structuredContent).toMatchObject({ text: "2" })
  })

  it("a cell longer than the client's request timeout finishes, kept alive by progress", async () => {
    const progress: Array<{ progress: number; total?: number | undefined; message?: string | undefined }> = []
    const result = (await client.callTool(
      { name: "eval", arguments: { language: "py", code: "import time\nprint('step 1', flush=True)\ntime.sleep(5)\nprint('finished')", timeout: 60 } },
      undefined,
      { timeout: 2_000, resetTimeoutOnProgress: true, onprogress: (update) => void progress.push(update) }
    )) as ToolResult
    expect(result.isError).toBe(false)
    expect(text(result)).toBe("step 1\nfinished")
    expect(progress.length).toBeGreaterThan(2)
    expect(progress.at(-1)).toMatchObject({ total: 60, message: "step 1" })
  })

  it("the artifact a truncated result names is readable as a resource, last line included", async () => {
    const result = await call({ language: "py", code: "for i in range(20000): print(f'line-{i}')" })
    const truncation = result.structuredContent!.truncation as { artifactUri: string }
    expect(truncation.artifactUri).toMatch(/^artifact:\/\//)
    expect(text(result)).not.toContain("line-10000\n")
    const { contents } = await client.readResource({ uri: truncation.artifactUri })
    expect(contents[0]).toMatchObject({ uri: truncation.artifactUri, mimeType: "text/plain" })
    const full = (contents[0] as { text: string }).text
    expect(full).toContain("line-10000\n")
    expect(full.trimEnd().split("\n").at(-1)).toBe("line-19999")
    const { resources } = await client.listResources()
    expect(resources.map((resource) => resource.uri)).toContain(truncation.artifactUri)
    await expect(client.readResource({ uri: "artifact://out-zzzzzz-00000000.txt" })).rejects.toThrow(/-32002|not found/i)
  })

  it("logs nothing but to stderr, and closing the client stops the server and its kernels, spares too", async () => {
    const pid = transport.pid!
    for (const runner of pythonRunners(pid)) kernels.add(runner)
    await client.close()
    expect(await waitForExit(pid, 10_000)).toBe(true)
    for (const kernel of kernels) expect(await waitForExit(kernel)).toBe(true)
    expect(stderr).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m)
  }, 20_000)
})
