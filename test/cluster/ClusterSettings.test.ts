import { Result } from "effect"
import { describe, expect, it } from "vitest"
import {
  CALL_LEASE_ENV,
  DEFAULT_CALL_LEASE_MS,
  DEFAULT_RUNNER_PORT,
  DEFAULT_STOP_GRACE_MS,
  formatHostPort,
  MIN_CALL_LEASE_MS,
  MIN_LOCK_OPERATION_MS,
  resolveClusterSettings
} from "../../src/cluster/ClusterSettings.ts"

const url = "postgres://u:p@127.0.0.1:5432/db"
const secret = "0123456789abcdef".repeat(4)
const base = { VEYYON_CLUSTER_SECRET: secret }

describe("resolveClusterSettings", () => {
  it("refuses to start without a Postgres URL, naming the flag and the variable", () => {
    const result = resolveClusterSettings({}, base)
    expect(Result.isFailure(result) && result.failure.message).toMatch(/--postgres-url.*VEYYON_CLUSTER_POSTGRES_URL/)
  })

  it("takes the URL and timings from the environment, and flags over the environment", () => {
    const env = { ...base, VEYYON_CLUSTER_POSTGRES_URL: url, VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS: "12000", VEYYON_CLUSTER_LISTEN: "127.0.0.1:4000", VEYYON_CLUSTER_STOP_GRACE_MS: "2500" }
    const fromEnv = Result.getOrThrow(resolveClusterSettings({}, env))
    expect(fromEnv).toMatchObject({ postgresUrl: url, listen: { host: "127.0.0.1", port: 4000 }, shardLockExpirationMs: 12000, shardLockRefreshMs: 4000, stopGraceMs: 2500 })
    const flags = Result.getOrThrow(resolveClusterSettings({ listen: ":4100", shardLockExpirationMs: 9000, stopGraceMs: 1000 }, env))
    expect(flags).toMatchObject({ listen: { host: "127.0.0.1", port: 4100 }, advertise: { host: "127.0.0.1", port: 4100 }, shardLockExpirationMs: 9000, stopGraceMs: 1000 })
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url }, base))).toMatchObject({ shardLockExpirationMs: 35000, shardLockRefreshMs: 10000, stopGraceMs: DEFAULT_STOP_GRACE_MS })
  })

  it("listens on loopback by default and advertises the listen address", () => {
    const settings = Result.getOrThrow(resolveClusterSettings({ postgresUrl: url }, base))
    expect(settings.listen).toEqual({ host: "127.0.0.1", port: DEFAULT_RUNNER_PORT })
    expect(settings.advertise).toEqual(settings.listen)
  })

  it("advertises the host name, not a wildcard, when listening on every interface", () => {
    const settings = Result.getOrThrow(resolveClusterSettings({ postgresUrl: url, listen: "0.0.0.0:4000" }, base))
    expect(settings.advertise.host).not.toBe("0.0.0.0")
    expect(settings.advertise.port).toBe(4000)
  })

  it("refuses bad values with a sentence", () => {
    expect(Result.isFailure(resolveClusterSettings({ postgresUrl: "mysql://x" }, base))).toBe(true)
    expect(Result.isFailure(resolveClusterSettings({ postgresUrl: url, listen: "h:99999" }, base))).toBe(true)
    expect(Result.isFailure(resolveClusterSettings({ postgresUrl: url, listen: "h:0" }, base))).toBe(true)
    expect(Result.isFailure(resolveClusterSettings({ postgresUrl: url, shardLockExpirationMs: 1000, shardLockRefreshMs: 2000 }, base))).toBe(true)
    expect(Result.isFailure(resolveClusterSettings({ postgresUrl: url }, { ...base, VEYYON_CLUSTER_SHARDS: "many" }))).toBe(true)
    expect(Result.isFailure(resolveClusterSettings({ postgresUrl: url, stopGraceMs: 0 }, base))).toBe(true)
    expect(Result.isFailure(resolveClusterSettings({ postgresUrl: url }, { ...base, VEYYON_CLUSTER_STOP_GRACE_MS: "soon" }))).toBe(true)
  })

  it("takes the call lease from the flag, else the variable, else 30 s, and refuses one under 5 s with a sentence", () => {
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url }, base)).callLeaseMs).toBe(DEFAULT_CALL_LEASE_MS)
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url }, { ...base, [CALL_LEASE_ENV]: "12000" })).callLeaseMs).toBe(12000)
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url, callLeaseMs: 9000 }, { ...base, [CALL_LEASE_ENV]: "12000" })).callLeaseMs).toBe(9000)
    const short = resolveClusterSettings({ postgresUrl: url, callLeaseMs: MIN_CALL_LEASE_MS - 1 }, base)
    expect(Result.isFailure(short) && short.failure.message).toBe(
      `the call lease (${MIN_CALL_LEASE_MS - 1} ms) must be at least ${MIN_CALL_LEASE_MS} ms: a busy machine's caller may take seconds between two requests of a call`
    )
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url, callLeaseMs: MIN_CALL_LEASE_MS }, base)).callLeaseMs).toBe(MIN_CALL_LEASE_MS)
  })

  it("refuses lock timings that give a lock operation less than a busy machine needs, saying which timings do", () => {
    const atLeast = (ms: number) => new RegExp(`${ms} ms`)
    const short = resolveClusterSettings({ postgresUrl: url, shardLockExpirationMs: 5000 }, base)
    expect(Result.isFailure(short) && short.failure.message).toMatch(atLeast(3 * MIN_LOCK_OPERATION_MS))
    const fast = resolveClusterSettings({ postgresUrl: url, shardLockRefreshMs: MIN_LOCK_OPERATION_MS - 1 }, base)
    expect(Result.isFailure(fast) && fast.failure.message).toMatch(/drops all its shards/)
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url, shardLockExpirationMs: 3 * MIN_LOCK_OPERATION_MS }, base)).shardLockRefreshMs).toBe(MIN_LOCK_OPERATION_MS)
  })

  it("formats IPv6 hosts in brackets and reads them back", () => {
    expect(formatHostPort({ host: "::1", port: 5 })).toBe("[::1]:5")
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url, listen: "[::1]:7000" }, base)).listen).toEqual({ host: "::1", port: 7000 })
  })

  it("refuses to start without a cluster secret unless told to run without one, and takes it from the environment or the embedder", () => {
    const none = resolveClusterSettings({ postgresUrl: url }, {})
    expect(Result.isFailure(none) && none.failure.message).toMatch(/no cluster secret.*VEYYON_CLUSTER_SECRET_FILE/)
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url, insecureNoAuth: true }, {})).auth).toEqual({ _tag: "Insecure" })
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url }, base)).auth).toEqual({ _tag: "Secret", secret })
    expect(Result.getOrThrow(resolveClusterSettings({ postgresUrl: url, secret: `  ${secret}\n` }, {})).auth).toEqual({ _tag: "Secret", secret })
    const short = resolveClusterSettings({ postgresUrl: url }, { VEYYON_CLUSTER_SECRET: "short" })
    expect(Result.isFailure(short) && short.failure.message).toMatch(/at least 32/)
  })
})

