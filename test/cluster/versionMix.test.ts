/**
 * A runner of this release meeting peers of other releases on its port: a raw socket
 * speaking the old `VYMESH1` handshake, a handshake claiming a future protocol, and
 * requests stating a future protocol or none. Each is refused with a sentence naming both
 * versions (in the runner's log, and to a caller of this release), nothing runs, and the
 * runner keeps serving its own clients.
 */
import { Effect, Exit, Layer, ManagedRuntime, Result } from "effect"
import * as RpcClient from "effect/rpc/RpcClient"
import * as fs from "node:fs"
import * as Net from "node:net"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { resolveClusterSettings } from "../../src/cluster/ClusterSettings.ts"
import { clientShardingLayer, postgresLayer } from "../../src/cluster/ClusterTransport.ts"
import { KernelSession } from "../../src/cluster/KernelSession.ts"
import { clientHandshake, SERVER_HELLO_BYTES } from "../../src/cluster/MeshHandshake.ts"
import { EFFECT_VERSION, LOCAL_VERSIONS, VERSIONS_HEADER, versionsHeaderValue } from "../../src/cluster/ProtocolVersion.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { postgresSkipReason } from "../support/postgres.ts"
import { integrationEnabled } from "../support/python.ts"
import { titled } from "../support/skip.ts"
import { LOCK_EXPIRATION_MS, startCluster, type TestCluster } from "./support.ts"

const skipReason = !integrationEnabled() ? "set VEYYON_PYTHON_INTEGRATION=1 to run the cluster tests" : postgresSkipReason()

const portOf = (cluster: TestCluster): number => Number(cluster.runners[0]!.address.split(":")[1])

const connect = (port: number) =>
  new Promise<Net.Socket>((resolve, reject) => {
    const conn = Net.createConnection({ host: "127.0.0.1", port })
    conn.once("connect", () => resolve(conn))
    conn.once("error", reject)
  })

const waitFor = async (check: () => boolean, ms: number) => {
  const deadline = Date.now() + ms
  while (Date.now() < deadline && !check()) await new Promise((resolve) => setTimeout(resolve, 100))
  return check()
}

describe.skipIf(skipReason !== undefined)(titled("a runner meeting peers of other releases", skipReason), () => {
  let cluster: TestCluster

  beforeAll(async () => {
    cluster = await startCluster(1)
  }, 180_000)

  afterAll(async () => {
    await cluster?.stop()
  }, 120_000)

  const stillServes = async (sessionId: string) => {
    const result = await cluster.client.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code: "print('alive')" }, { sessionId, cwd: cluster.dir })))
    expect(result.text).toBe("alive")
  }

  it("refuses a peer speaking the old VYMESH1 handshake, naming protocols 1 and 2, and sends it nothing past its hello", async () => {
    const conn = await connect(portOf(cluster))
    const received: Array<Buffer> = []
    let closed = false
    conn.on("data", (chunk: Buffer) => {
      received.push(chunk)
      if (Buffer.concat(received).length >= SERVER_HELLO_BYTES && received.length > 0 && !conn.destroyed) {
        conn.write(Buffer.concat([Buffer.from("VYMESH1\n", "latin1"), Buffer.alloc(64, 3)]))
      }
    })
    conn.on("close", () => (closed = true))
    try {
      expect(await waitFor(() => closed, 20_000)).toBe(true)
      expect(Buffer.concat(received).length).toBe(SERVER_HELLO_BYTES)
      expect(await waitFor(() => /the peer speaks cluster protocol 1 \(a release from before protocol versions were stated\)/.test(cluster.runners[0]!.log()), 10_000)).toBe(true)
      expect(cluster.runners[0]!.log()).toMatch(/refused a connection to the runner port from 127\.0\.0\.1:\d+: this process speaks cluster protocol 2 /)
    } finally {
      conn.destroy()
    }
    await stillServes("after-vymesh1")
  }, 120_000)

  it("refuses a handshake claiming a future protocol on both sides, each naming both versions", async () => {
    const conn = await connect(portOf(cluster))
    try {
      const exit = await Effect.runPromiseExit(clientHandshake(conn, cluster.secret, 10_000, { protocol: 3, oldest: 3, effect: EFFECT_VERSION }))
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(
        /this process speaks cluster protocol 3 \(talks with 3 and newer\) .* the runner speaks cluster protocol 2 \(talks with 2 and newer\) .*the runner is too old for this release/
      )
    } finally {
      conn.destroy()
    }
    expect(await waitFor(() => /the peer speaks cluster protocol 3 \(talks with 3 and newer\)/.test(cluster.runners[0]!.log()), 10_000)).toBe(true)
    await stillServes("after-future-handshake")
  }, 120_000)

  it("answers a request stating a future protocol, or none, with ProtocolMismatch naming both versions, and runs nothing", async () => {
    const settings = resolveClusterSettings({ postgresUrl: cluster.pg.url, secret: cluster.secret, shardLockExpirationMs: LOCK_EXPIRATION_MS }, {})
    if (Result.isFailure(settings)) throw new Error(settings.failure.message)
    const raw = ManagedRuntime.make(clientShardingLayer(settings.success).pipe(Layer.provide(postgresLayer(settings.success))))
    const marker = path.join(cluster.dir, "mismatch-marker")
    const execute = (headers: Record<string, string>, callId: string) =>
      raw.runPromiseExit(Effect.flatMap(KernelSession.client, (clientOf) =>
        clientOf("mix").Execute({ params: { language: "py", code: `open(${JSON.stringify(marker)}, "w").write("ran")` }, callId, from: 0 }).pipe(
          RpcClient.withHeaders(headers),
          Effect.timeout(60_000)
        )))
    try {
      const future = await execute({ [VERSIONS_HEADER]: `9 9 ${EFFECT_VERSION}` }, "future-call")
      expect(Exit.isFailure(future) && String(future.cause)).toMatch(
        /ProtocolMismatch.*this process speaks cluster protocol 2 .* the caller speaks cluster protocol 9 \(talks with 9 and newer\)/
      )
      const unversioned = await execute({}, "unversioned-call")
      expect(Exit.isFailure(unversioned) && String(unversioned.cause)).toMatch(/ProtocolMismatch.*the caller speaks cluster protocol 1 /)
      const otherEffect = await execute({ [VERSIONS_HEADER]: "2 2 4.0.0-other" }, "effect-call")
      expect(Exit.isFailure(otherEffect) && String(otherEffect.cause)).toMatch(/ProtocolMismatch.*on effect 4\.0\.0-other.*same effect version/)
      await new Promise((resolve) => setTimeout(resolve, 1000))
      expect(fs.existsSync(marker)).toBe(false)
      const ours = await execute({ [VERSIONS_HEADER]: versionsHeaderValue(LOCAL_VERSIONS) }, "our-call")
      expect(Exit.isSuccess(ours)).toBe(true)
      expect(await waitFor(() => fs.existsSync(marker), 60_000)).toBe(true)
    } finally {
      await raw.dispose()
    }
  }, 180_000)
})
