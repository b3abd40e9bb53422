/**
 * The cluster end to end: a private PostgreSQL, `veyyon runner` processes and a client in
 * this process, on loopback. Routing and kept state, streaming order, cancel as SIGINT,
 * "busy", `kill -9` of a runner (every call answered, the cell in flight answered with the
 * notice and run once only, moved sessions told their variables are gone, kv kept),
 * adding a runner, a SIGTERM hand-off, and which runner serves a session (Status, the
 * result, the client's span). Real Python kernels; liveness bounds only.
 */
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Fiber, Layer, ManagedRuntime, Result } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { RUNNER_SPAN_ATTRIBUTE } from "../../src/cluster/ClusterEvalTool.ts"
import { resolveClusterSettings } from "../../src/cluster/ClusterSettings.ts"
import { clientShardingLayer, postgresLayer } from "../../src/cluster/ClusterTransport.ts"
import { evalClusterLayer } from "../../src/cluster/EvalClusterLayer.ts"
import { KernelSession } from "../../src/cluster/KernelSession.ts"
import { stateVersions } from "../../src/cluster/ProtocolVersion.ts"
import { LOST_CELL_NOTICE, REHOMED_NOTICE } from "../../src/cluster/LedgerDecision.ts"
import { TracingLive } from "../../src/layers/Tracing.ts"
import type { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import { ArtifactStore } from "../../src/services/output/ArtifactStore.ts"
import { EvalTool, type EvalResult } from "../../src/services/tool/EvalTool.ts"
import { integrationEnabled } from "../support/python.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { LOCK_EXPIRATION_MS, startCluster, type TestCluster, type TestRunner } from "./support.ts"
import { titled } from "../support/skip.ts"
import { printed } from "../support/evalResult.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()

/** Every call after a runner's death must be answered within this (the lock expiry plus a generous margin for a loaded machine). */
const ANSWER_BOUND_MS = LOCK_EXPIRATION_MS + 60_000

describe.skipIf(skipReason !== undefined)(titled("cluster", skipReason), () => {
  let cluster: TestCluster
  const sessions = Array.from({ length: 16 }, (_, index) => `s${index}`)

  const run = (sessionId: string, code: string, options: { readonly onEvent?: (output: KernelOutput) => void; readonly signal?: AbortSignal } = {}) =>
    Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code }, { sessionId, cwd: cluster.dir, ...options }))

  const runPromise = (sessionId: string, code: string) => cluster.client.runPromise(run(sessionId, code))

  const runnerOf = async (sessionId: string): Promise<TestRunner> => {
    const address = (await cluster.owners()).get(sessionId)
    const runner = cluster.runners.find((candidate) => candidate.address === address)
    if (runner === undefined) throw new Error(`session ${sessionId} has no live owner (${address})`)
    return runner
  }

  beforeAll(async () => {
    cluster = await startCluster(2)
  }, 180_000)

  afterAll(async () => {
    await cluster?.stop()
  }, 120_000)

  it("routes sessions across the runners and keeps each session's variables and kv between cells", async () => {
    for (const sessionId of sessions) {
      const first = await runPromise(sessionId, `x = ${JSON.stringify(sessionId)}\nkv.set("name", x)`)
      expect(first.status, first.text).toBe("ok")
    }
    const runners = new Map<string, string | undefined>()
    for (const sessionId of sessions) {
      const second = await runPromise(sessionId, "print(x, kv.get('name'))")
      expect(second.text).toBe(`${sessionId} ${sessionId}`)
      runners.set(sessionId, second.runner)
    }
    const owners = await cluster.owners()
    for (const sessionId of sessions) expect(runners.get(sessionId), sessionId).toBe(owners.get(sessionId))
    expect(new Set(sessions.map((sessionId) => owners.get(sessionId))).size).toBe(2)
  }, 120_000)

  it("names the runner serving a session: the entity's Status, the result's runner and the client's eval.run span all say the ledger's owner", async () => {
    const exporter = new InMemorySpanExporter()
    const traced = ManagedRuntime.make(Layer.merge(
      evalClusterLayer({
        cluster: { postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS },
        settings: { artifactsDir: path.join(cluster.dir, "sessions") },
        env: false
      }),
      TracingLive({ spanProcessor: new SimpleSpanProcessor(exporter) })
    ))
    const settings = Result.getOrThrow(resolveClusterSettings({ postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS }, {}))
    const entities = ManagedRuntime.make(clientShardingLayer(settings).pipe(Layer.provide(postgresLayer(settings))))
    try {
      const result = await traced.runPromise(run("where", "print('here')"))
      expect(result.text).toBe("here")
      const owner = (await cluster.owners()).get("where")
      expect(cluster.runners.map((runner) => runner.address)).toContain(owner)
      expect(result.runner).toBe(owner)
      const spans = exporter.getFinishedSpans().filter((span) => span.name === "eval.run")
      expect(spans.map((span) => span.attributes[RUNNER_SPAN_ATTRIBUTE])).toEqual([owner])
      expect(spans[0]!.attributes["eval.session"]).toBe("where")
      const status = await entities.runPromise(Effect.flatMap(KernelSession.client, (client) => client("where").Status()))
      expect(status).toMatchObject({ runner: owner, running: null })
      expect(status.incarnation).toMatch(/^[0-9a-f-]{36}$/)
    } finally {
      await traced.dispose()
      await entities.dispose()
    }
  }, 120_000)

  it("a call sent again the moment its answer arrived is answered with that result, not run again; the next call runs at once", async () => {
    const settings = Result.getOrThrow(resolveClusterSettings({ postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS }, {}))
    const entities = ManagedRuntime.make(clientShardingLayer(settings).pipe(Layer.provide(postgresLayer(settings))))
    const params = { language: "py", code: "runs = globals().get('runs', 0) + 1\nprint(runs)" }
    const execute = (callId: string) =>
      entities.runPromise(Effect.gen(function*() {
        const session = (yield* KernelSession.client)("again")
        let from = 0
        while (true) {
          const answer = yield* stateVersions(session.Execute({ params, callId, from }))
          if (answer.result !== undefined) return answer.result
          from = answer.next
        }
      }))
    try {
      for (let round = 1; round <= 20; round++) {
        const first = await execute(`again-${round}`)
        const second = await execute(`again-${round}`)
        expect(first?.text, `round ${round}`).toBe(String(round))
        expect(second, `round ${round}`).toStrictEqual(first)
      }
    } finally {
      await entities.dispose()
    }
  }, 120_000)

  it("a caller that goes away while its cell runs leaves nothing running: the cell is interrupted, the kernel lives on", async () => {
    const settings = Result.getOrThrow(resolveClusterSettings({ postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS }, {}))
    const entitiesOf = () => ManagedRuntime.make(clientShardingLayer(settings).pipe(Layer.provide(postgresLayer(settings))))
    await runPromise("gone", "kept = 1")
    const marker = path.join(cluster.dir, "gone-marker")
    // The cell's own timeout (100 s) is far past the wait below: only the caller's going ends it that soon.
    const code = `import time\nprint('go', flush=True)\ntime.sleep(90)\nkept = 2\nopen(${JSON.stringify(marker)}, 'w').close()`
    const params = { language: "py", code, timeout: 100 }
    const caller = entitiesOf()
    const session = await caller.runPromise(Effect.map(KernelSession.client, (client) => client("gone")))
    const first = await caller.runPromise(stateVersions(session.Execute({ params, callId: "gone-1", from: 0 })))
    expect(first.outputs).toEqual([{ _tag: "Stdout", text: "go\n" }])
    const waiting = caller.runPromiseExit(stateVersions(session.Execute({ params, callId: "gone-1", from: first.next })))
    await new Promise((resolve) => setTimeout(resolve, 500))
    await caller.dispose()
    await waiting
    const observer = entitiesOf()
    try {
      const deadline = Date.now() + 30_000
      let status = await observer.runPromise(Effect.flatMap(KernelSession.client, (client) => client("gone").Status()))
      while (status.running !== null && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 200))
        status = await observer.runPromise(Effect.flatMap(KernelSession.client, (client) => client("gone").Status()))
      }
      expect(status.running).toBeNull()
    } finally {
      await observer.dispose()
    }
    expect((await runPromise("gone", "print(kept)")).text).toBe("1")
    expect(fs.existsSync(marker)).toBe(false)
  }, 120_000)

  it("a truncated cell's full output is an artifact the client reads from Postgres, whichever runner wrote it", async () => {
    const result = await runPromise("artifact", "for i in range(20000):\n    print('row', i)")
    expect(result.truncation).toBeDefined()
    expect(result.artifactIds.length).toBe(1)
    const full = await cluster.client.runPromise(
      Effect.flatMap(ArtifactStore, (artifacts) => Effect.flatMap(artifacts.forSession("artifact"), (store) => store.read(result.artifactIds[0]!)))
    )
    expect(full).toBe(Array.from({ length: 20000 }, (_, i) => `row ${i}\n`).join(""))
  }, 120_000)

  it("streams a cell's outputs in order before its result", async () => {
    const seen: Array<string> = []
    let resultAt = -1
    const result = await cluster.client.runPromise(
      run("stream", "import time\nfor i in range(5):\n    print(i, flush=True)\n    time.sleep(0.05)", {
        onEvent: (output) => {
          if (output._tag === "Stdout") seen.push(output.text)
        }
      }).pipe(Effect.tap(() => Effect.sync(() => (resultAt = seen.length))))
    )
    expect(seen.join("")).toBe("0\n1\n2\n3\n4\n")
    expect(resultAt).toBe(seen.length)
    expect(result.text).toBe("0\n1\n2\n3\n4")
  }, 120_000)

  it("answers a second cell on a running session with busy, and cancelling reaches the kernel as SIGINT (the kernel and its variables live on)", async () => {
    await runPromise("cancel", "kept = 41")
    const controller = new AbortController()
    let started!: () => void
    const startedPromise = new Promise<void>((resolve) => (started = resolve))
    const running = cluster.client.runPromise(run("cancel", "import time\nprint('go', flush=True)\ntime.sleep(120)", {
      signal: controller.signal,
      onEvent: (output) => {
        if (output._tag === "Stdout" && output.text.includes("go")) started()
      }
    }))
    await startedPromise
    const busy = await runPromise("cancel", "print('should not run')")
    expect(busy.status).toBe("error")
    expect(busy.error?.ename).toBe("SessionBusy")
    controller.abort()
    const cancelled = await running
    expect(cancelled.cancelled).toBe(true)
    expect(cancelled.text).toContain("KeyboardInterrupt")
    expect((await runPromise("cancel", "print(kept + 1)")).text).toBe("42")
  }, 120_000)

  it("interrupting the call interrupts the cell on its runner, as in-process: the kernel lives on with its variables", async () => {
    await runPromise("interrupt", "kept = 1")
    let started!: () => void
    const startedPromise = new Promise<void>((resolve) => (started = resolve))
    const fiber = cluster.client.runFork(run("interrupt", "import time\nprint('go', flush=True)\ntime.sleep(120)\nkept = 2", {
      onEvent: (output) => {
        if (output._tag === "Stdout") started()
      }
    }))
    await startedPromise
    await cluster.client.runPromise(Fiber.interrupt(fiber))
    const deadline = Date.now() + 60_000
    let after = await runPromise("interrupt", "print(kept)")
    while (after.error?.ename === "SessionBusy" && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200))
      after = await runPromise("interrupt", "print(kept)")
    }
    expect(after.text).toBe("1")
  }, 120_000)

  it("kill -9 of a runner: every call is answered, the cell in flight gets the notice and ran once, moved sessions are told, kv is kept", async () => {
    const counter = path.join(cluster.dir, "counter")
    const inflightSession = sessions[0]!
    let started!: () => void
    const startedPromise = new Promise<void>((resolve) => (started = resolve))
    const inflight = cluster.client.runPromise(
      run(inflightSession, `open(${JSON.stringify(counter)}, "a").write("x")\nprint("started", flush=True)\nimport time\ntime.sleep(120)`, {
        onEvent: (output) => {
          if (output._tag === "Stdout") started()
        }
      })
    )
    await startedPromise
    for (const sessionId of sessions.slice(1)) await cluster.snapshotSaved(sessionId, 1)
    const ownersBefore = await cluster.owners()
    const victim = await runnerOf(inflightSession)
    victim.child.kill("SIGKILL")
    await victim.exited
    const killedAt = Date.now()
    const lost = await inflight
    expect(Date.now() - killedAt).toBeLessThan(ANSWER_BOUND_MS)
    expect(lost.status).toBe("error")
    expect(lost.notice).toBe(LOST_CELL_NOTICE)
    expect(lost.text).toContain("was not run again")
    expect(lost.outputs).toEqual([expect.objectContaining({ _tag: "Stdout", text: "started\n" })])
    expect(lost.text).toMatch(/^started\n/)
    const answers = await Promise.all(sessions.slice(1).map(async (sessionId) => [sessionId, await runPromise(sessionId, "print(globals().get('x'), kv.get('name'))")] as const))
    expect(Date.now() - killedAt).toBeLessThan(ANSWER_BOUND_MS)
    for (const [sessionId, answer] of answers) {
      if (ownersBefore.get(sessionId) === victim.address) {
        expect(answer.notice?.startsWith(REHOMED_NOTICE), `${sessionId}: ${answer.notice}`).toBe(true)
        expect(answer.notice).toContain("restored as of cell")
        expect(answer.text).toContain(`${sessionId} ${sessionId}`)
      } else {
        expect(answer.notice, sessionId).toBeUndefined()
        expect(answer.text).toBe(`${sessionId} ${sessionId}`)
      }
    }
    // The lost cell never ran again: the counter holds the one mark of its only run.
    expect(printed(await runPromise(inflightSession, "print(kv.get('name'))"))).toBe(inflightSession)
    expect(fs.readFileSync(counter, "utf8")).toBe("x")
  }, 180_000)

  it("adding a runner moves some sessions; those say so and have their variables back from Postgres, the rest keep them", async () => {
    for (const sessionId of sessions) {
      const set = await runPromise(sessionId, `x = ${JSON.stringify(sessionId)}`)
      await cluster.snapshotSaved(sessionId, set.executionCount)
    }
    const added = await cluster.addRunner()
    const deadline = Date.now() + 90_000
    let moved = 0
    while (moved === 0 && Date.now() < deadline) {
      for (const sessionId of sessions) {
        const answer = await runPromise(sessionId, "print(globals().get('x'))")
        if (answer.notice?.startsWith(REHOMED_NOTICE) === true) {
          expect(answer.notice).toContain("restored as of cell")
          expect(printed(answer)).toBe(sessionId)
          moved++
        } else {
          expect(answer.notice, sessionId).toBeUndefined()
          expect(answer.text).toBe(sessionId)
        }
      }
      if (moved === 0) await new Promise((resolve) => setTimeout(resolve, 500))
    }
    expect(moved).toBeGreaterThan(0)
    expect([...(await cluster.owners()).values()]).toContain(added.address)
  }, 180_000)

  it("SIGTERM hands a runner's sessions off: its cell in flight is answered (its result or the notice, never a failure) and ran once", async () => {
    const sessionId = "handed-off"
    const counter = path.join(cluster.dir, "counter-term")
    let started!: () => void
    const startedPromise = new Promise<void>((resolve) => (started = resolve))
    const inflight = cluster.client.runPromise(
      run(sessionId, `open(${JSON.stringify(counter)}, "a").write("x")\nprint("started", flush=True)\nimport time\ntime.sleep(1)\nprint("finished")`, {
        onEvent: (output) => {
          if (output._tag === "Stdout") started()
        }
      })
    )
    await startedPromise
    const victim = await runnerOf(sessionId)
    victim.child.kill("SIGTERM")
    const result: EvalResult = await inflight
    // The cell finishes within the runner's grace; its result comes back, from the runner or kept in the ledger.
    if (result.notice === undefined) expect(result.text).toBe("started\nfinished")
    else expect(result.notice).toBe(LOST_CELL_NOTICE)
    await victim.exited
    const next = await runPromise(sessionId, "print(globals().get('x'), 'time' in globals())")
    if (result.notice === undefined) expect(next.notice?.startsWith(REHOMED_NOTICE), next.notice).toBe(true)
    else expect(next.notice ?? "").not.toContain(REHOMED_NOTICE)
    expect(next.text).toContain("None")
    expect(await victim.exited).not.toBe("SIGKILL")
    expect(fs.readFileSync(counter, "utf8")).toBe("x")
    expect(victim.log()).not.toMatch(/EPIPE|SocketError|internal error/)
  }, 180_000)
})
