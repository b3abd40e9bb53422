/**
 * The egress proxy's cost, side by side in one run: a small download (latency, a new
 * connection each time, as a client's first request) and a large one (throughput), each
 * direct to a local origin and through a proxy on its Unix socket, as a plain HTTP request
 * (absolute form) and inside a CONNECT tunnel (what HTTPS clients do), the three alternated
 * round by round. The origin listens on a veth address the script creates and removes
 * (root and iproute2 needed; loopback is refused by the proxy by design).
 *
 *   node --import tsx bench/egress.ts [smallRounds=300] [largeRounds=6] [largeMiB=256]
 */
import * as NodeFs from "node:fs"
import * as NodeHttp from "node:http"
import * as NodeNet from "node:net"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { Effect, Exit, Result, Scope } from "effect"
import { parseAllowHosts } from "../src/services/isolation/egress/AllowHosts.ts"
import { makeEgressProxy } from "../src/services/isolation/egress/EgressProxy.ts"
import { EgressResolver } from "../src/services/isolation/egress/EgressResolver.ts"
import { createTestLink, sendBytes, testLinkUnavailable } from "../test/support/egressNet.ts"

const [smallRounds = 300, largeRounds = 6, largeMiB = 256] = process.argv.slice(2).map(Number)
const SMALL_BYTES = 1024
const NAME = "origin.test"

type Path = "direct" | "proxy http" | "proxy CONNECT"
const PATHS: ReadonlyArray<Path> = ["direct", "proxy http", "proxy CONNECT"]

/** Reads a whole response from an HTTP/1.1 exchange on `socket` with `Connection: close`; its body length. */
const exchange = (socket: NodeNet.Socket, head: string): Promise<number> =>
  new Promise((resolve, reject) => {
    let received = 0
    let headerEnd = -1
    let buffered = Buffer.alloc(0)
    socket.on("data", (chunk: Buffer) => {
      if (headerEnd === -1) {
        buffered = Buffer.concat([buffered, chunk])
        headerEnd = buffered.indexOf("\r\n\r\n")
        if (headerEnd !== -1) received = buffered.length - headerEnd - 4
      } else received += chunk.length
    })
    socket.on("end", () => resolve(received))
    socket.on("error", reject)
    socket.write(head)
  })

const connectTcp = (host: string, port: number) =>
  new Promise<NodeNet.Socket>((resolve, reject) => {
    const socket = NodeNet.connect({ host, port, noDelay: true }, () => resolve(socket))
    socket.once("error", reject)
  })

const connectUnix = (path: string) =>
  new Promise<NodeNet.Socket>((resolve, reject) => {
    const socket = NodeNet.connect({ path }, () => resolve(socket))
    socket.once("error", reject)
  })

/** Opens a CONNECT tunnel through the proxy and waits for its 200. */
const tunnel = async (socketPath: string, port: number): Promise<NodeNet.Socket> => {
  const socket = await connectUnix(socketPath)
  await new Promise<void>((resolve, reject) => {
    let text = ""
    const onData = (chunk: Buffer) => {
      text += chunk.toString("latin1")
      if (!text.includes("\r\n\r\n")) return
      socket.off("data", onData)
      return text.startsWith("HTTP/1.1 200") ? resolve() : reject(new Error(text.split("\r\n")[0]))
    }
    socket.on("data", onData)
    socket.write(`CONNECT ${NAME}:${port} HTTP/1.1\r\nHost: ${NAME}:${port}\r\n\r\n`)
  })
  return socket
}

/** One download of `bytes` over `path`; milliseconds taken and bytes received. */
const download = async (path: Path, address: string, port: number, socketPath: string, bytes: number) => {
  const target = `/big?n=${bytes}`
  const started = process.hrtime.bigint()
  const socket = path === "direct" ? await connectTcp(address, port) : path === "proxy http" ? await connectUnix(socketPath) : await tunnel(socketPath, port)
  const requestTarget = path === "proxy http" ? `http://${NAME}:${port}${target}` : target
  const got = await exchange(socket, `GET ${requestTarget} HTTP/1.1\r\nHost: ${NAME}:${port}\r\nConnection: close\r\n\r\n`)
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  socket.destroy()
  if (got !== bytes) throw new Error(`${path}: got ${got} of ${bytes} bytes`)
  return ms
}

const quantile = (sorted: ReadonlyArray<number>, q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!

const main = async () => {
  const unavailable = testLinkUnavailable()
  if (unavailable !== undefined) {
    console.log(`egress bench skipped: ${unavailable}`)
    return
  }
  const link = createTestLink()
  const stateDir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "egress-bench-"))
  const origin = NodeHttp.createServer((req, res) =>
    sendBytes(res, Number(new URL(req.url ?? "/", "http://x").searchParams.get("n") ?? "0"), { connection: "close" })
  )
  const scope = await Effect.runPromise(Scope.make())
  try {
    const port = await new Promise<number>((resolve) => origin.listen(0, link.address, () => resolve((origin.address() as NodeNet.AddressInfo).port)))
    const allow = Result.getOrThrow(parseAllowHosts([NAME]))
    const proxy = await Effect.runPromise(
      makeEgressProxy({ allow, directory: stateDir }).pipe(
        Effect.provide(EgressResolver.layerTest({ [NAME]: [link.address] })),
        Scope.provide(scope)
      )
    )
    const small: Record<Path, Array<number>> = { direct: [], "proxy http": [], "proxy CONNECT": [] }
    const large: Record<Path, Array<number>> = { direct: [], "proxy http": [], "proxy CONNECT": [] }
    for (let round = 0; round < 20; round++) for (const path of PATHS) await download(path, link.address, port, proxy.socketPath, SMALL_BYTES)
    for (let round = 0; round < smallRounds; round++) {
      for (const path of PATHS) small[path].push(await download(path, link.address, port, proxy.socketPath, SMALL_BYTES))
    }
    const largeBytes = largeMiB * 1024 * 1024
    for (let round = 0; round < largeRounds; round++) {
      for (const path of PATHS) large[path].push(await download(path, link.address, port, proxy.socketPath, largeBytes))
    }
    const lines = [
      `| path | ${SMALL_BYTES} B download, median ms | p90 ms | ${largeMiB} MiB download, median MB/s | slowest MB/s |`,
      "|---|---|---|---|---|"
    ]
    for (const path of PATHS) {
      const s = [...small[path]].sort((a, b) => a - b)
      const rates = large[path].map((ms) => largeBytes / 1e6 / (ms / 1000)).sort((a, b) => a - b)
      lines.push(`| ${path} | ${quantile(s, 0.5).toFixed(3)} | ${quantile(s, 0.9).toFixed(3)} | ${quantile(rates, 0.5).toFixed(0)} | ${rates[0]!.toFixed(0)} |`)
    }
    console.log(`${smallRounds} small and ${largeRounds} large rounds, the three paths alternated; node ${process.version}, ${NodeOs.cpus().length} CPUs (${NodeOs.cpus()[0]?.model ?? "?"})`)
    console.log(lines.join("\n"))
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    await new Promise<void>((resolve) => origin.close(() => resolve()))
    origin.closeAllConnections()
    link.remove()
    NodeFs.rmSync(stateDir, { recursive: true, force: true })
  }
}

await main()
