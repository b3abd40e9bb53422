/**
 * The runner port's sockets with the mesh handshake (`MeshHandshake.ts`) in front: a
 * socket server that hands a connection to the RPC server only once its peer proved the
 * cluster secret (refused ones are logged and closed with nothing read past the
 * handshake), and a client connection that hands itself to the RPC client only once the
 * runner proved it. Nagle's algorithm is off on both ends (a stream's small chunk and ack
 * frames otherwise wait out the peer's delayed ACK).
 */
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import * as Socket from "@effect/platform/Socket"
import { SocketServer, type SocketServerError } from "@effect/platform/SocketServer"
import { Effect, Layer, Scope } from "effect"
import * as Net from "node:net"
import { clientHandshake, HANDSHAKE_TIMEOUT_MS, serverHandshake } from "./MeshHandshake.ts"

/** How a process proves itself on the mesh: the cluster secret, or nothing (`--insecure-no-auth`). */
export type MeshAuth = { readonly _tag: "Secret"; readonly secret: string } | { readonly _tag: "Insecure" }

/**
 * `socket` with its connection (`conn()`, the current one) resumed once the RPC protocol
 * listens on it: the handshake paused it (keeping any bytes after it) so nothing flows
 * before that listener is there.
 */
const resumedOnOpen = (socket: Socket.Socket, conn: () => Net.Socket | undefined): Socket.Socket => {
  const onOpen = (given: Effect.Effect<void> | undefined) =>
    Effect.zipRight(Effect.sync(() => conn()?.resume()), given ?? Effect.void)
  return Socket.Socket.of({
    [Socket.TypeId]: Socket.TypeId,
    run: (handler, options) => socket.run(handler, { onOpen: onOpen(options?.onOpen) }),
    runRaw: (handler, options) => socket.runRaw(handler, { onOpen: onOpen(options?.onOpen) }),
    writer: socket.writer
  })
}

const peerOf = (conn: Net.Socket): string =>
  conn.remoteAddress === undefined ? "an unknown peer" : `${conn.remoteAddress.includes(":") ? `[${conn.remoteAddress}]` : conn.remoteAddress}:${conn.remotePort}`

/** The runner's socket server on `host:port`: with a secret, every connection first passes the handshake. */
export const layerMeshServer = (options: { readonly host: string; readonly port: number; readonly auth: MeshAuth }): Layer.Layer<SocketServer, SocketServerError> =>
  Layer.scoped(
    SocketServer,
    Effect.map(NodeSocketServer.make({ host: options.host, port: options.port, noDelay: true }), (server) => {
      const auth = options.auth
      if (auth._tag === "Insecure") return server
      return SocketServer.of({
        address: server.address,
        run: <R, E, _>(handler: (socket: Socket.Socket) => Effect.Effect<_, E, R>) =>
          server.run((socket) =>
            Effect.flatMap(NodeSocket.NetSocket, (conn) =>
              serverHandshake(conn, auth.secret).pipe(
                Effect.matchEffect({
                  onFailure: (error) =>
                    Effect.zipRight(
                      Effect.sync(() => conn.destroy()),
                      Effect.logWarning(`refused a connection to the runner port from ${peerOf(conn)}: ${error.reason}; nothing it sent was read`)
                    ),
                  onSuccess: () => handler(resumedOnOpen(socket, () => conn))
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
  Effect.gen(function*() {
    let conn: Net.Socket | undefined
    const open = Effect.scopeWith((scope) =>
      Effect.zipRight(
        Scope.addFinalizer(scope, Effect.sync(() => conn?.destroy())),
        Effect.async<Net.Socket, Socket.SocketError>((resume) => {
          const socket = Net.createConnection({ host: target.host, port: target.port, noDelay: true })
          conn = socket
          socket.once("connect", () => resume(Effect.succeed(socket)))
          socket.on("error", (cause) => resume(Effect.fail(new Socket.SocketGenericError({ reason: "Open", cause }))))
        })
      ).pipe(
        Effect.tap((socket) =>
          auth._tag === "Insecure"
            ? Effect.void
            : Effect.mapError(clientHandshake(socket, auth.secret), (error) =>
              new Socket.SocketGenericError({ reason: "Open", cause: new Error(`cluster authentication with the runner at ${target.host}:${target.port} failed: ${error.reason}`) })))
      )
    )
    const socket = yield* NodeSocket.fromDuplex(open, { openTimeout: openTimeoutMs + (auth._tag === "Insecure" ? 0 : HANDSHAKE_TIMEOUT_MS) })
    return auth._tag === "Insecure" ? socket : resumedOnOpen(socket, () => conn)
  })
