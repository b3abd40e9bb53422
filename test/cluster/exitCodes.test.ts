/**
 * How the cluster's processes end on SIGTERM, as a service manager sees them: a runner and
 * an `mcp --cluster` door each exit 143 (128 + SIGTERM, as every `veyyon` command does),
 * and neither prints a warning of Node's (a deprecation, say) in a normal run.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { initializeRequest, type McpChild, startMcp } from "../mcp/support.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { LOCK_EXPIRATION_MS, startCluster, type TestCluster } from "./support.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()
if (skipReason !== undefined) console.log(`skipping the cluster exit code tests: ${skipReason}`)

const NODE_WARNING = /Warning:|DeprecationWarning|\(node:\d+\)/

describe.skipIf(skipReason !== undefined)("cluster exit codes", () => {
  let cluster: TestCluster
  const children: Array<McpChild> = []

  beforeAll(async () => {
    cluster = await startCluster(1)
  }, 180_000)

  afterAll(async () => {
    for (const child of children) await child.kill()
    await cluster?.stop()
  }, 120_000)

  it("an mcp --cluster door that ran a cell exits 143 on SIGTERM, without a warning", async () => {
    const child = startMcp(["mcp", "--cluster"], {
      VEYYON_CLUSTER_POSTGRES_URL: cluster.pg.url,
      VEYYON_CLUSTER_SECRET_FILE: cluster.env.VEYYON_CLUSTER_SECRET_FILE!,
      VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS: String(LOCK_EXPIRATION_MS)
    })
    children.push(child)
    const exited = new Promise<number | string>((resolve) => child.child.once("exit", (code, signal) => resolve(code ?? signal ?? "?")))
    child.write(`${JSON.stringify(initializeRequest(1))}\n`)
    await child.next((message) => message.id === 1)
    child.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`)
    child.write(`${JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "eval", arguments: { language: "py", code: "print(6 * 7)" } } })}\n`)
    const reply = await child.next((message) => message.id === 2, 120_000)
    expect(JSON.stringify(reply.result)).toContain("42")
    child.child.kill("SIGTERM")
    expect(await exited, child.stderr()).toBe(143)
    expect(child.stderr()).not.toMatch(NODE_WARNING)
  }, 180_000)

  it("a runner that served cells exits 143 on SIGTERM, without a warning", async () => {
    const runner = cluster.runners[0]!
    const sent = Date.now()
    runner.child.kill("SIGTERM")
    expect(await runner.exited, runner.log()).toBe(143)
    console.log(`the idle runner exited ${Date.now() - sent} ms after SIGTERM`)
    expect(runner.log()).not.toMatch(NODE_WARNING)
  }, 60_000)
})
