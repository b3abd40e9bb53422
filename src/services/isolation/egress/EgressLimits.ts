/** The bounds of one session's egress proxy, and their defaults. */

/** What one session's proxy allows itself. */
export interface EgressLimits {
  /** Client connections open at once (a tunnel counts once); more are answered 503 and closed. */
  readonly maxConnections: number
  /** Bytes relayed in both directions over the proxy's life; past it every connection is closed and new ones refused. */
  readonly maxBytes: number
  /** The largest request head (request line and headers) accepted, in bytes; larger ones are answered 431. */
  readonly maxHeaderBytes: number
  /** How long a client may take to send a request head, in milliseconds. */
  readonly headersTimeoutMs: number
  /** How long a connection (either side of a tunnel) may stay silent before it is closed, in milliseconds. */
  readonly idleTimeoutMs: number
  /** How long connecting to one upstream address may take, in milliseconds. */
  readonly connectTimeoutMs: number
}

/** The limits unless a caller gives others: generous for package installs, finite for everything. */
export const DEFAULT_EGRESS_LIMITS: EgressLimits = {
  maxConnections: 64,
  maxBytes: 8 * 1024 * 1024 * 1024,
  maxHeaderBytes: 16 * 1024,
  headersTimeoutMs: 30_000,
  idleTimeoutMs: 300_000,
  connectTimeoutMs: 30_000
}
