/**
 * Whether a runner still answers at its advertised address: a TCP connect, closed at once.
 * A killed runner's port refuses at once; a lost host times out. Used to tell a runner
 * that is handing a session off (still finishing its cell) from one that is gone.
 */
import { Effect } from "effect"
import * as net from "node:net"

const splitHostPort = (address: string): { readonly host: string; readonly port: number } | undefined => {
  const match = /^\[([^\]]+)\]:(\d+)$/.exec(address) ?? /^([^:]+):(\d+)$/.exec(address)
  return match === null ? undefined : { host: match[1]!, port: Number(match[2]) }
}

/** True when something accepts a TCP connection at `address` (host:port) within `timeoutMs`. */
export const answersAt = (address: string, timeoutMs: number): Effect.Effect<boolean> =>
  Effect.callback<boolean>((resume) => {
    const target = splitHostPort(address)
    if (target === undefined) return resume(Effect.succeed(false))
    const socket = net.connect({ host: target.host, port: target.port })
    const finish = (alive: boolean) => {
      socket.destroy()
      resume(Effect.succeed(alive))
    }
    socket.setTimeout(timeoutMs, () => finish(false))
    socket.once("connect", () => finish(true))
    socket.once("error", () => finish(false))
    return Effect.sync(() => socket.destroy())
  })
