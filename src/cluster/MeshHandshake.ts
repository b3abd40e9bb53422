/**
 * The handshake every connection to a runner's port does on the raw socket before the RPC
 * serialization sees a byte: mutual HMAC-SHA256 challenge and response over the cluster
 * secret. Fixed sizes, both directions:
 *
 *   runner -> peer   MAGIC | runner nonce (32)                                  40 bytes
 *   peer -> runner   MAGIC | peer nonce (32) | HMAC(secret, "client" | nr | np) 72 bytes
 *   runner -> peer   HMAC(secret, "server" | nr | np)                           32 bytes
 *
 * The runner checks the peer's proof (constant time) before it answers with its own, so a
 * peer without the secret learns nothing but the runner's nonce; the peer checks the
 * runner's proof before it sends its first request. The runner reads exactly its 72 bytes
 * and refuses a peer that sends more before being answered; the whole exchange is bounded
 * in time. After it, the socket carries the RPC protocol as before.
 */
import { Data, Effect } from "effect"
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import type * as Net from "node:net"

/** The first bytes of both hello messages: the protocol and its version. */
export const MESH_MAGIC = Buffer.from("VYMESH1\n", "latin1")

const NONCE_BYTES = 32
const PROOF_BYTES = 32

/** The size of the runner's hello. */
export const SERVER_HELLO_BYTES = MESH_MAGIC.length + NONCE_BYTES
/** The size of the peer's hello with its proof. */
export const CLIENT_HELLO_BYTES = MESH_MAGIC.length + NONCE_BYTES + PROOF_BYTES

/** How long either side waits for the other's part of the handshake. */
export const HANDSHAKE_TIMEOUT_MS = 5000

/**
 * A handshake that did not succeed, with a sentence saying why; `silent` when the peer went
 * away without sending a byte (a liveness probe, such as a new owner checking that the
 * runner it takes a session from still answers).
 */
export class MeshHandshakeFailed extends Data.TaggedError("MeshHandshakeFailed")<{ readonly reason: string; readonly silent?: boolean }> {
  override get message(): string {
    return this.reason
  }
}

/** The proof a side of `role` gives of knowing `secret` over both nonces. */
export const meshProof = (secret: string, role: "client" | "server", serverNonce: Uint8Array, clientNonce: Uint8Array): Buffer =>
  createHmac("sha256", secret).update(`veyyon-mesh-v1 ${role}\n`).update(serverNonce).update(clientNonce).digest()

const proofMatches = (given: Uint8Array, expected: Buffer): boolean =>
  given.length === expected.length && timingSafeEqual(given, expected)

/**
 * Reads exactly `size` bytes, then pauses the socket with anything after them put back
 * (`extra` "keep") or fails (`extra` "refuse").
 */
const readExactly = (conn: Net.Socket, size: number, extra: "keep" | "refuse", what: string): Effect.Effect<Buffer, MeshHandshakeFailed> =>
  Effect.callback<Buffer, MeshHandshakeFailed>((resume) => {
    const chunks: Array<Buffer> = []
    let length = 0
    const cleanup = () => {
      conn.off("data", onData)
      conn.off("end", onEnd)
      conn.off("close", onEnd)
      conn.off("error", onError)
    }
    const onData = (chunk: Buffer) => {
      chunks.push(chunk)
      length += chunk.length
      if (length < size) return
      conn.pause()
      cleanup()
      const all = Buffer.concat(chunks, length)
      if (all.length > size) {
        if (extra === "refuse") return resume(Effect.fail(new MeshHandshakeFailed({ reason: `it sent ${all.length - size} bytes before the handshake was answered` })))
        conn.unshift(all.subarray(size))
      }
      resume(Effect.succeed(all.subarray(0, size)))
    }
    const onEnd = () => {
      cleanup()
      resume(Effect.fail(new MeshHandshakeFailed({ reason: `the connection closed after ${length} of the ${size} bytes of ${what}`, silent: length === 0 })))
    }
    const onError = (error: Error) => {
      cleanup()
      resume(Effect.fail(new MeshHandshakeFailed({ reason: `the connection failed during ${what}: ${error.message}`, silent: length === 0 })))
    }
    conn.on("data", onData)
    conn.once("end", onEnd)
    conn.once("close", onEnd)
    conn.once("error", onError)
    conn.resume()
    return Effect.sync(cleanup)
  })

const write = (conn: Net.Socket, bytes: Uint8Array): Effect.Effect<void, MeshHandshakeFailed> =>
  Effect.callback<void, MeshHandshakeFailed>((resume) => {
    conn.write(bytes, (error) =>
      resume(error ? Effect.fail(new MeshHandshakeFailed({ reason: `the handshake could not be sent: ${error.message}` })) : Effect.void))
  })

const bounded = <A>(effect: Effect.Effect<A, MeshHandshakeFailed>, timeoutMs: number) =>
  Effect.timeoutOrElse(effect, {
    duration: timeoutMs,
    orElse: () => Effect.fail(new MeshHandshakeFailed({ reason: `the handshake did not complete within ${timeoutMs} ms` }))
  })

/** The runner's side: succeeds once the peer proved the secret (and was answered with the runner's proof). */
export const serverHandshake = (conn: Net.Socket, secret: string, timeoutMs: number = HANDSHAKE_TIMEOUT_MS): Effect.Effect<void, MeshHandshakeFailed> =>
  bounded(
    Effect.gen(function*() {
      const serverNonce = randomBytes(NONCE_BYTES)
      yield* write(conn, Buffer.concat([MESH_MAGIC, serverNonce]))
      const hello = yield* readExactly(conn, CLIENT_HELLO_BYTES, "refuse", "the peer's hello")
      if (!hello.subarray(0, MESH_MAGIC.length).equals(MESH_MAGIC)) {
        return yield* new MeshHandshakeFailed({ reason: "it does not speak the cluster handshake (a client without the cluster secret configured, or not a veyyon peer)" })
      }
      const clientNonce = hello.subarray(MESH_MAGIC.length, MESH_MAGIC.length + NONCE_BYTES)
      const proof = hello.subarray(MESH_MAGIC.length + NONCE_BYTES)
      if (!proofMatches(proof, meshProof(secret, "client", serverNonce, clientNonce))) {
        return yield* new MeshHandshakeFailed({ reason: "it did not prove the cluster secret (a wrong or missing VEYYON_CLUSTER_SECRET)" })
      }
      yield* write(conn, meshProof(secret, "server", serverNonce, clientNonce))
    }),
    timeoutMs
  )

/** The connecting side: succeeds once the runner proved the secret, with nothing of the RPC protocol sent yet. */
export const clientHandshake = (conn: Net.Socket, secret: string, timeoutMs: number = HANDSHAKE_TIMEOUT_MS): Effect.Effect<void, MeshHandshakeFailed> =>
  bounded(
    Effect.gen(function*() {
      const hello = yield* readExactly(conn, SERVER_HELLO_BYTES, "refuse", "the runner's hello")
      if (!hello.subarray(0, MESH_MAGIC.length).equals(MESH_MAGIC)) {
        return yield* new MeshHandshakeFailed({ reason: "the runner does not speak the cluster handshake (is it started with --insecure-no-auth, or not a veyyon runner?)" })
      }
      const serverNonce = hello.subarray(MESH_MAGIC.length)
      const clientNonce = randomBytes(NONCE_BYTES)
      yield* write(conn, Buffer.concat([MESH_MAGIC, clientNonce, meshProof(secret, "client", serverNonce, clientNonce)]))
      const answer = yield* readExactly(conn, PROOF_BYTES, "keep", "the runner's proof").pipe(
        Effect.mapError((error) => new MeshHandshakeFailed({ reason: `the runner refused this process's cluster secret (${error.reason})` }))
      )
      if (!proofMatches(answer, meshProof(secret, "server", serverNonce, clientNonce))) {
        return yield* new MeshHandshakeFailed({ reason: "the runner did not prove the cluster secret: it holds another one" })
      }
    }),
    timeoutMs
  )
