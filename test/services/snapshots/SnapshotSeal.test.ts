/**
 * The seal: a snapshot is opened only under the key it was sealed with, for the session
 * and language it names, with the payload it was sealed over.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { openMeta, payloadDigest, payloadProblem, sealMeta, SNAPSHOT_FORMAT, type SnapshotMeta } from "../../../src/services/snapshots/SnapshotSeal.ts"

const payload = new TextEncoder().encode("the runner's own bytes")
const meta: SnapshotMeta = {
  format: SNAPSHOT_FORMAT,
  sessionId: "alpha",
  language: "py",
  asOfCell: 7,
  cellTitle: "model = fit(df)",
  digest: payloadDigest(payload),
  bytes: payload.length,
  names: ["df", "model"],
  skipped: [{ name: "conn", reason: "socket objects cannot be saved" }],
  savedAt: 1_700_000_000_000
}
const key = randomBytes(32)

describe("SnapshotSeal", () => {
  it("opens what it sealed, for its session and language", () => {
    const opened = openMeta(key, sealMeta(key, meta), "alpha", "py")
    expect(Result.getOrThrow(opened)).toEqual(meta)
    expect(payloadProblem(meta, payload)).toBeUndefined()
  })

  it("refuses a modified metadata text, a modified MAC and another key", () => {
    const sealed = sealMeta(key, meta)
    const changed = { ...sealed, text: sealed.text.replace('"asOfCell":7', '"asOfCell":8') }
    expect(changed.text).not.toBe(sealed.text)
    expect(openMeta(key, changed, "alpha", "py")).toEqual(Result.fail("its seal does not match: it was modified, or sealed with another key"))
    const flipped = { ...sealed, mac: (sealed.mac[0] === "0" ? "1" : "0") + sealed.mac.slice(1) }
    expect(Result.isFailure(openMeta(key, flipped, "alpha", "py"))).toBe(true)
    expect(Result.isFailure(openMeta(randomBytes(32), sealed, "alpha", "py"))).toBe(true)
    expect(Result.isFailure(openMeta(key, { ...sealed, mac: "not hex" }, "alpha", "py"))).toBe(true)
  })

  it("refuses another session's snapshot and another language's", () => {
    const sealed = sealMeta(key, meta)
    expect(openMeta(key, sealed, "beta", "py")).toEqual(Result.fail("it belongs to another session"))
    expect(openMeta(key, sealed, "alpha", "js")).toEqual(Result.fail("it holds py state, not js"))
  })

  it("refuses a payload that is not the one sealed", () => {
    const changed = Uint8Array.from(payload)
    changed[0] = changed[0]! ^ 1
    expect(payloadProblem(meta, changed)).toMatch(/modified/)
    expect(payloadProblem(meta, payload.subarray(1))).toMatch(/modified/)
  })

  it("refuses a sealed text of another format even under the right key", () => {
    const sealed = sealMeta(key, { ...meta, format: 2 as typeof SNAPSHOT_FORMAT })
    expect(openMeta(key, sealed, "alpha", "py")).toEqual(Result.fail("its metadata is not in a format this release reads"))
  })
})
