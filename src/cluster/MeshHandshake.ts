/**
 * The handshake every connection to a runner's port does on the raw socket before the RPC
 * serialization sees a byte: mutual HMAC-SHA256 challenge and response over the cluster
 * secret, each side stating its protocol versions (`ProtocolVersion.ts`). Fixed sizes,
 * both directions:
 *
 *   runner -> peer   MAGIC | runner nonce (32) | runner versions (36)                     76 bytes
 *   peer -> runner   MAGIC | peer nonce (32) | peer versions (36) | HMAC(secret, "client"
 *                    | nr | np | runner versions | peer versions)                        108 bytes
 *   runner -> peer   HMAC(secret, "server" | nr | np | runner versions | peer versions)    32 bytes
 *
 * The runner checks the peer's proof (constant time), then whether their versions are
 * compatible, before it answers with its own proof, so a peer without the secret learns
 * nothing but the runner's nonce and versions; the peer checks compatibility from the
 * runner's hello and the runner's proof before it sends its first request. Incompatible
 * peers are refused on both sides with a sentence naming both versions. The runner reads
 * exactly its 108 bytes and refuses a peer that sends more before being answered; the
 * whole exchange is bounded in time. After it, the socket carries the RPC protocol.
 *
 * The releases before stated versions (protocol 1) began both hellos with `VYMESH1` and
 * carried no versions: such a runner is recognised by its hello and refused with the
 * sentence (it refuses our hello with its own fixed message). Later releases keep this
 * framing (the `VYMESH2` magic, these sizes) and state their versions inside it.
 */
import { Data, Effect } from "effect"
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto"
import type * as Net from "node:net"
import {
  decodeVersions,
  encodeVersions,
  incompatibility,
  LOCAL_VERSIONS,
  type PeerVersions,
  UNVERSIONED_PROTOCOL,
  VERSIONS_BYTES
} from "./ProtocolVersion.ts"

/** The first bytes of both hello messages: the handshake with stated versions. */
export const MESH_MAGIC = Buffer.from("VYMESH2\n", "latin1")

/** The first bytes of the hellos of the releases before stated versions (protocol 1). */
export const UNVERSIONED_MESH_MAGIC = Buffer.from("VYMESH1\n", "latin1")

const NONCE_BYTES = 32
const PROOF_BYTES = 32

/** The size of the runner's hello. */
export const SERVER_HELLO_BYTES = MESH_MAGIC.length + NONCE_BYTES + VERSIONS_BYTES
/** The size of the peer's hello with its proof. */
export const CLIENT_HELLO_BYTES = MESH_MAGIC.length + NONCE_BYTES + VERSIONS_BYTES + PROOF_BYTES

/** How long either side waits for the other's part of the handshake. */
export const HANDSHAKE_TIMEOUT_MS = 5000

const UNVERSIONED: PeerVersions = { protocol: UNVERSIONED_PROTOCOL, oldest: UNVERSIONED_PROTOCOL, effect: "" }

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

/** The proof a side of `role` gives of knowing `secret` over both nonces and both version statements (as sent). */
export const meshProof = (
  secret: string,
  role: "client" | "server",
  serverNonce: Uint8Array,
  clientNonce: Uint8Array,
  serverVersions: Uint8Array,
  clientVersions: Uint8Array
): Buffer =>
  createHmac("sha256", secret).update(`veyyon-mesh-v2 ${role}\n`).update(serverNonce).update(clientNonce).update(serverVersions).update(clientVersions).digest()

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

/**
 * The runner's side: succeeds with the peer's versions once the peer proved the secret,
 * their versions were found compatible, and the peer was answered with the runner's proof.
 */
export const serverHandshake = (
  conn: Net.Socket,
  secret: string,
  timeoutMs: number = HANDSHAKE_TIMEOUT_MS,
  local: PeerVersions = LOCAL_VERSIONS
): Effect.Effect<PeerVersions, MeshHandshakeFailed> =>
  bounded(
    Effect.gen(function*() {
      const serverNonce = randomBytes(NONCE_BYTES)
      const serverVersions = encodeVersions(local)
      yield* write(conn, Buffer.concat([MESH_MAGIC, serverNonce, serverVersions]))
      const magic = yield* readExactly(conn, MESH_MAGIC.length, "keep", "the peer's hello")
      if (magic.equals(UNVERSIONED_MESH_MAGIC)) return yield* new MeshHandshakeFailed({ reason: incompatibility(local, UNVERSIONED, "the peer")! })
      if (!magic.equals(MESH_MAGIC)) {
        return yield* new MeshHandshakeFailed({ reason: "it does not speak the cluster handshake (a client without the cluster secret configured, or not a veyyon peer)" })
      }
      const hello = yield* readExactly(conn, CLIENT_HELLO_BYTES - MESH_MAGIC.length, "refuse", "the peer's hello")
      const clientNonce = hello.subarray(0, NONCE_BYTES)
      const clientVersions = hello.subarray(NONCE_BYTES, NONCE_BYTES + VERSIONS_BYTES)
      const proof = hello.subarray(NONCE_BYTES + VERSIONS_BYTES)
      if (!proofMatches(proof, meshProof(secret, "client", serverNonce, clientNonce, serverVersions, clientVersions))) {
        return yield* new MeshHandshakeFailed({ reason: "it did not prove the cluster secret (a wrong or missing VEYYON_CLUSTER_SECRET)" })
      }
      const peer = decodeVersions(clientVersions)
      if (typeof peer === "string") return yield* new MeshHandshakeFailed({ reason: `its version statement is malformed: ${peer}` })
      const refused = incompatibility(local, peer, "the peer")
      if (refused !== undefined) return yield* new MeshHandshakeFailed({ reason: refused })
      yield* write(conn, meshProof(secret, "server", serverNonce, clientNonce, serverVersions, clientVersions))
      return peer
    }),
    timeoutMs
  )

/**
 * The connecting side: succeeds with the runner's versions once they were found compatible
 * and the runner proved the secret, with nothing of the RPC protocol sent yet. Its hello goes
 * out even to an incompatible runner (so the runner's log names both versions too).
 */
export const clientHandshake = (
  conn: Net.Socket,
  secret: string,
  timeoutMs: number = HANDSHAKE_TIMEOUT_MS,
  local: PeerVersions = LOCAL_VERSIONS
): Effect.Effect<PeerVersions, MeshHandshakeFailed> =>
  bounded(
    Effect.gen(function*() {
      const magic = yield* readExactly(conn, MESH_MAGIC.length, "keep", "the runner's hello")
      if (magic.equals(UNVERSIONED_MESH_MAGIC)) return yield* new MeshHandshakeFailed({ reason: incompatibility(local, UNVERSIONED, "the runner")! })
      if (!magic.equals(MESH_MAGIC)) {
        return yield* new MeshHandshakeFailed({ reason: "the runner does not speak the cluster handshake (is it started with --insecure-no-auth, or not a veyyon runner?)" })
      }
      const hello = yield* readExactly(conn, SERVER_HELLO_BYTES - MESH_MAGIC.length, "refuse", "the runner's hello")
      const serverNonce = hello.subarray(0, NONCE_BYTES)
      const serverVersions = hello.subarray(NONCE_BYTES)
      const clientNonce = randomBytes(NONCE_BYTES)
      const clientVersions = encodeVersions(local)
      yield* write(conn, Buffer.concat([MESH_MAGIC, clientNonce, clientVersions, meshProof(secret, "client", serverNonce, clientNonce, serverVersions, clientVersions)]))
      const runner = decodeVersions(serverVersions)
      if (typeof runner === "string") return yield* new MeshHandshakeFailed({ reason: `the runner's version statement is malformed: ${runner}` })
      const refused = incompatibility(local, runner, "the runner")
      if (refused !== undefined) return yield* new MeshHandshakeFailed({ reason: refused })
      const answer = yield* readExactly(conn, PROOF_BYTES, "keep", "the runner's proof").pipe(
        Effect.mapError((error) => new MeshHandshakeFailed({ reason: `the runner refused this process's cluster secret (${error.reason})` }))
      )
      if (!proofMatches(answer, meshProof(secret, "server", serverNonce, clientNonce, serverVersions, clientVersions))) {
        return yield* new MeshHandshakeFailed({ reason: "the runner did not prove the cluster secret: it holds another one" })
      }
      return runner
    }),
    timeoutMs
  )
