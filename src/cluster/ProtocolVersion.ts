/**
 * The cluster protocol's version, as every runner and client states it in the mesh
 * handshake and in each request: its own protocol version, the oldest protocol version it
 * still talks with, and the `effect` version it runs on (the cluster library's own storage
 * and RPC formats may change with it, so peers talk only on the same one). Two peers are
 * compatible when each one's version is at least the other's oldest and their `effect`
 * versions are the same; both sides compute the same verdict from the same two statements.
 *
 * Protocol 1 is the handshake of the releases before versions were stated (`VYMESH1`,
 * which carries none). Protocol 2 states them.
 */
import type { Effect } from "effect"
import * as RpcClient from "effect/rpc/RpcClient"
import { createRequire } from "node:module"

/** This release's cluster protocol version. */
export const PROTOCOL_VERSION = 2

/** The oldest protocol version this release talks with. */
export const OLDEST_PEER_PROTOCOL = 2

/** The protocol version of a peer that states none: a release before versions were stated. */
export const UNVERSIONED_PROTOCOL = 1

/** The longest `effect` version string a statement carries (bytes of ASCII). */
export const EFFECT_VERSION_MAX = 32

/** The `effect` version this process runs on. */
export const EFFECT_VERSION: string = (createRequire(import.meta.url)("effect/package.json") as { readonly version: string }).version

/** What a peer states about itself. */
export interface PeerVersions {
  /** Its protocol version. */
  readonly protocol: number
  /** The oldest protocol version it talks with. */
  readonly oldest: number
  /** The `effect` version it runs on. */
  readonly effect: string
}

/** What this process states. */
export const LOCAL_VERSIONS: PeerVersions = { protocol: PROTOCOL_VERSION, oldest: OLDEST_PEER_PROTOCOL, effect: EFFECT_VERSION }

/** How a statement reads in a sentence. */
export const describeVersions = (versions: PeerVersions): string =>
  versions.protocol === UNVERSIONED_PROTOCOL && versions.oldest === UNVERSIONED_PROTOCOL && versions.effect === ""
    ? `cluster protocol ${UNVERSIONED_PROTOCOL} (a release from before protocol versions were stated)`
    : `cluster protocol ${versions.protocol} (talks with ${versions.oldest} and newer) on effect ${versions.effect}`

/**
 * Why `local` and `peer` (called `peerName` in the sentence) cannot talk, naming both
 * versions and what to do; undefined when they can.
 */
export const incompatibility = (local: PeerVersions, peer: PeerVersions, peerName: string): string | undefined => {
  const both = `this process speaks ${describeVersions(local)}, ${peerName} speaks ${describeVersions(peer)}`
  if (peer.protocol < local.oldest) return `${both}: ${peerName} is too old for this release; upgrade it (see the upgrade procedure in docs/cluster.md)`
  if (local.protocol < peer.oldest) return `${both}: this release is too old for ${peerName}; upgrade this process (see the upgrade procedure in docs/cluster.md)`
  if (local.effect !== peer.effect) {
    return `${both}: releases talk only on the same effect version, whose cluster storage and RPC formats may differ; run one effect version across the cluster`
  }
  return undefined
}

/** The size of a statement in the handshake: two 16-bit versions and the `effect` version, NUL-padded. */
export const VERSIONS_BYTES = 4 + EFFECT_VERSION_MAX

/** A statement as the handshake carries it. */
export const encodeVersions = (versions: PeerVersions): Buffer => {
  const bytes = Buffer.alloc(VERSIONS_BYTES)
  bytes.writeUInt16BE(versions.protocol, 0)
  bytes.writeUInt16BE(versions.oldest, 2)
  bytes.write(versions.effect.slice(0, EFFECT_VERSION_MAX), 4, "latin1")
  return bytes
}

const PRINTABLE = /^[\x21-\x7e]*$/

/** A statement read from the handshake, or why it is not one. */
export const decodeVersions = (bytes: Uint8Array): PeerVersions | string => {
  if (bytes.length !== VERSIONS_BYTES) return `a version statement is ${VERSIONS_BYTES} bytes, not ${bytes.length}`
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const protocol = buffer.readUInt16BE(0)
  const oldest = buffer.readUInt16BE(2)
  const field = buffer.subarray(4)
  const end = field.indexOf(0)
  const effect = field.subarray(0, end === -1 ? field.length : end).toString("latin1")
  if (end !== -1 && field.subarray(end).some((byte) => byte !== 0)) return "its effect version is followed by bytes other than padding"
  if (!PRINTABLE.test(effect) || effect.length === 0) return "its effect version is empty or not printable ASCII"
  if (protocol === 0 || oldest === 0 || oldest > protocol) return `its protocol versions make no sense (protocol ${protocol}, oldest ${oldest})`
  return { protocol, oldest, effect }
}

/** The request header carrying the sender's statement. */
export const VERSIONS_HEADER = "x-veyyon-protocol"

/** A statement as a request header's value: `protocol oldest effect`. */
export const versionsHeaderValue = (versions: PeerVersions): string => `${versions.protocol} ${versions.oldest} ${versions.effect}`

/** The request headers stating this release's versions. */
export const VERSIONS_HEADERS: Readonly<Record<string, string>> = { [VERSIONS_HEADER]: versionsHeaderValue(LOCAL_VERSIONS) }

/** Sends the requests `effect` makes stating this release's versions, which the runner checks. */
export const stateVersions: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = RpcClient.withHeaders(VERSIONS_HEADERS)

/** A statement read from a request header; a request without one is from a release before versions were stated. */
export const parseVersionsHeader = (value: string | undefined): PeerVersions | string => {
  if (value === undefined) return { protocol: UNVERSIONED_PROTOCOL, oldest: UNVERSIONED_PROTOCOL, effect: "" }
  const match = /^([1-9][0-9]{0,4}) ([1-9][0-9]{0,4}) ([\x21-\x7e]{1,32})$/.exec(value)
  if (match === null) return `its ${VERSIONS_HEADER} header is not "protocol oldest effect-version"`
  const protocol = Number(match[1])
  const oldest = Number(match[2])
  if (oldest > protocol || protocol > 0xffff) return `its protocol versions make no sense (protocol ${protocol}, oldest ${oldest})`
  return { protocol, oldest, effect: match[3]! }
}

/** Why a runner refuses a request whose versions header says `value`, naming both versions; undefined when it serves it. */
export const callerProblem = (value: string | undefined, local: PeerVersions = LOCAL_VERSIONS): string | undefined => {
  const caller = parseVersionsHeader(value)
  return typeof caller === "string" ? `the caller's version statement is malformed: ${caller}` : incompatibility(local, caller, "the caller")
}
