/**
 * How the cluster's processes end on SIGTERM, as a service manager sees them: a runner and
 * an `mcp --cluster` door each exit 143 (128 + SIGTERM, as every `veyyon` command does),
 * and neither prints a warning of Node's (a deprecation, say) in a normal run; a runner
 * stopped during a cell answers it as soon as it ends and exits right after; an idle
 * runner hands its shards back and exits without waiting for their locks to expire.
 */
import { Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
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

  it("a runner stopped by SIGTERM during a cell answers the cell when it ends and exits right after", async () => {
    const runner = cluster.runners[0]!
    const cell = cluster.client.runPromiseExit(Effect.flatMap(EvalTool, (tool) =>
      tool.run({ language: "py", code: "import time\nprint('started', flush=True)\ntime.sleep(4)\nprint('finished')" }, { sessionId: "stopping", cwd: "/" })))
    await new Promise((resolve) => setTimeout(resolve, 2000))
    const sent = Date.now()
    runner.child.kill("SIGTERM")
    const result = await cell
    const answeredMs = Date.now() - sent
    const code = await runner.exited
    const exitedMs = Date.now() - sent
    console.log(`cell answered ${answeredMs} ms, runner exited ${exitedMs} ms after SIGTERM (code ${code})`)
    expect(Exit.isSuccess(result) && result.value.text, String(result)).toContain("finished")
    expect(code, runner.log()).toBe(143)
    expect(answeredMs).toBeLessThan(5000)
    expect(exitedMs).toBeLessThan(6000)
    expect(runner.log()).not.toMatch(NODE_WARNING)
  }, 60_000)

  it("an idle runner exits 143 on SIGTERM well before its shard locks would expire, without a warning", async () => {
    const runner = await cluster.addRunner()
    await cluster.settled()
    const sent = Date.now()
    runner.child.kill("SIGTERM")
    expect(await runner.exited, runner.log()).toBe(143)
    const exitedMs = Date.now() - sent
    console.log(`the idle runner exited ${exitedMs} ms after SIGTERM`)
    // Releasing its locks takes a few round trips to Postgres; waiting for them to expire would take LOCK_EXPIRATION_MS.
    expect(exitedMs).toBeLessThan(LOCK_EXPIRATION_MS / 2)
    expect(runner.log()).not.toMatch(NODE_WARNING)
  }, 60_000)
})
