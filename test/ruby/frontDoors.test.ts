/**
 * Ruby through the front doors, as separate processes: `veyyon eval --language rb`,
 * `veyyon setup ruby --check`, and one `eval` call over `veyyon mcp` with `VEYYON_RB=1`.
 * Skips, saying why, when no ruby is on PATH.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { findRubyCandidate } from "../../src/backends/ruby.ts"
import { childEnv, runCli, stopAll, tempDir } from "../cli/support.ts"
import { initializeRequest, type McpChild, startMcp } from "../mcp/support.ts"
import { titled } from "../support/skip.ts"

const rubyFound = !(findRubyCandidate(undefined, process.cwd(), process.env.PATH) instanceof Error)

const dirs: Array<string> = []
const artifacts = () => {
  const dir = tempDir("veyyon-rb-cli-")
  dirs.push(dir)
  return dir
}

afterAll(() => {
  stopAll()
  for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
})

describe.skipIf(!rubyFound)(titled("Ruby through the CLI and MCP", rubyFound ? undefined : "no ruby on PATH (Debian: apt-get install ruby)"), { timeout: 120_000 }, () => {
  it("veyyon eval --language rb runs a cell, keeps kv across runs of a session, and exits 1 on a raised error", async () => {
    const env = childEnv(artifacts())
    const first = await runCli(["eval", "--language", "rb", "--session", "rb-cli", 'kv["n"] = 41\nputs "hi from #{RUBY_ENGINE}"\n[1, :two]'], { env })
    expect(first.stderr).toBe("")
    expect(first.code).toBe(0)
    expect(first.stdout).toBe("hi from ruby\n[1, :two]\n")
    const second = await runCli(["eval", "--language", "rb", "--session", "rb-cli", "--json", 'kv["n"] + 1'], { env })
    expect(second.code).toBe(0)
    expect(JSON.parse(second.stdout)).toMatchObject({ language: "rb", status: "ok", text: "42" })
    const failed = await runCli(["eval", "--language", "rb", "raise KeyError, 'no such key'"], { env })
    expect(failed.code).toBe(1)
    expect(failed.stdout + failed.stderr).toContain("KeyError")
    expect(failed.stdout + failed.stderr).toContain("no such key")
  })

  it("VEYYON_RB=0 wins over --language rb, and the refusal says how to enable it (exit 3)", async () => {
    const off = await runCli(["eval", "--language", "rb", "1"], { env: childEnv(artifacts(), { VEYYON_RB: "0" }) })
    expect(off.code).toBe(3)
    expect(off.stderr).toContain("VEYYON_RB=1")
  })

  it("veyyon setup ruby --check reports the interpreter and rule, or exits 3 naming the fix", async () => {
    const found = await runCli(["setup", "ruby", "--check"], { env: childEnv(artifacts()) })
    expect(found.code).toBe(0)
    expect(found.stdout).toMatch(/^interpreter {2}\/.*ruby/m)
    expect(found.stdout).toMatch(/^version {6}\d+\.\d+\.\d+$/m)
    expect(found.stdout).toContain("rule         PATH: ruby on PATH")
    expect(found.stdout).toContain("the rb backend is off")
    const dir = artifacts()
    const fake = path.join(dir, "not-ruby")
    fs.writeFileSync(fake, "#!/bin/sh\necho not a ruby\n", { mode: 0o700 })
    const broken = await runCli(["setup", "ruby", "--check"], { env: childEnv(dir, { VEYYON_RUBY_INTERPRETER: fake }) })
    expect(broken.code).toBe(3)
    expect(broken.stderr).toContain(`${fake} (picked by the setting) does not run: it did not report a Ruby version`)
    const missing = await runCli(["setup", "ruby", "--check"], { env: childEnv(dir, { VEYYON_RUBY_INTERPRETER: "/no/such/ruby" }) })
    expect(missing.code).toBe(3)
    expect(missing.stderr).toContain("the configured interpreter /no/such/ruby is not an executable file")
  })

  it("veyyon mcp lists rb when VEYYON_RB=1 and runs one rb call", async () => {
    const server: McpChild = startMcp(["mcp"], { VEYYON_RB: "1" })
    try {
      const reply = (id: number) => server.next((message) => message.id === id && ("result" in message || "error" in message), 90_000)
      const line = (message: unknown) => server.write(`${JSON.stringify(message)}\n`)
      line(initializeRequest(0))
      await reply(0)
      line({ jsonrpc: "2.0", method: "notifications/initialized" })
      line({ jsonrpc: "2.0", id: 1, method: "tools/list" })
      const tools = (await reply(1)).result as { tools: Array<{ inputSchema: { properties: { language: { enum: Array<string> } } } }> }
      expect(tools.tools[0]!.inputSchema.properties.language.enum).toContain("rb")
      line({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "eval", arguments: { language: "rb", code: "x = 6\nputs x * 7\nx.to_s * 2" } } })
      const result = (await reply(2)).result as { isError?: boolean; content: Array<{ type: string; text: string }> }
      expect(result.isError ?? false).toBe(false)
      expect(result.content.map((part) => part.text).join("\n")).toContain('42\n"66"')
    } finally {
      await server.kill()
    }
  })
})
