/**
 * What a runner decides and how it ends, end to end: where a session's cells run (its own
 * private directory; a client's cwd only under the allowed roots, /etc refused), the
 * session ids a `mcp --cluster` client mints, the runner-side kernels of a stdio
 * `mcp --cluster` client that exits (stdin closed; SIGTERM), and a runner whose Postgres
 * is gone exiting promptly on SIGTERM with its kernels ended.
 */
import { Cause, Effect, Exit, ManagedRuntime, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { evalClusterLayer } from "../../src/cluster/EvalClusterLayer.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { InvalidCwd } from "../../src/services/registry/KernelRegistry.ts"
import { initializeRequest, type McpChild, poll, startMcp } from "../mcp/support.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { LOCK_EXPIRATION_MS, startCluster, type TestCluster } from "./support.ts"
import { titled } from "../support/skip.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const PID_AND_CWD = "import os\nprint(os.getpid(), os.getcwd(), os.environ.get('VEYYON_ARTIFACTS_DIR', ''))"

describe.skipIf(skipReason !== undefined)(titled("runner doors", skipReason), () => {
  let cluster: TestCluster
  let allowed: string
  const children: Array<McpChild> = []

  beforeAll(async () => {
    const base = fs.mkdtempSync(path.join("/tmp", "veyyon-allowed-"))
    allowed = fs.realpathSync(base)
    cluster = await startCluster(1, { runnerEnv: { VEYYON_RUNNER_ALLOWED_ROOTS: allowed } })
  }, 180_000)

  afterAll(async () => {
    for (const child of children) await child.kill()
    await cluster?.stop()
    fs.rmSync(allowed, { recursive: true, force: true })
  }, 120_000)

  const run = (runtime: ManagedRuntime.ManagedRuntime<EvalTool, unknown>, sessionId: string, code: string, cwd: string) =>
    runtime.runPromiseExit(Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code }, { sessionId, cwd })))

  it("runs each session in its own private directory on the runner, whatever cwd the client has", async () => {
    const first = await run(cluster.client, "dir-a", PID_AND_CWD, "/etc")
    const second = await run(cluster.client, "dir-b", PID_AND_CWD, "/etc")
    if (!Exit.isSuccess(first) || !Exit.isSuccess(second)) throw new Error("the cells failed")
    const dirA = first.value.text.split(" ")[1]!
    const dirB = second.value.text.split(" ")[1]!
    expect(dirA).not.toBe(dirB)
    for (const dir of [dirA, dirB]) {
      expect(dir.startsWith(path.join(cluster.dir, "workspaces") + path.sep)).toBe(true)
      expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
    }
  }, 120_000)

  it("runs a client's cwd only under the allowed roots and refuses /etc with a clear error", async () => {
    const caller = ManagedRuntime.make(evalClusterLayer({
      cluster: { postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS },
      cwd: "caller",
      env: false
    }))
    try {
      const inside = path.join(allowed, "project")
      fs.mkdirSync(inside)
      const ok = await run(caller, "cwd-ok", "import os\nprint(os.getcwd())", inside)
      expect(Exit.isSuccess(ok) && ok.value.text).toBe(inside)
      for (const refused of ["/etc", "/proc", path.join(allowed, "..")]) {
        const exit = await run(caller, "cwd-refused", "open('written-by-a-client', 'w')", refused)
        expect(Exit.isFailure(exit)).toBe(true)
        const error = Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : Option.none()
        expect(Option.getOrUndefined(error)).toBeInstanceOf(InvalidCwd)
        expect(Option.getOrUndefined(error)).toMatchObject({ message: expect.stringMatching(/cannot run a cell in .*VEYYON_RUNNER_ALLOWED_ROOTS/s) })
      }
      expect(fs.existsSync("/etc/written-by-a-client")).toBe(false)
    } finally {
      await caller.dispose()
    }
  }, 120_000)

  const clusterEnv = () => ({
    VEYYON_CLUSTER_POSTGRES_URL: cluster.pg.url,
    VEYYON_CLUSTER_SECRET_FILE: cluster.env.VEYYON_CLUSTER_SECRET_FILE!,
    VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS: String(LOCK_EXPIRATION_MS)
  })

  /** A stdio `mcp --cluster` client that ran one cell; the kernel's pid on the runner and what the cell printed. */
  const mcpClientWithKernel = async () => {
    const child = startMcp(["mcp", "--cluster"], clusterEnv())
    children.push(child)
    child.write(`${JSON.stringify(initializeRequest(1))}\n`)
    await child.next((message) => message.id === 1)
    child.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`)
    child.write(`${JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "eval", arguments: { language: "py", code: PID_AND_CWD } } })}\n`)
    const reply = await child.next((message) => message.id === 2, 120_000)
    const text = ((reply.result as { content: Array<{ text: string }> }).content[0]!).text
    return { child, pid: Number(text.split(" ")[0]), text }
  }

  const exited = (child: McpChild) =>
    child.child.exitCode !== null || child.child.signalCode !== null ? Promise.resolve() : new Promise<void>((resolve) => child.child.once("exit", () => resolve()))

  it("a stdio mcp --cluster client mints session ids with 128 random bits", async () => {
    const { child, text } = await mcpClientWithKernel()
    expect(text).toMatch(/mcp-[0-9a-f]{32}/)
    await child.kill()
  }, 180_000)

  it("a stdio mcp --cluster client whose stdin closes ends its kernel on the runner", async () => {
    const { child, pid } = await mcpClientWithKernel()
    expect(alive(pid)).toBe(true)
    child.child.stdin!.end()
    await exited(child)
    await poll(() => (alive(pid) ? undefined : true), 20_000, `the kernel ${pid} to end on the runner`)
  }, 180_000)

  it("a stdio mcp --cluster client stopped by SIGTERM ends its kernel on the runner", async () => {
    const { child, pid } = await mcpClientWithKernel()
    expect(alive(pid)).toBe(true)
    child.child.kill("SIGTERM")
    await exited(child)
    await poll(() => (alive(pid) ? undefined : true), 20_000, `the kernel ${pid} to end on the runner`)
  }, 180_000)

  it("a runner whose Postgres is gone exits within 10 s of SIGTERM, its kernels ended", async () => {
    const started = await run(cluster.client, "last", PID_AND_CWD, "/")
    if (!Exit.isSuccess(started)) throw new Error("the cell failed")
    const pid = Number(started.value.text.split(" ")[0])
    await cluster.pg.stop()
    const runner = cluster.runners[0]!
    const sent = Date.now()
    runner.child.kill("SIGTERM")
    const code = await Promise.race([runner.exited, new Promise((resolve) => setTimeout(() => resolve("still running"), 30_000))])
    const tookMs = Date.now() - sent
    expect(code, runner.log().slice(-2000)).not.toBe("still running")
    expect(tookMs, runner.log().slice(-2000)).toBeLessThan(10_000)
    await poll(() => (alive(pid) ? undefined : true), 3000, `the kernel ${pid} to be gone`)
  }, 120_000)
})
