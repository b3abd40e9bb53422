/**
 * The egress proxy's HTTP side on node:http (which does all HTTP parsing): `CONNECT host:port`
 * opens a byte-for-byte tunnel, an absolute-form request (`GET http://host/path`) is forwarded
 * as one request; each destination is admitted first and connected to its pinned addresses.
 * Refusals are answered with the readable responses of `Refusal`. Bounded by `EgressLimits`;
 * every socket's errors are handled, so a misbehaving client ends its own connection only.
 */
import * as NodeHttp from "node:http"
import type * as NodeNet from "node:net"
import type { Admission } from "./Admission.ts"
import { parsePort } from "./AllowHosts.ts"
import type { EgressEvent, EgressVia } from "./EgressEvent.ts"
import type { EgressLimits } from "./EgressLimits.ts"
import { ConnectFailed, connectPinned } from "./PinnedConnect.ts"
import { badRequestResponse, failureResponse, type ProxyResponse, rawResponse, refusalResponse } from "./Refusal.ts"

/** What the proxy server needs from its owner. */
export interface ProxyServerOptions {
  /** Decides about one destination. */
  readonly admit: (via: EgressVia, host: string, port: number) => Promise<Admission>
  readonly limits: EgressLimits
  /** Called with every destination decided about. */
  readonly report: (event: EgressEvent) => void
}

/** What the proxy has carried so far. */
export interface EgressUsage {
  /** Client connections open now. */
  readonly connections: number
  /** Bytes relayed in both directions so far. */
  readonly bytes: number
}

/** A proxy server, not yet listening, with its bookkeeping. */
export interface ProxyServer {
  readonly server: NodeHttp.Server
  readonly usage: () => EgressUsage
  /** Destroys every client and upstream socket. */
  readonly destroyAll: () => void
}

/** Hop-by-hop headers, which a proxy does not forward (RFC 9110 section 7.6.1), and the proxy's own. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade"
])

/** Raw header pairs without the hop-by-hop ones and those the Connection header names. */
export const endToEndHeaders = (raw: ReadonlyArray<string>): Array<[string, string]> => {
  const named = new Set<string>()
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === "connection") {
      for (const token of raw[i + 1]!.split(",")) named.add(token.trim().toLowerCase())
    }
  }
  const kept: Array<[string, string]> = []
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase()
    if (!HOP_BY_HOP.has(name) && !named.has(name)) kept.push([raw[i]!, raw[i + 1]!])
  }
  return kept
}

/** The host and port of a CONNECT target (`host:port`, `[v6]:port`), or undefined when it is not one. */
export const parseConnectTarget = (target: string): { readonly host: string; readonly port: number } | undefined => {
  const colon = target.lastIndexOf(":")
  if (colon <= 0) return undefined
  const port = parsePort(target.slice(colon + 1))
  return port === undefined ? undefined : { host: target.slice(0, colon), port }
}

const ignore = (): void => undefined

/** How long a socket answered and ended by the proxy may take to close from the client's side. */
const LINGER_MS = 2000

/** Writes a response the proxy composed, ends the socket, and destroys it if the client keeps it open. */
const endWith = (socket: NodeNet.Socket, response: ProxyResponse): void => {
  socket.end(rawResponse(response))
  socket.setTimeout(LINGER_MS, () => socket.destroy())
}

/** Builds the server (call `listen` on it) over the owner's admission, limits and reporting. */
export const createProxyServer = (options: ProxyServerOptions): ProxyServer => {
  const { limits, report } = options
  const sockets = new Set<NodeNet.Socket>()
  const rejected = new WeakSet<NodeNet.Socket>()
  let connections = 0
  let bytes = 0
  let budgetSpent = false

  const track = (socket: NodeNet.Socket): void => {
    sockets.add(socket)
    socket.on("error", ignore)
    socket.once("close", () => sockets.delete(socket))
  }

  const destroyAll = (): void => {
    for (const socket of sockets) socket.destroy()
  }

  const count = (chunk: Buffer): void => {
    bytes += chunk.length
    if (bytes > limits.maxBytes && !budgetSpent) {
      budgetSpent = true
      destroyAll()
    }
  }

  const budgetRefusal = (via: EgressVia, host: string, port: number): Extract<EgressEvent, { _tag: "Refused" }> => ({
    _tag: "Refused",
    via,
    host,
    port,
    reason: "byte-limit",
    detail: `this session has relayed its limit of ${limits.maxBytes} bytes`
  })

  const server = NodeHttp.createServer({
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: 0,
    connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
    keepAliveTimeout: 5000
  })
  server.timeout = limits.idleTimeoutMs

  server.on("connection", (socket: NodeNet.Socket) => {
    track(socket)
    if (connections >= limits.maxConnections) {
      rejected.add(socket)
      const event: EgressEvent = {
        _tag: "Refused",
        via: "connect",
        host: "",
        port: 0,
        reason: "connection-limit",
        detail: `this session already has its limit of ${limits.maxConnections} connections open`
      }
      report(event)
      endWith(socket, refusalResponse(event))
      return
    }
    connections++
    socket.once("close", () => connections--)
  })

  server.on("clientError", (error: NodeJS.ErrnoException, socket: NodeNet.Socket) => {
    if (!socket.writable || rejected.has(socket) || error.code === "ECONNRESET") {
      socket.destroy()
      return
    }
    const response = error.code === "HPE_HEADER_OVERFLOW"
      ? badRequestResponse(431, "Request Header Fields Too Large", `the request head is larger than ${limits.maxHeaderBytes} bytes.`)
      : error.code === "ERR_HTTP_REQUEST_TIMEOUT"
      ? badRequestResponse(408, "Request Timeout", `the request head did not arrive within ${limits.headersTimeoutMs} ms.`)
      : badRequestResponse(400, "Bad Request", `the request could not be read as HTTP (${error.code ?? error.message}).`)
    endWith(socket, response)
  })

  server.on("connect", (req: NodeHttp.IncomingMessage, socket: NodeNet.Socket, head: Buffer) => {
    socket.on("error", ignore)
    if (rejected.has(socket)) return void socket.destroy()
    const target = parseConnectTarget(req.url ?? "")
    if (target === undefined) {
      endWith(socket, badRequestResponse(400, "Bad Request", `CONNECT needs a host:port target, not ${JSON.stringify(req.url)}.`))
      return
    }
    if (budgetSpent) {
      const event = budgetRefusal("connect", target.host, target.port)
      report(event)
      endWith(socket, refusalResponse(event))
      return
    }
    socket.pause()
    void open("connect", target.host, target.port, () => socket.destroyed).then((outcome) => {
      if (outcome._tag === "Response") return endWith(socket, outcome.response)
      const upstream = outcome.socket
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n")
      if (head.length > 0) {
        count(head)
        upstream.write(head)
      }
      relay(socket, upstream)
    })
  })

  /** Admits and connects; the connected upstream socket, or the response to give instead. */
  const open = async (
    via: EgressVia,
    host: string,
    port: number,
    gone: () => boolean
  ): Promise<{ readonly _tag: "Socket"; readonly socket: NodeNet.Socket } | { readonly _tag: "Response"; readonly response: ProxyResponse }> => {
    let admission: Admission
    try {
      admission = await options.admit(via, host, port)
    } catch {
      return { _tag: "Response", response: badRequestResponse(503, "Service Unavailable", "the proxy is shutting down.") }
    }
    report(admission.event)
    if (admission._tag === "Denied") {
      const event = admission.event
      return { _tag: "Response", response: event._tag === "Refused" ? refusalResponse(event) : failureResponse(event, false) }
    }
    const allowed = admission.event
    try {
      const upstream = await connectPinned(allowed.addresses, port, limits.connectTimeoutMs)
      if (gone() || budgetSpent) {
        upstream.destroy()
        const event = budgetRefusal(via, allowed.host, port)
        if (budgetSpent) report(event)
        return { _tag: "Response", response: refusalResponse(event) }
      }
      track(upstream)
      return { _tag: "Socket", socket: upstream }
    } catch (error) {
      const failed = error instanceof ConnectFailed ? error : new ConnectFailed(String(error), false)
      const event: Extract<EgressEvent, { _tag: "Failed" }> = { _tag: "Failed", via, host: allowed.host, port, detail: failed.detail }
      report(event)
      return { _tag: "Response", response: failureResponse(event, failed.timedOut) }
    }
  }

  /** Relays both ways until either side ends; an error, a time-out or an abrupt close on one side ends both. */
  const relay = (client: NodeNet.Socket, upstream: NodeNet.Socket): void => {
    for (const [from, to] of [[client, upstream], [upstream, client]] as const) {
      from.on("data", count)
      from.setTimeout(limits.idleTimeoutMs, () => {
        from.destroy()
        to.destroy()
      })
      from.on("error", () => to.destroy())
      from.once("close", () => {
        if (!to.writableEnded) to.destroy()
      })
      from.pipe(to)
    }
    client.resume()
  }

  server.on("request", (req: NodeHttp.IncomingMessage, res: NodeHttp.ServerResponse) => {
    if (rejected.has(req.socket)) return void req.socket.destroy()
    const respond = (response: ProxyResponse): void => {
      if (res.headersSent) return void res.destroy()
      res.writeHead(response.status, response.statusText, {
        "content-type": "text/plain; charset=utf-8",
        "content-length": Buffer.byteLength(response.body),
        "x-veyyon-egress": response.outcome
      })
      res.end(response.body)
    }
    let url: URL
    try {
      url = new URL(req.url ?? "")
    } catch {
      return respond(badRequestResponse(
        400,
        "Bad Request",
        "this is the sandbox's egress proxy: send absolute-form requests (GET http://host/path) or CONNECT host:port."
      ))
    }
    if (url.protocol !== "http:") {
      return respond(badRequestResponse(400, "Bad Request", `${url.protocol}// URLs go through CONNECT host:port, not as plain requests.`))
    }
    const port = url.port === "" ? 80 : Number(url.port)
    const host = url.hostname
    if (budgetSpent) {
      const event = budgetRefusal("http", host, port)
      report(event)
      return respond(refusalResponse(event))
    }
    req.pause()
    void open("http", host, port, () => res.destroyed).then((outcome) => {
      if (outcome._tag === "Response") return respond(outcome.response)
      const upstream = outcome.socket
      const forward = NodeHttp.request({
        createConnection: () => upstream,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers: endToEndHeaders(req.rawHeaders).flat(),
        setHost: false
      })
      forward.on("error", (error) => respond(failureResponse({ _tag: "Failed", via: "http", host, port, detail: error.message }, false)))
      forward.on("response", (answer) => {
        answer.on("data", count)
        answer.on("error", () => res.destroy())
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEndHeaders(answer.rawHeaders).flat())
        answer.pipe(res)
      })
      res.once("close", () => {
        if (!res.writableFinished) upstream.destroy()
      })
      req.on("data", count)
      req.pipe(forward)
      req.resume()
    })
  })

  server.on("upgrade", (_req: NodeHttp.IncomingMessage, socket: NodeNet.Socket) => {
    socket.on("error", ignore)
    endWith(socket, badRequestResponse(501, "Not Implemented", "protocol upgrades go through CONNECT host:port."))
  })

  return { server, usage: () => ({ connections, bytes }), destroyAll }
}
