/**
 * The protocol versions peers state: compatible when each one's version is at least the
 * other's oldest and their effect versions are the same, the verdict the same from both
 * sides, and a refusal a sentence naming both versions.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import {
  callerProblem,
  decodeVersions,
  EFFECT_VERSION,
  encodeVersions,
  incompatibility,
  LOCAL_VERSIONS,
  parseVersionsHeader,
  type PeerVersions,
  PROTOCOL_VERSION,
  versionsHeaderValue,
  VERSIONS_BYTES
} from "../../src/cluster/ProtocolVersion.ts"
import { constantFrom, integer, record } from "../kernel/arbitraries.ts"

const effectVersion = constantFrom("4.1.5", "4.2.0", "4.1.5-beta.1")
const versions = Arbitrary.map(
  record({ protocol: integer(1, 6), back: integer(0, 3), effect: effectVersion }, {}),
  ({ back, effect, protocol }): PeerVersions => ({ protocol, oldest: Math.max(1, protocol - back), effect })
)

describe("compatibility", () => {
  it("this release states protocol 2 on the effect it runs on, and talks with itself", () => {
    expect(LOCAL_VERSIONS).toEqual({ protocol: 2, oldest: 2, effect: EFFECT_VERSION })
    expect(PROTOCOL_VERSION).toBe(2)
    expect(EFFECT_VERSION).toMatch(/^4\./)
    expect(incompatibility(LOCAL_VERSIONS, LOCAL_VERSIONS, "the peer")).toBeUndefined()
  })

  it.prop("gives the same verdict from both sides, and a refusal names both protocol versions", [versions, versions], ([a, b]) => {
    const fromA = incompatibility(a, b, "the peer")
    const fromB = incompatibility(b, a, "the peer")
    expect(fromA === undefined).toBe(fromB === undefined)
    const expected = a.protocol >= b.oldest && b.protocol >= a.oldest && a.effect === b.effect
    expect(fromA === undefined).toBe(expected)
    if (fromA !== undefined) {
      expect(fromA).toContain(`cluster protocol ${a.protocol} `)
      expect(fromA).toContain(`cluster protocol ${b.protocol} `)
    }
  })

  it("says which side is too old, and names both effect versions when they differ", () => {
    const future = { protocol: 3, oldest: 3, effect: EFFECT_VERSION }
    expect(incompatibility(LOCAL_VERSIONS, future, "the runner")).toBe(
      `this process speaks cluster protocol 2 (talks with 2 and newer) on effect ${EFFECT_VERSION}, the runner speaks cluster protocol 3 (talks with 3 and newer) on effect ${EFFECT_VERSION}: this release is too old for the runner; upgrade this process (see the upgrade procedure in docs/cluster.md)`
    )
    expect(incompatibility(future, LOCAL_VERSIONS, "the peer")).toMatch(/: the peer is too old for this release; upgrade it/)
    expect(incompatibility(LOCAL_VERSIONS, { protocol: 3, oldest: 2, effect: EFFECT_VERSION }, "the runner")).toBeUndefined()
    const otherEffect = incompatibility(LOCAL_VERSIONS, { ...LOCAL_VERSIONS, effect: "4.9.0" }, "the runner")
    expect(otherEffect).toContain(`on effect ${EFFECT_VERSION}`)
    expect(otherEffect).toContain("on effect 4.9.0")
    expect(otherEffect).toMatch(/only on the same effect version/)
    expect(incompatibility(LOCAL_VERSIONS, { protocol: 1, oldest: 1, effect: "" }, "the runner")).toMatch(
      /the runner speaks cluster protocol 1 \(a release from before protocol versions were stated\): the runner is too old/
    )
  })
})

describe("the handshake's version statement", () => {
  it.prop("reads back as it was written, in its fixed size", [versions], ([statement]) => {
    const bytes = encodeVersions(statement)
    expect(bytes.length).toBe(VERSIONS_BYTES)
    expect(decodeVersions(bytes)).toEqual(statement)
  })

  it("refuses what is not a statement", () => {
    const good = encodeVersions(LOCAL_VERSIONS)
    expect(decodeVersions(good.subarray(1))).toMatch(/36 bytes/)
    expect(decodeVersions(Buffer.alloc(VERSIONS_BYTES))).toMatch(/not printable|make no sense/)
    const inverted = Buffer.from(good)
    inverted.writeUInt16BE(1, 0)
    expect(decodeVersions(inverted)).toMatch(/make no sense \(protocol 1, oldest 2\)/)
    const trailing = Buffer.from(good)
    trailing[VERSIONS_BYTES - 1] = 0x41
    expect(decodeVersions(trailing)).toMatch(/followed by bytes other than padding/)
    const control = Buffer.from(good)
    control[4] = 0x0a
    expect(decodeVersions(control)).toMatch(/not printable/)
  })
})

describe("the request header", () => {
  it.prop("reads back as it was written", [versions], ([statement]) => {
    expect(parseVersionsHeader(versionsHeaderValue(statement))).toEqual(statement)
  })

  it("is absent from a release before stated versions, and refused when malformed or incompatible", () => {
    expect(callerProblem(versionsHeaderValue(LOCAL_VERSIONS))).toBeUndefined()
    expect(callerProblem(undefined)).toMatch(/the caller speaks cluster protocol 1 \(a release from before protocol versions were stated\)/)
    expect(callerProblem("2 2")).toMatch(/malformed/)
    expect(callerProblem("3 2 4.1.5 x")).toMatch(/malformed/)
    expect(callerProblem("2 3 4.1.5")).toMatch(/make no sense/)
    expect(callerProblem(`9 9 ${EFFECT_VERSION}`)).toMatch(/cluster protocol 2 .* the caller speaks cluster protocol 9 .* too old for the caller/)
    expect(callerProblem(`3 2 ${EFFECT_VERSION}`)).toBeUndefined()
  })
})
