/**
 * A runner on its default sandbox (no `VEYYON_SANDBOX` given): its cells reach neither the
 * cluster's Postgres nor anything else on the host's loopback, run under the default pids
 * and memory limits, and read the Postgres password from nowhere (their environment, argv,
 * or any /proc they can see, the runner's own included).
 */
import { credentialScanCell, environReachableCell } from "../support/credentialScan.ts"
import { spawnSync } from "node:child_process"
import { Effect, Exit } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { startCluster, type TestCluster } from "./support.ts"
import { titled } from "../support/skip.ts"

const bwrapProblem = (): string | undefined => {
  const probe = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"], { encoding: "utf8" })
  if (probe.error !== undefined) return `bwrap is not installed (${probe.error.message})`
  return probe.status === 0 ? undefined : `bwrap cannot create namespaces here: ${probe.stderr.trim()}`
}
const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason() ?? bwrapProblem()

describe.skipIf(skipReason !== undefined)(titled("a runner's default sandbox", skipReason), { timeout: 180_000 }, () => {
  let cluster: TestCluster

  beforeAll(async () => {
    cluster = await startCluster(1, { runnerEnv: { VEYYON_SANDBOX: "" } })
  }, 180_000)

  afterAll(async () => {
    await cluster?.stop()
  }, 60_000)

  const run = async (code: string) => {
    const exit = await cluster.client.runPromiseExit(Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code }, { sessionId: "sandboxed", cwd: cluster.dir })))
    if (Exit.isFailure(exit)) throw new Error(`the cell failed: ${JSON.stringify(exit.cause)}`)
    return exit.value
  }

  it("a cell cannot connect to the cluster's Postgres, and runs under the default pids and memory limits", async () => {
    const password = decodeURIComponent(new URL(cluster.pg.url).password)
    expect(password.length).toBeGreaterThan(0)
    const result = await run([
      "import resource, socket",
      "try:",
      `    socket.create_connection(('127.0.0.1', ${cluster.pg.port}), 5).close(); print('connected')`,
      "except OSError as e:",
      "    print(type(e).__name__)",
      "print(resource.getrlimit(resource.RLIMIT_NPROC)[0], resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)"
    ].join("\n"))
    expect(result.text).toBe("ConnectionRefusedError\n256 2048")
  })

  it("a cell reads the Postgres URL and password from nowhere: its environment, argv, or any /proc it can see", async () => {
    const password = decodeURIComponent(new URL(cluster.pg.url).password)
    const runnerPid = cluster.runners[0]!.child.pid!
    const result = await run(`${credentialScanCell(password, "POSTGRES")}\n${environReachableCell(runnerPid)}`)
    expect(result.text).toBe("[] []\nunreachable")
  })
})
