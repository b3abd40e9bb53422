/**
 * The in-sandbox egress forwarder: relays 127.0.0.1:<port> to the host's egress proxy socket.
 *
 * In a sandbox with `sandbox.network: allowlist` the kernel has its own network namespace with
 * only a loopback interface; the host's egress proxy is a Unix socket bound into it. When the
 * environment names that socket (VEYYON_EGRESS_SOCKET) and a port (VEYYON_EGRESS_PORT),
 * `startEgressForwarder` listens on 127.0.0.1:<port> and relays every connection byte for byte
 * to the socket, so clients configured through HTTP_PROXY/HTTPS_PROXY and NODE_USE_ENV_PROXY
 * work unchanged. The forwarder runs in a worker thread with its own event loop, so a cell
 * that blocks the main thread (execSync("npm install"), a busy loop) does not stall it; the
 * worker is unref'd, writes nothing to stdout or stderr, and never sees a signal.
 */
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import * as net from "node:net"

/** The variable naming the host proxy's Unix socket. */
export const SOCKET_ENV = "VEYYON_EGRESS_SOCKET"
/** The variable naming the loopback port to listen on. */
export const PORT_ENV = "VEYYON_EGRESS_PORT"

/** Relays one accepted connection to the socket at `path`; an error or abrupt close on either side ends both. */
const relay = (client, path) => {
  const upstream = net.connect(path)
  for (const [from, to] of [[client, upstream], [upstream, client]]) {
    from.on("error", () => to.destroy())
    from.once("close", () => {
      if (!to.writableEnded) to.destroy()
    })
    from.pipe(to)
  }
}

/** Serves the forwarder in this (worker) thread; reports "listening" or the error to the parent. */
const serveInWorker = ({ path, port }) => {
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => relay(client, path))
  server.on("error", (error) => parentPort.postMessage({ error: error.message }))
  server.listen(port, "127.0.0.1", () => parentPort.postMessage({ listening: true }))
}

/**
 * Starts the forwarder when `env` names the socket and port. Resolves once it listens (so the
 * first cell finds it) with the worker, or with undefined when the variables are unset, the
 * port is no port or it cannot listen (then one diagnostic line says why).
 */
export const startEgressForwarder = (env, diagnose) => {
  const path = env[SOCKET_ENV]
  const portText = env[PORT_ENV]
  if (!path || !portText) return Promise.resolve(undefined)
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0
  if (port < 1 || port > 65535) {
    diagnose(`egress forwarder not started: ${PORT_ENV}=${JSON.stringify(portText)} is not a port from 1 to 65535`)
    return Promise.resolve(undefined)
  }
  const worker = new Worker(new URL(import.meta.url), { workerData: { path, port }, stdout: true, stderr: true, env: {} })
  worker.unref()
  return new Promise((resolve) => {
    worker.on("message", (message) => {
      if (message.listening === true) return resolve(worker)
      if (message.error !== undefined) diagnose(`egress forwarder not started: cannot listen on 127.0.0.1:${port}: ${message.error}`)
      resolve(undefined)
    })
    worker.on("error", (error) => {
      diagnose(`egress forwarder failed: ${error?.message ?? error}`)
      resolve(undefined)
    })
  })
}

if (!isMainThread && workerData?.port !== undefined && workerData?.path !== undefined) serveInWorker(workerData)
