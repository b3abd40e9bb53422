/**
 * How a browser gets in: a one-time-code link (random, separate from the bearer token,
 * valid for any number of browsers until it expires) is exchanged for a random
 * server-side viewer session, which the browser holds in an HttpOnly, SameSite=Strict
 * cookie scoped to the viewer's path. Codes and sessions are kept by their SHA-256, so a
 * lookup reveals nothing about a near miss; both are bounded in number.
 */
import { createHash, randomBytes } from "node:crypto"
import type { TokenIdentity } from "./ViewerAccess.ts"

/** How long a viewer link stays valid by default: 10 minutes. */
export const LINK_LIFETIME_MS = 10 * 60 * 1000

/** How long a link works, in words (`10 minutes`). */
export const LINK_LIFETIME_TEXT = `${LINK_LIFETIME_MS / 60_000} minutes`

/** How long a viewer session lasts after its last request by default: 12 hours. */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000

/** The most links (or viewer sessions) kept at once; the oldest goes first. */
export const MAX_LIVE = 1000

/** A minted link's code and when it stops working. */
export interface ViewerCode {
  readonly code: string
  readonly expiresAt: number
}

/** What the viewer's authentication is built from (a clock and lifetimes, replaceable in tests). */
export interface ViewerAuthOptions {
  readonly now?: () => number
  readonly linkLifetimeMs?: number
  readonly sessionIdleMs?: number
}

/** The viewer's links and sessions. */
export interface ViewerAuth {
  /** A fresh link code for a viewer of `owner`'s token. */
  readonly mint: (owner: TokenIdentity) => ViewerCode
  /** A new viewer session id for a valid, unexpired code; undefined otherwise. */
  readonly redeem: (code: string) => string | undefined
  /** The token identity of a live viewer session (its idle timer restarted); undefined for an unknown or expired one. */
  readonly viewerOf: (sessionId: string) => TokenIdentity | undefined
}

interface Entry {
  readonly owner: TokenIdentity
  expiresAt: number
}

const keyOf = (secret: string) => createHash("sha256").update(secret, "utf8").digest("base64url")

const random = () => randomBytes(32).toString("base64url")

/** Drops expired entries, then the oldest while more than `MAX_LIVE - 1` remain (a Map keeps insertion order). */
const prune = (entries: Map<string, Entry>, now: number) => {
  for (const [key, entry] of entries) if (entry.expiresAt <= now) entries.delete(key)
  while (entries.size >= MAX_LIVE) entries.delete(entries.keys().next().value!)
}

/** The viewer's authentication state. */
export const makeViewerAuth = (options: ViewerAuthOptions = {}): ViewerAuth => {
  const now = options.now ?? Date.now
  const linkLifetime = options.linkLifetimeMs ?? LINK_LIFETIME_MS
  const sessionIdle = options.sessionIdleMs ?? SESSION_IDLE_MS
  const codes = new Map<string, Entry>()
  const sessions = new Map<string, Entry>()
  return {
    mint: (owner) => {
      const at = now()
      prune(codes, at)
      const code = random()
      const expiresAt = at + linkLifetime
      codes.set(keyOf(code), { owner, expiresAt })
      return { code, expiresAt }
    },
    redeem: (code) => {
      const at = now()
      const entry = codes.get(keyOf(code))
      if (entry === undefined || entry.expiresAt <= at) return undefined
      prune(sessions, at)
      const id = random()
      sessions.set(keyOf(id), { owner: entry.owner, expiresAt: at + sessionIdle })
      return id
    },
    viewerOf: (id) => {
      const at = now()
      const entry = sessions.get(keyOf(id))
      if (entry === undefined || entry.expiresAt <= at) return undefined
      entry.expiresAt = at + sessionIdle
      return entry.owner
    }
  }
}
