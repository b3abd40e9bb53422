/**
 * `veyyon mcp --session ID` on stdio with the official MCP client: a server started again
 * with the same session id restores the session's variables (the first cell's result says
 * so); one started without `--session` starts empty and forgets its state when it stops.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { childEnv, cliEntry, repoRoot, tempDir } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly structuredContent?: Record<string, unknown>
}

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(
  titled("veyyon mcp --session on stdio", skipReason(integrationOff(), python === undefined && "no python3 found")),
  { timeout: 120_000 },
  () => {
    const artifacts = tempDir("veyyon-mcp-session-")
    const open: Array<Client> = []
    afterAll(async () => {
      for (const client of open) await client.close().catch(() => undefined)
      fs.rmSync(artifacts, { recursive: true, force: true })
    })

    const connect = async (args: ReadonlyArray<string>, extra: Record<string, string> = {}) => {
      const transport = new StdioClientTransport({
        command: cliEntry.command,
        args: [...cliEntry.args, "mcp", ...args],
        cwd: repoRoot,
        env: childEnv(artifacts, extra),
        stderr: "pipe"
      })
      const client = new Client({ name: "session-test", version: "1.0.0" })
      await client.connect(transport)
      open.push(client)
      const call = async (code: string) =>
        (await client.callTool({ name: "eval", arguments: { language: "py", code } }, undefined, { timeout: 60_000 })) as ToolResult
      const close = async () => {
        open.splice(open.indexOf(client), 1)
        await client.close()
      }
      return { call, close }
    }
    const notice = (result: ToolResult) => result.structuredContent?.notice as string | undefined
    const text = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")

    it("a server started again with the same --session restores the variables", async () => {
      const first = await connect(["--session", "agent-7"])
      await first.call("model = {'weights': [0.5, 1.5]}\nsteps = 3")
      await first.close()
      const second = await connect([], { VEYYON_MCP_SESSION: "agent-7" })
      const result = await second.call("print(model['weights'][1] * steps)")
      expect(text(result)).toContain("4.5")
      expect(notice(result)).toMatch(/restored as of cell 1/)
      await second.close()
    })

    it("a server without --session starts empty and keeps nothing once it stops", async () => {
      const snapshots = path.join(artifacts, ".snapshots")
      const before = fs.existsSync(snapshots) ? fs.readdirSync(snapshots).length : 0
      const first = await connect([])
      await first.call("anonymous = 1")
      await first.close()
      const after = fs.existsSync(snapshots) ? fs.readdirSync(snapshots).length : 0
      expect(after).toBe(before)
      const second = await connect([])
      const result = await second.call("print(globals().get('anonymous'))")
      expect(text(result)).toBe("None")
      expect(notice(result)).toBeUndefined()
      await second.close()
    })
  }
)
