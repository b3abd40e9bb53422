/**
 * The runner port's sockets with the mesh handshake (`MeshHandshake.ts`) in front: a
 * socket server that hands a connection to the RPC server only once its peer proved the
 * cluster secret (refused ones are logged and closed with nothing read past the
 * handshake), and a client connection that hands itself to the RPC client only once the
 * runner proved it. The handshake leaves the connection paused with any bytes after it
 * put back, and the socket reads it on demand from there. Nagle's algorithm is off on
 * both ends (a stream's small chunk and ack frames otherwise wait out the peer's
 * delayed ACK).
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import { Cause, Effect, Layer } from "effect"
import * as Socket from "effect/socket/Socket"
import { SocketServer, type SocketServerError } from "effect/socket/SocketServer"
import * as Net from "node:net"
import { clientHandshake, HANDSHAKE_TIMEOUT_MS, serverHandshake } from "./MeshHandshake.ts"

/** How a process proves itself on the mesh: the cluster secret, or nothing (`--insecure-no-auth`). */
export type MeshAuth = { readonly _tag: "Secret"; readonly secret: string } | { readonly _tag: "Insecure" }

const peerOf = (conn: Net.Socket): string =>
  conn.remoteAddress === undefined ? "an unknown peer" : `${conn.remoteAddress.includes(":") ? `[${conn.remoteAddress}]` : conn.remoteAddress}:${conn.remotePort}`

const openFailed = (cause: unknown) => new Socket.SocketError({ reason: new Socket.SocketOpenError({ kind: "Unknown", cause }) })

/** A connection's reads, writes or close failed once open: its peer went away (a reset, a runner or client stopping), no fault of this runner's. */
const peerWentAway = (error: unknown): boolean =>
  Socket.isSocketError(error) && error.reason._tag !== "SocketOpenError" && error.reason._tag !== "SocketUpgradeError"

/** Runs a connection's handler; a peer that went away (as a failure or a defect of the RPC server's) ends it with a debug line instead of the server's "unhandled error". */
const servePeer = <A, E, R>(conn: Net.Socket, serve: Effect.Effect<A, E, R>): Effect.Effect<A | void, E, R> =>
  Effect.catchCause(serve, (cause) => {
    const error = Cause.squash(cause)
    return peerWentAway(error) ? Effect.logDebug(`the connection from ${peerOf(conn)} ended: ${String(error)}`) : Effect.failCause(cause)
  })

/** The runner's socket server on `host:port`: with a secret, every connection first passes the handshake. */
export const layerMeshServer = (options: { readonly host: string; readonly port: number; readonly auth: MeshAuth }): Layer.Layer<SocketServer, SocketServerError> =>
  Layer.effect(
    SocketServer,
    Effect.map(NodeSocketServer.make({ host: options.host, port: options.port, noDelay: true }), (server) => {
      const auth = options.auth
      return SocketServer.of({
        address: server.address,
        run: <R, E, _>(handler: (socket: Socket.Socket) => Effect.Effect<_, E, R>) =>
          server.run((socket) =>
            NodeSocket.NetSocket.use((conn) =>
              auth._tag === "Insecure" ? servePeer(conn, handler(socket)) : serverHandshake(conn, auth.secret).pipe(
                Effect.matchEffect({
                  onFailure: (error) =>
                    Effect.andThen(
                      Effect.sync(() => conn.destroy()),
                      error.silent === true
                        ? Effect.logDebug(`a connection from ${peerOf(conn)} closed without sending anything (a liveness probe)`)
                        : Effect.logWarning(`refused a connection to the runner port from ${peerOf(conn)}: ${error.reason}; nothing it sent was read`)
                    ),
                  onSuccess: () => servePeer(conn, handler(socket))
                })
              )) as Effect.Effect<_ | void, E, R>
          )
      })
    })
  )

/** Opens a connection to a runner and passes the handshake (when there is a secret) before the RPC protocol uses it. */
export const connectMesh = (
  target: { readonly host: string; readonly port: number },
  auth: MeshAuth,
  openTimeoutMs: number
): Effect.Effect<Socket.Socket> =>
  NodeSocket.fromDuplex(
    Effect.gen(function*() {
      let conn: Net.Socket | undefined
      yield* Effect.addFinalizer(() => Effect.sync(() => conn?.destroy()))
      const socket = yield* Effect.callback<Net.Socket, Socket.SocketError>((resume) => {
        conn = Net.createConnection({ host: target.host, port: target.port, noDelay: true })
        conn.once("connect", () => resume(Effect.succeed(conn!)))
        conn.on("error", (cause) => resume(Effect.fail(openFailed(cause))))
      })
      if (auth._tag === "Secret") {
        yield* Effect.mapError(clientHandshake(socket, auth.secret), (error) =>
          openFailed(new Error(`the cluster handshake with the runner at ${target.host}:${target.port} failed: ${error.reason}`)))
      }
      return socket
    }),
    { openTimeout: openTimeoutMs + (auth._tag === "Insecure" ? 0 : HANDSHAKE_TIMEOUT_MS) }
  )
