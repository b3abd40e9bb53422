/**
 * The cluster through a restart of its Postgres, with real runner processes: the runners
 * and the client reconnect by themselves; cells in flight are answered (their result, or
 * the lost-cell notice) and run once; a call made while the database is down waits for it
 * and runs once it is back; a call that outlasts the wait fails with a sentence naming the
 * database; no runner crashes.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LOST_CELL_NOTICE } from "../../src/cluster/LedgerDecision.ts"
import type { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import { EvalTool, type EvalResult } from "../../src/services/tool/EvalTool.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { titled } from "../support/skip.ts"
import { startCluster, type TestCluster } from "./support.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.skipIf(skipReason !== undefined)(titled("the cluster through a Postgres restart", skipReason), () => {
  let cluster: TestCluster
  const run = (sessionId: string, code: string, onEvent?: (output: KernelOutput) => void) =>
    cluster.client.runPromise(EvalTool.use((tool) => tool.run({ language: "py", code }, { sessionId, cwd: cluster.dir, ...(onEvent === undefined ? {} : { onEvent }) })))

  /** Starts a cell that appends to `counter`, prints `started` and sleeps; resolves `running` once it runs. */
  const startLong = (sessionId: string, seconds: number, counter: string) => {
    let started!: () => void
    const running = new Promise<void>((resolve) => (started = resolve))
    const answer = run(
      sessionId,
      `open(${JSON.stringify(counter)}, "a").write("x")\nprint("started", flush=True)\nimport time\ntime.sleep(${seconds})\nprint("done")`,
      (output) => {
        if (output._tag === "Stdout" && output.text.includes("started")) started()
      }
    )
    return { running, answer }
  }

  /** A cell's answer is its own result, or the honest notice that its runner was lost. */
  const answeredOnce = (answer: EvalResult, counter: string) => {
    if (answer.notice === LOST_CELL_NOTICE) expect(answer.status).toBe("error")
    else {
      expect(answer.status, answer.text).toBe("ok")
      expect(answer.text).toBe("started\ndone")
    }
    expect(fs.readFileSync(counter, "utf8")).toBe("x")
  }

  const alive = () => cluster.runners.every((runner) => runner.child.exitCode === null && runner.child.signalCode === null)

  beforeAll(async () => {
    cluster = await startCluster(2)
  }, 180_000)

  afterAll(async () => {
    await cluster?.stop()
  }, 120_000)

  it("a restart under running cells: each is answered and ran once, a call made while the database is down runs once it is back, every session answers after", async () => {
    const sessions = ["pr-a", "pr-b", "pr-c", "pr-d"]
    for (const sessionId of sessions) expect((await run(sessionId, "x = 1")).status).toBe("ok")
    // One cell ends while the database is down, the other after it is back.
    const short = path.join(cluster.dir, "short-counter")
    const long = path.join(cluster.dir, "long-counter")
    const cells = [startLong("pr-a", 2, short), startLong("pr-b", 10, long)]
    await Promise.all(cells.map((cell) => cell.running))
    await cluster.pg.down()
    const downAt = Date.now()
    const whileDown = path.join(cluster.dir, "while-down-counter")
    const made = run("pr-new", `open(${JSON.stringify(whileDown)}, "a").write("x")\nprint("ran")`)
    await sleep(6000)
    await cluster.pg.up()
    const upAt = Date.now()

    const [shortAnswer, longAnswer] = await Promise.all(cells.map((cell) => cell.answer))
    answeredOnce(shortAnswer!, short)
    answeredOnce(longAnswer!, long)
    const madeAnswer = await made
    expect(madeAnswer.status, madeAnswer.text).toBe("ok")
    expect(madeAnswer.text).toMatch(/^ran$/m)
    expect(Date.now()).toBeGreaterThanOrEqual(upAt)
    expect(upAt - downAt).toBeGreaterThanOrEqual(6000)
    expect(fs.readFileSync(whileDown, "utf8")).toBe("x")

    for (const sessionId of [...sessions, "pr-new", "pr-fresh"]) {
      const answer = await run(sessionId, "print('alive')")
      expect(answer.status, `${sessionId}: ${answer.text}`).toBe("ok")
      // A moved session says so (its kernel is fresh, restored from its snapshot); no call is called lost.
      expect(answer.notice).not.toBe(LOST_CELL_NOTICE)
      expect(answer.text).toMatch(/^alive$/m)
    }
    expect(alive()).toBe(true)
  }, 300_000)

  it("a call made while the database stays down fails within a bounded time with a sentence naming the database; the cluster serves again once it is back", async () => {
    expect((await run("pr-outage", "y = 2")).status).toBe("ok")
    await cluster.pg.down()
    const started = Date.now()
    const marker = path.join(cluster.dir, "outage-marker")
    let timer: ReturnType<typeof setTimeout> | undefined
    const hung = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("the call was still waiting after 100 s")), 100_000)))
    const failed = await Promise.race([hung, run("pr-outage", `open(${JSON.stringify(marker)}, "w").write("ran")`)]).then(
      (answer) => `answered: ${answer.status} ${answer.text}`,
      (error: unknown) => String(error)
    ).finally(() => clearTimeout(timer))
    const waited = Date.now() - started
    console.log(`a call while Postgres is down failed after ${waited} ms: ${failed}`)
    await cluster.pg.up()
    expect(failed).toContain(`the cluster's database (Postgres at 127.0.0.1:${cluster.pg.port}/postgres) could not be reached`)
    // The runner's ledger says so when it answers; a client that gave up first cannot tell whether the cell started just before.
    expect(failed).toMatch(/the cell did not run|the cell may have run before it went away/)
    expect(waited).toBeGreaterThanOrEqual(20_000)
    expect(waited).toBeLessThan(120_000)
    expect(fs.existsSync(marker)).toBe(false)
    const after = await run("pr-outage", "print('back')")
    expect(after.status, after.text).toBe("ok")
    expect(after.text).toMatch(/^back$/m)
    expect(alive()).toBe(true)
  }, 300_000)
})
