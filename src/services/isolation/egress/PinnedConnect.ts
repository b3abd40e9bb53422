/**
 * Opens the upstream TCP connection of an admitted destination to the addresses its
 * admission checked, one after another until one answers: the name is never resolved again,
 * so a resolver that answers differently the second time cannot redirect it.
 */
import * as NodeNet from "node:net"

/** Why no address could be reached: the last error, and whether every attempt timed out. */
export class ConnectFailed extends Error {
  constructor(readonly detail: string, readonly timedOut: boolean) {
    super(detail)
  }
}

const connectOne = (address: string, port: number, timeoutMs: number): Promise<NodeNet.Socket> =>
  new Promise((resolve, reject) => {
    const socket = NodeNet.connect({ host: address, port, noDelay: true })
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new ConnectFailed(`connecting to ${address} port ${port} timed out after ${timeoutMs} ms`, true))
    }, timeoutMs)
    socket.once("connect", () => {
      clearTimeout(timer)
      socket.removeAllListeners("error")
      resolve(socket)
    })
    socket.once("error", (error: NodeJS.ErrnoException) => {
      clearTimeout(timer)
      socket.destroy()
      reject(new ConnectFailed(`connecting to ${address} port ${port} failed (${error.code ?? error.message})`, false))
    })
  })

/** A connected socket to the first of `addresses` that accepts on `port`, or the `ConnectFailed` of the last attempt. */
export const connectPinned = async (addresses: ReadonlyArray<string>, port: number, timeoutMs: number): Promise<NodeNet.Socket> => {
  let last = new ConnectFailed("no address to connect to", false)
  for (const address of addresses) {
    try {
      return await connectOne(address, port, timeoutMs)
    } catch (error) {
      last = error instanceof ConnectFailed ? error : new ConnectFailed(String(error), false)
    }
  }
  throw last
}
