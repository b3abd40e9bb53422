/**
 * Clients that talk to the egress proxy's Unix socket as proxy clients do: node:http with an
 * absolute-form request, a CONNECT tunnel with TLS inside (trusting the test origin's
 * certificate), and raw bytes for misbehaving clients.
 */
import * as NodeHttp from "node:http"
import * as NodeNet from "node:net"
import * as NodeTls from "node:tls"

/** A response as read by a client. */
export interface Reply {
  readonly status: number
  readonly headers: NodeHttp.IncomingHttpHeaders
  readonly body: string
}

/** A plain HTTP request through the proxy: in absolute form (`GET http://host:port/path`) when `url` is one. */
export const httpViaProxy = (socketPath: string, url: string, options: { method?: string; body?: string } = {}): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const host = URL.canParse(url) ? new URL(url).host : "proxy"
    const req = NodeHttp.request({ socketPath, path: url, method: options.method ?? "GET", headers: { host }, agent: false })
    req.on("response", (res) => {
      let body = ""
      res.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end(options.body)
  })

/** Everything a socket sends until it closes. */
export const readAll = (socket: NodeNet.Socket | NodeTls.TLSSocket): Promise<string> =>
  new Promise((resolve) => {
    let text = ""
    socket.on("data", (chunk: Buffer) => (text += chunk.toString("utf8")))
    socket.on("error", () => resolve(text))
    socket.on("close", () => resolve(text))
  })

/** Opens a raw connection to the proxy. */
export const rawConnection = (socketPath: string): Promise<NodeNet.Socket> =>
  new Promise((resolve, reject) => {
    const socket = NodeNet.connect(socketPath, () => resolve(socket))
    socket.once("error", reject)
  })

/** Sends `CONNECT authority` on a raw connection; the socket and the response head (and any body the proxy sent). */
export const connectViaProxy = async (socketPath: string, authority: string): Promise<{ readonly socket: NodeNet.Socket; readonly head: string; readonly status: number }> => {
  const socket = await rawConnection(socketPath)
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`)
  const head = await new Promise<string>((resolve) => {
    let text = ""
    const onData = (chunk: Buffer) => {
      text += chunk.toString("latin1")
      if (text.includes("\r\n\r\n")) {
        socket.off("data", onData)
        socket.pause()
        resolve(text)
      }
    }
    socket.on("data", onData)
    socket.on("close", () => resolve(text))
  })
  return { socket, head, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0) }
}

/** A refused CONNECT's whole response (head and body), read until the proxy closes. */
export const refusedConnect = async (socketPath: string, authority: string): Promise<{ readonly status: number; readonly text: string }> => {
  const { socket, head, status } = await connectViaProxy(socketPath, authority)
  socket.resume()
  const rest = await readAll(socket)
  return { status, text: head + rest }
}

/** GET `path` over TLS inside a CONNECT tunnel to `host:port`, trusting `ca`; the whole HTTP response text. */
export const httpsViaTunnel = async (socketPath: string, host: string, port: number, ca: string, path: string): Promise<string> => {
  const { socket, status, head } = await connectViaProxy(socketPath, `${host}:${port}`)
  if (status !== 200) throw new Error(`CONNECT answered ${head}`)
  const tls = NodeTls.connect({ socket, servername: host, ca })
  await new Promise<void>((resolve, reject) => {
    tls.once("secureConnect", () => resolve())
    tls.once("error", reject)
  })
  tls.write(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: close\r\n\r\n`)
  return readAll(tls)
}
