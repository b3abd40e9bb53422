/**
 * An attacker of a runner's port, built from the same cluster library pieces our transport
 * uses and holding no secret and no Postgres password: a client-only sharding that knows
 * one runner address, sending `KernelSession` calls straight to it (stating this release's
 * protocol version, as any real client's request shows it). `captureExecute`
 * records the bytes such a client sends for one `Execute` (to a local listener that never
 * answers), so another user or a cell can replay them with nothing but Python
 * (`REPLAY_PY`).
 */
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import { Effect, Exit, Layer } from "effect"
import * as MessageStorage from "effect/cluster/MessageStorage"
import { Runner } from "effect/cluster/Runner"
import { RunnerAddress } from "effect/cluster/RunnerAddress"
import * as RunnerStorage from "effect/cluster/RunnerStorage"
import * as ShardingConfig from "effect/cluster/ShardingConfig"
import * as SocketRunner from "effect/cluster/SocketRunner"
import * as net from "node:net"
import { DEFAULT_SHARDS } from "../../src/cluster/ClusterSettings.ts"
import { layerClusterSerialization } from "../../src/cluster/ClusterTransport.ts"
import { KernelSession } from "../../src/cluster/KernelSession.ts"
import { stateVersions } from "../../src/cluster/ProtocolVersion.ts"

/** The library's client-only sharding aimed at the runner at `host:port`, with no secret and no database. */
export const attackerSharding = (host: string, port: number) => {
  const storage = Layer.effect(
    RunnerStorage.RunnerStorage,
    Effect.tap(RunnerStorage.makeMemory, (store) =>
      store.register(new Runner({ address: RunnerAddress.make({ host, port }), groups: ["default"], weight: 1 }), true))
  )
  return SocketRunner.layerClientOnly.pipe(
    Layer.provide(NodeClusterSocket.layerClientProtocol),
    Layer.provide(storage),
    Layer.provide(MessageStorage.layerNoop),
    Layer.provide(ShardingConfig.layer({ shardsPerGroup: DEFAULT_SHARDS })),
    Layer.provide(layerClusterSerialization)
  )
}

/** Sends `Execute(code)` for `sessionId` to the runner at `host:port`; what came back within `timeoutMs`, or how it failed. */
export const attackExecute = (host: string, port: number, sessionId: string, code: string, timeoutMs: number) =>
  Effect.runPromiseExit(
    Effect.gen(function*() {
      const clientOf = yield* KernelSession.client
      return yield* clientOf(sessionId).Execute({ params: { language: "py", code }, callId: `attack-${Date.now()}`, from: 0 })
    }).pipe(stateVersions, Effect.timeout(timeoutMs), Effect.scoped, Effect.provide(attackerSharding(host, port)))
  )

/**
 * The bytes the library client sends for `Execute(code)` on `sessionId`, recorded by a
 * listener that never answers: those of its first second (the request; the call's
 * interruption when it gives up comes later and is left out).
 */
export const captureExecute = async (sessionId: string, code: string): Promise<Buffer> => {
  const chunks: Array<Buffer> = []
  const sockets = new Set<net.Socket>()
  let recording = true
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on("data", (chunk: Buffer) => {
      if (!recording) return
      if (chunks.length === 0) setTimeout(() => (recording = false), 1000)
      chunks.push(chunk)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  try {
    const exit = await attackExecute("127.0.0.1", port, sessionId, code, 4000)
    if (Exit.isSuccess(exit)) throw new Error("the capturing listener answered nothing, yet the call succeeded")
    const bytes = Buffer.concat(chunks)
    if (bytes.length === 0) throw new Error("the library client sent nothing to capture")
    return bytes
  } finally {
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/**
 * Python that connects to argv[1]:argv[2], sends the bytes of hex argv[3] and prints, as
 * JSON, what came back within argv[4] seconds and whether the peer closed the connection.
 */
export const REPLAY_PY = `
import json, socket, sys, time
def replay(host, port, payload, seconds):
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(payload)
    got, closed, deadline = b"", False, time.time() + seconds
    while time.time() < deadline:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except OSError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        got += chunk
    s.close()
    return {"received": got.hex(), "closed": closed}
if __name__ == "__main__":
    print(json.dumps(replay(sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3]), float(sys.argv[4]))))
`

/** What a replay saw. */
export interface ReplayOutcome {
  readonly received: Buffer
  readonly closed: boolean
}

/** Reads `REPLAY_PY`'s printed line. */
export const replayOutcome = (line: string): ReplayOutcome => {
  const parsed = JSON.parse(line.trim().split("\n").pop()!) as { received: string; closed: boolean }
  return { received: Buffer.from(parsed.received, "hex"), closed: parsed.closed }
}
