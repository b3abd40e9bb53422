/**
 * The runner port's door, attacked: a separate unprivileged local user and a cell on the
 * same runner replay the bytes the cluster library sends for a `KernelSession` `Execute`
 * (no secret, no Postgres password), and the library client itself calls the port. Against
 * a runner started with `--insecure-no-auth` (the control) the replay runs its cell; against
 * a runner with the cluster secret it gets the runner's hello and a closed connection, no
 * RPC reply, and nothing runs. A client holding a wrong secret is refused the same way.
 */
import { Effect, Exit } from "effect"
import * as fs from "node:fs"
import * as Net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { evalClusterLayer } from "../../src/cluster/EvalClusterLayer.ts"
import { clientHandshake, MESH_MAGIC, SERVER_HELLO_BYTES } from "../../src/cluster/MeshHandshake.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { createOtherUser, type OtherUser, otherUserSkipReason, removeOtherUser } from "../support/otherUser.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { attackExecute, captureExecute, REPLAY_PY, replayOutcome } from "./attacker.ts"
import { startCluster, type TestCluster } from "./support.ts"
import { ManagedRuntime } from "effect"
import { titled } from "../support/skip.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()
const userSkip = otherUserSkipReason()

const portOf = (cluster: TestCluster): number => Number(cluster.runners[0]!.address.split(":")[1])

/** A cell that writes `marker` when it runs. */
const markerCode = (marker: string) => `open(${JSON.stringify(marker)}, "w").write("ran")`

const runAs = (cluster: TestCluster, sessionId: string, code: string) =>
  cluster.client.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code, timeout: 60 }, { sessionId, cwd: cluster.dir })))

/** A cell that replays `payload` to the runner port from inside the runner's kernel and prints what it saw. */
const replayCell = (port: number, payload: Buffer) =>
  `${REPLAY_PY.replace('if __name__ == "__main__":', "if False:")}\nimport json as _j\nprint(_j.dumps(replay("127.0.0.1", ${port}, bytes.fromhex(${JSON.stringify(payload.toString("hex"))}), 4.0)))`

const waitFor = async (check: () => boolean, ms: number) => {
  const deadline = Date.now() + ms
  while (Date.now() < deadline && !check()) await new Promise((resolve) => setTimeout(resolve, 100))
  return check()
}

describe.skipIf(skipReason !== undefined)(titled("runner port without the secret (--insecure-no-auth, the control)", skipReason), () => {
  let cluster: TestCluster
  let other: OtherUser | undefined

  beforeAll(async () => {
    cluster = await startCluster(1, { insecure: true })
    if (userSkip === undefined) other = createOtherUser()
  }, 180_000)

  afterAll(async () => {
    removeOtherUser(other)
    await cluster?.stop()
  }, 120_000)

  it("warns loudly at start", () => {
    expect(cluster.runners[0]!.log()).toMatch(/WARNING: --insecure-no-auth/)
  })

  it.skipIf(userSkip !== undefined)(titled("another local user replaying a captured Execute runs a cell as the runner: the attack the secret stops", userSkip), async () => {
    const marker = path.join(cluster.dir, "control-marker")
    const payload = await captureExecute("victim-control", markerCode(marker))
    const replayed = other!.run("python3", ["-c", REPLAY_PY, "127.0.0.1", String(portOf(cluster)), payload.toString("hex"), "8"])
    expect(replayed.status, replayed.stderr).toBe(0)
    expect(await waitFor(() => fs.existsSync(marker), 30_000)).toBe(true)
    expect(replayOutcome(replayed.stdout).received.length).toBeGreaterThan(0)
  }, 120_000)
})

describe.skipIf(skipReason !== undefined)(titled("runner port with the cluster secret", skipReason), () => {
  let cluster: TestCluster
  let other: OtherUser | undefined

  beforeAll(async () => {
    cluster = await startCluster(1)
    if (userSkip === undefined) other = createOtherUser()
  }, 180_000)

  afterAll(async () => {
    removeOtherUser(other)
    await cluster?.stop()
  }, 120_000)

  const expectOnlyHello = (outcome: { readonly received: Buffer; readonly closed: boolean }) => {
    expect(outcome.closed).toBe(true)
    expect(outcome.received.length).toBe(SERVER_HELLO_BYTES)
    expect(outcome.received.subarray(0, MESH_MAGIC.length).equals(MESH_MAGIC)).toBe(true)
  }

  it("serves its own client (holding the secret)", async () => {
    const result = await runAs(cluster, "owner", "x = 41\nprint(x + 1)")
    expect(result.text).toBe("42")
  }, 120_000)

  it.skipIf(userSkip !== undefined)(titled("another local user replaying a captured Execute gets the hello and a closed connection, no RPC reply, and nothing runs", userSkip), async () => {
    const marker = path.join(cluster.dir, "user-marker")
    const payload = await captureExecute("victim-user", markerCode(marker))
    const replayed = other!.run("python3", ["-c", REPLAY_PY, "127.0.0.1", String(portOf(cluster)), payload.toString("hex"), "8"])
    expect(replayed.status, replayed.stderr).toBe(0)
    expectOnlyHello(replayOutcome(replayed.stdout))
    await new Promise((resolve) => setTimeout(resolve, 2000))
    expect(fs.existsSync(marker)).toBe(false)
    expect(cluster.runners[0]!.log()).toMatch(/refused a connection to the runner port from 127\.0\.0\.1:\d+/)
  }, 120_000)

  it("a cell on the runner sees no secret and replaying to its own runner's port gets no RPC reply; nothing runs", async () => {
    const marker = path.join(cluster.dir, "cell-marker")
    const payload = await captureExecute("victim-cell", markerCode(marker))
    const env = await runAs(cluster, "attacker-cell", `import os\nprint(sorted(k for k, v in os.environ.items() if 'SECRET' in k.upper() or ${JSON.stringify(cluster.secret)} in v))`)
    expect(env.text).toBe("[]")
    const replayed = await runAs(cluster, "attacker-cell", replayCell(portOf(cluster), payload))
    expect(replayed.status, replayed.text).toBe("ok")
    expectOnlyHello(replayOutcome(replayed.text))
    await new Promise((resolve) => setTimeout(resolve, 2000))
    expect(fs.existsSync(marker)).toBe(false)
  }, 120_000)

  it("the cluster library's own client without the secret gets no answer, and nothing runs", async () => {
    const marker = path.join(cluster.dir, "library-marker")
    const exit = await attackExecute("127.0.0.1", portOf(cluster), "victim-library", markerCode(marker), 8000)
    expect(Exit.isFailure(exit)).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 2000))
    expect(fs.existsSync(marker)).toBe(false)
  }, 60_000)

  it("a client holding a wrong secret is refused: its call fails and nothing runs", async () => {
    const marker = path.join(cluster.dir, "wrong-secret-marker")
    const wrong = ManagedRuntime.make(evalClusterLayer({
      cluster: { postgresUrl: cluster.pg.url, secret: "w".repeat(64), shardLockExpirationMs: 9000 },
      env: false
    }))
    try {
      const exit = await wrong.runPromiseExit(
        Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code: markerCode(marker) }, { sessionId: "victim-wrong", cwd: cluster.dir })).pipe(
          Effect.timeout(20_000)
        )
      )
      expect(Exit.isFailure(exit)).toBe(true)
    } finally {
      await wrong.dispose()
    }
    expect(fs.existsSync(marker)).toBe(false)
    expect(cluster.runners[0]!.log()).toMatch(/did not prove the cluster secret/)
  }, 60_000)

  it("a peer that passes the handshake and then resets its connection is no error of the runner's", async () => {
    const before = cluster.runners[0]!.log().length
    for (let round = 0; round < 3; round++) {
      const conn = Net.createConnection({ host: "127.0.0.1", port: portOf(cluster) })
      await new Promise<void>((resolve, reject) => {
        conn.once("connect", resolve)
        conn.once("error", reject)
      })
      await Effect.runPromise(clientHandshake(conn, cluster.secret))
      conn.write(Buffer.from([0, 0]))
      conn.resetAndDestroy()
    }
    await new Promise((resolve) => setTimeout(resolve, 1000))
    const logged = cluster.runners[0]!.log().slice(before)
    expect(logged).not.toMatch(/Unhandled|SocketError|ECONNRESET/)
    expect((await runAs(cluster, "after-resets", "print('alive')")).text).toBe("alive")
  }, 60_000)
})
