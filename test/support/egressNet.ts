/**
 * Local destinations for the egress tests, on an address that is not loopback (the proxy
 * refuses loopback by design): a veth pair with one 10.x address on one end, created and
 * removed by the test (root and iproute2 needed), an HTTP and a self-signed HTTPS
 * origin listening on it (openssl makes the certificate, for the name `origin.test`).
 */
import { execFileSync } from "node:child_process"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as NodeHttp from "node:http"
import * as NodeHttps from "node:https"
import type * as NodeNet from "node:net"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"

/** The name the origin's certificate is for. */
export const ORIGIN_NAME = "origin.test"

/** Why the test link cannot be made here, or undefined when it can. */
export const testLinkUnavailable = (): string | undefined => {
  if (process.platform !== "linux") return "veth pairs need Linux"
  if (process.getuid?.() !== 0) return "creating a network interface needs root"
  for (const [tool, args] of [["ip", ["-V"]], ["openssl", ["version"]]] as const) {
    try {
      execFileSync(tool, args, { stdio: "ignore" })
    } catch {
      return `${tool} is not installed (Debian: apt-get install ${tool === "ip" ? "iproute2" : "openssl"})`
    }
  }
  return undefined
}

/** A veth pair holding one address, and how to remove it. */
export interface TestLink {
  readonly address: string
  readonly remove: () => void
}

/** Creates a veth pair with a random 10.x.y.1 address on one end, both ends up. */
export const createTestLink = (): TestLink => {
  const name = `veg${NodeCrypto.randomBytes(3).toString("hex")}`
  const [x, y] = NodeCrypto.randomBytes(2)
  const address = `10.${200 + (x! % 50)}.${y}.1`
  execFileSync("ip", ["link", "add", name, "type", "veth", "peer", "name", `${name}p`])
  try {
    execFileSync("ip", ["addr", "add", `${address}/32`, "dev", name])
    execFileSync("ip", ["link", "set", name, "up"])
    execFileSync("ip", ["link", "set", `${name}p`, "up"])
  } catch (error) {
    execFileSync("ip", ["link", "del", name])
    throw error
  }
  return { address, remove: () => execFileSync("ip", ["link", "del", name], { stdio: "ignore" }) }
}

/** A self-signed certificate for ORIGIN_NAME: key and certificate PEM, and the certificate's file (for clients' trust). */
export interface OriginCert {
  readonly key: string
  readonly cert: string
  readonly certFile: string
  readonly dir: string
}

/** Makes the certificate in a fresh temporary directory (remove `dir` afterwards). */
export const makeOriginCert = (): OriginCert => {
  const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "egress-cert-"))
  const keyFile = NodePath.join(dir, "key.pem")
  const certFile = NodePath.join(dir, "cert.pem")
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", `/CN=${ORIGIN_NAME}`,
    "-addext", `subjectAltName=DNS:${ORIGIN_NAME}`, "-keyout", keyFile, "-out", certFile
  ], { stdio: "ignore" })
  return { key: NodeFs.readFileSync(keyFile, "utf8"), cert: NodeFs.readFileSync(certFile, "utf8"), certFile, dir }
}

/** The origins: each answers `<scheme> <method> <path> host=<Host header>` (and `/big?n=N` with N bytes). */
export interface Origins {
  readonly httpPort: number
  readonly httpsPort: number
  /** Every request the origins saw, as `scheme method path`. */
  readonly seen: Array<string>
  readonly close: () => Promise<void>
}

const FILLER = Buffer.alloc(64 * 1024, 120)

/** Answers 200 with `size` bytes of filler, written as the response drains. */
export const sendBytes = (res: NodeHttp.ServerResponse, size: number, headers: NodeHttp.OutgoingHttpHeaders = {}): void => {
  res.writeHead(200, { ...headers, "content-length": size })
  let left = size
  const pump = (): void => {
    while (left > 0) {
      const part = FILLER.subarray(0, Math.min(left, FILLER.length))
      left -= part.length
      if (!res.write(part)) return void res.once("drain", pump)
    }
    res.end()
  }
  pump()
}

const answer = (scheme: string, seen: Array<string>) => (req: NodeHttp.IncomingMessage, res: NodeHttp.ServerResponse) => {
  seen.push(`${scheme} ${req.method} ${req.url}`)
  const url = new URL(req.url ?? "/", "http://x")
  if (url.pathname === "/big") return sendBytes(res, Number(url.searchParams.get("n") ?? "0"))
  let body = ""
  req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/plain", "x-hop": "kept", connection: "close, x-hop" })
    res.end(`${scheme} ${req.method} ${req.url} host=${req.headers.host}${body === "" ? "" : ` body=${body}`}`)
  })
}

const listen = (server: NodeNet.Server, address: string): Promise<number> =>
  new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, address, () => resolve((server.address() as NodeNet.AddressInfo).port))
  })

/** Starts an HTTP and an HTTPS origin on `address`. */
export const startOrigins = async (address: string, cert: OriginCert): Promise<Origins> => {
  const seen: Array<string> = []
  const http = NodeHttp.createServer(answer("http", seen))
  const https = NodeHttps.createServer({ key: cert.key, cert: cert.cert }, answer("https", seen))
  const httpPort = await listen(http, address)
  const httpsPort = await listen(https, address)
  const close = (server: NodeHttp.Server) =>
    new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  return { httpPort, httpsPort, seen, close: async () => void (await Promise.all([close(http), close(https)])) }
}

/** A test link, a certificate and the origins on it, with one `close` that ends all three. */
export interface OriginNetwork {
  readonly link: TestLink
  readonly cert: OriginCert
  readonly origins: Origins
  readonly close: () => Promise<void>
}

/** Creates a test link, makes a certificate and starts the origins on the link; removes what it made if a step fails. */
export const startOriginNetwork = async (): Promise<OriginNetwork> => {
  const link = createTestLink()
  const cert = makeOriginCert()
  const removeRest = () => {
    link.remove()
    NodeFs.rmSync(cert.dir, { recursive: true, force: true })
  }
  try {
    const origins = await startOrigins(link.address, cert)
    return { link, cert, origins, close: async () => {
      await origins.close()
      removeRest()
    } }
  } catch (error) {
    removeRest()
    throw error
  }
}
