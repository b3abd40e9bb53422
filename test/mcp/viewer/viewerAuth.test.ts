/**
 * The viewer's links and sessions: a code works for any number of browsers until it
 * expires (10 minutes by default) and never after; a viewer session belongs to the token
 * that minted its link; unknown codes and sessions get nothing; what is kept is bounded.
 */
import { describe, expect, it } from "vitest"
import { mayView, SOLE_TOKEN } from "../../../src/mcp/viewer/ViewerAccess.ts"
import { LINK_LIFETIME_MS, MAX_LIVE, makeViewerAuth } from "../../../src/mcp/viewer/ViewerAuth.ts"

const clock = (start = 1_000_000) => {
  let now = start
  return { now: () => now, advance: (ms: number) => void (now += ms) }
}

describe("viewer links and sessions", () => {
  it("a code works for several browsers within its 10 minutes and is refused after", () => {
    const time = clock()
    const auth = makeViewerAuth({ now: time.now })
    const { code, expiresAt } = auth.mint(SOLE_TOKEN)
    expect(expiresAt).toBe(time.now() + LINK_LIFETIME_MS)
    const first = auth.redeem(code)
    time.advance(LINK_LIFETIME_MS - 1)
    const second = auth.redeem(code)
    expect(first).toBeDefined()
    expect(second).toBeDefined()
    expect(second).not.toBe(first)
    time.advance(1)
    expect(auth.redeem(code)).toBeUndefined()
  })

  it("codes and viewer sessions are random, long and separate from each other", () => {
    const auth = makeViewerAuth()
    const codes = new Set(Array.from({ length: 50 }, () => auth.mint(SOLE_TOKEN).code))
    expect(codes.size).toBe(50)
    for (const code of codes) expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/)
    const session = auth.redeem([...codes][0]!)!
    expect(codes.has(session)).toBe(false)
    expect(auth.redeem(session)).toBeUndefined()
    expect(auth.viewerOf([...codes][1]!)).toBeUndefined()
  })

  it("a viewer session belongs to the token that minted its link and lapses when idle", () => {
    const time = clock()
    const auth = makeViewerAuth({ now: time.now, sessionIdleMs: 1000 })
    const alice = auth.redeem(auth.mint("alice").code)!
    const bob = auth.redeem(auth.mint("bob").code)!
    expect(auth.viewerOf(alice)).toBe("alice")
    expect(auth.viewerOf(bob)).toBe("bob")
    time.advance(900)
    expect(auth.viewerOf(alice)).toBe("alice")
    time.advance(900)
    expect(auth.viewerOf(alice)).toBe("alice")
    expect(auth.viewerOf(bob)).toBeUndefined()
    expect(auth.viewerOf("made-up")).toBeUndefined()
  })

  it("keeps at most MAX_LIVE links, dropping the oldest", () => {
    const auth = makeViewerAuth()
    const oldest = auth.mint(SOLE_TOKEN).code
    for (let i = 0; i < MAX_LIVE; i++) auth.mint(SOLE_TOKEN)
    expect(auth.redeem(oldest)).toBeUndefined()
  })

  it("a viewer sees its own token's sessions only", () => {
    expect(mayView(SOLE_TOKEN, SOLE_TOKEN)).toBe(true)
    expect(mayView("alice", "alice")).toBe(true)
    expect(mayView("alice", "bob")).toBe(false)
  })
})
