/**
 * How a process joins the cluster: the Postgres URL, the cluster secret, this runner's
 * listen and advertised addresses, the shard and lock timings, and a runner's stop grace. From an object with the
 * `VEYYON_CLUSTER_*` environment on top (a runner's flags are applied as the object). Pure
 * apart from reading the environment it is given and the secret's file.
 */
import { Data, Result } from "effect"
import * as os from "node:os"
import { readText } from "../services/config/ConfigSources.ts"
import { resolveSecret, SECRET_ENV, SECRET_FILE_ENV } from "./ClusterSecret.ts"
import type { MeshAuth } from "./MeshSockets.ts"

/** The default port runners listen on for each other and for clients. */
export const DEFAULT_RUNNER_PORT = 34431

/** The default shard lock expiry: how long a killed runner's sessions wait before another runner takes them. */
export const DEFAULT_SHARD_LOCK_EXPIRATION_MS = 35_000

/** The default shard lock refresh interval (well under the expiry). */
export const DEFAULT_SHARD_LOCK_REFRESH_MS = 10_000

/**
 * The least time a lock operation (refresh, acquire, release) may take before the runner
 * gives its locks up: the library allows each the refresh interval, at most a third of the
 * expiry, and a runner whose operation overruns drops every shard. Under this a busy
 * two-core machine trips it (1.7 s did, with a 5 s expiry).
 */
export const MIN_LOCK_OPERATION_MS = 3000

/** The default time a stopping runner gives its running cells to finish before it ends them. */
export const DEFAULT_STOP_GRACE_MS = 6000

/**
 * The default time a runner keeps a running cell whose caller has not asked for its outputs:
 * a caller asks again as soon as an answer arrives, so a call this long without a request
 * has lost its caller (its process died between two requests), and its cell is interrupted.
 */
export const DEFAULT_CALL_LEASE_MS = 30_000

/** The least call lease allowed: a loaded machine's caller may take seconds between two requests. */
export const MIN_CALL_LEASE_MS = 5000

/** The default number of shards; every runner and client of a cluster must agree on it. */
export const DEFAULT_SHARDS = 300

/** A host and port. */
export interface HostPort {
  readonly host: string
  readonly port: number
}

/** The resolved cluster settings. */
export interface ClusterSettings {
  /** `postgres://` URL of the database holding shard locks, runners, messages and the session ledger. */
  readonly postgresUrl: string
  /** How connections to and from runner ports authenticate. */
  readonly auth: MeshAuth
  /** Where this runner listens for other runners and clients. */
  readonly listen: HostPort
  /** The address other processes reach this runner at. */
  readonly advertise: HostPort
  readonly shardLockExpirationMs: number
  readonly shardLockRefreshMs: number
  readonly shards: number
  /** How long a stopping runner (SIGTERM) waits for its running cells before it ends its kernels and exits. */
  readonly stopGraceMs: number
  /** How long a runner keeps a running cell whose caller sends no request before it interrupts it. */
  readonly callLeaseMs: number
}

/** Cluster settings as given (every field optional). */
export interface ClusterSettingsInput {
  readonly postgresUrl?: string | undefined
  /** The cluster secret (an embedder's own); else `VEYYON_CLUSTER_SECRET_FILE` or `VEYYON_CLUSTER_SECRET`. */
  readonly secret?: string | undefined
  /** Run without the mesh handshake (`--insecure-no-auth`): anyone reaching a runner's port runs code on it. */
  readonly insecureNoAuth?: boolean | undefined
  /** `host:port`, `host` or `:port`. */
  readonly listen?: string | undefined
  /** `host:port`, `host` or `:port`. */
  readonly advertise?: string | undefined
  readonly shardLockExpirationMs?: number | undefined
  readonly shardLockRefreshMs?: number | undefined
  readonly shards?: number | undefined
  readonly stopGraceMs?: number | undefined
  readonly callLeaseMs?: number | undefined
}

/** Cluster settings that cannot be used, with a sentence saying which and how to fix it. */
export class InvalidClusterSettings extends Data.TaggedError("InvalidClusterSettings")<{ readonly problem: string }> {
  override get message(): string {
    return this.problem
  }
}

/** The environment variable holding the Postgres URL. */
export const POSTGRES_URL_ENV = "VEYYON_CLUSTER_POSTGRES_URL"

/** The environment variable holding a runner's call lease (ms). */
export const CALL_LEASE_ENV = "VEYYON_CLUSTER_CALL_LEASE_MS"

/** The environment variable holding a runner's stop grace (ms). */
export const STOP_GRACE_ENV = "VEYYON_CLUSTER_STOP_GRACE_MS"

const parseHostPort = (raw: string, fallback: HostPort, source: string): Result.Result<HostPort, InvalidClusterSettings> => {
  const text = raw.trim()
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text)
  const plain = /^([^:]*)(?::(\d+))?$/.exec(text)
  const match = bracketed ?? plain
  if (match === null) return Result.fail(new InvalidClusterSettings({ problem: `${source}: ${JSON.stringify(raw)} is not host:port` }))
  const host = match[1] === undefined || match[1] === "" ? fallback.host : match[1]
  const port = match[2] === undefined ? fallback.port : Number(match[2])
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    return Result.fail(new InvalidClusterSettings({ problem: `${source}: the port of ${JSON.stringify(raw)} must be 0..65535` }))
  }
  return Result.succeed({ host, port })
}

const positiveMs = (value: number | undefined, source: string): Result.Result<number | undefined, InvalidClusterSettings> =>
  value === undefined || (Number.isSafeInteger(value) && value > 0)
    ? Result.succeed(value)
    : Result.fail(new InvalidClusterSettings({ problem: `${source} must be a positive whole number, got ${String(value)}` }))

const envNumber = (env: Readonly<Record<string, string | undefined>>, name: string): Result.Result<number | undefined, InvalidClusterSettings> => {
  const raw = readText(name, env)
  if (raw === undefined) return Result.succeed(undefined)
  const value = Number(raw)
  return Number.isSafeInteger(value) && value > 0
    ? Result.succeed(value)
    : Result.fail(new InvalidClusterSettings({ problem: `${name}: ${JSON.stringify(raw)} is not a positive whole number` }))
}

const wildcard = (host: string) => host === "0.0.0.0" || host === "::" || host === ""

/**
 * The cluster settings: `given` wins (a runner's flags), then `VEYYON_CLUSTER_*` of `env`,
 * then the defaults. Fails when no Postgres URL is given.
 */
export const resolveClusterSettings = (
  given: ClusterSettingsInput,
  env: Readonly<Record<string, string | undefined>>
): Result.Result<ClusterSettings, InvalidClusterSettings> =>
  Result.gen(function*() {
    const postgresUrl = given.postgresUrl?.trim() || readText(POSTGRES_URL_ENV, env)
    if (postgresUrl === undefined) {
      return yield* Result.fail(new InvalidClusterSettings({
        problem: `no Postgres URL for the cluster: pass --postgres-url postgres://USER:PASSWORD@HOST:PORT/DB or set ${POSTGRES_URL_ENV}`
      }))
    }
    if (!/^postgres(ql)?:\/\//.test(postgresUrl)) {
      return yield* Result.fail(new InvalidClusterSettings({ problem: `the Postgres URL must start with postgres:// (got a value starting ${JSON.stringify(postgresUrl.slice(0, 12))})` }))
    }
    const secret = yield* Result.mapError(resolveSecret(given.secret, env), (problem) => new InvalidClusterSettings({ problem }))
    if (secret === undefined && given.insecureNoAuth !== true) {
      return yield* Result.fail(new InvalidClusterSettings({
        problem: `no cluster secret: set ${SECRET_FILE_ENV} to a file only you can read holding one (make it with: openssl rand -hex 32), ` +
          `or ${SECRET_ENV}; every runner and client of the cluster needs the same one`
      }))
    }
    const auth: MeshAuth = secret === undefined ? { _tag: "Insecure" } : { _tag: "Secret", secret }
    const listenRaw = given.listen ?? readText("VEYYON_CLUSTER_LISTEN", env)
    const listen = listenRaw === undefined
      ? { host: "127.0.0.1", port: DEFAULT_RUNNER_PORT }
      : yield* parseHostPort(listenRaw, { host: "127.0.0.1", port: DEFAULT_RUNNER_PORT }, "the listen address")
    const advertiseRaw = given.advertise ?? readText("VEYYON_CLUSTER_ADVERTISE", env)
    const advertiseDefault = { host: wildcard(listen.host) ? os.hostname() : listen.host, port: listen.port }
    const advertise = advertiseRaw === undefined
      ? advertiseDefault
      : yield* parseHostPort(advertiseRaw, advertiseDefault, "the advertised address")
    if (advertise.port === 0) {
      return yield* Result.fail(new InvalidClusterSettings({ problem: "the advertised address needs a real port: listen on a fixed port (not 0)" }))
    }
    const expiration = (yield* positiveMs(given.shardLockExpirationMs, "the shard lock expiration")) ??
      (yield* envNumber(env, "VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS")) ?? DEFAULT_SHARD_LOCK_EXPIRATION_MS
    const refresh = (yield* positiveMs(given.shardLockRefreshMs, "the shard lock refresh interval")) ??
      (yield* envNumber(env, "VEYYON_CLUSTER_SHARD_LOCK_REFRESH_MS")) ?? Math.min(DEFAULT_SHARD_LOCK_REFRESH_MS, Math.max(1, Math.floor(expiration / 3)))
    if (refresh >= expiration) {
      return yield* Result.fail(new InvalidClusterSettings({ problem: `the shard lock refresh interval (${refresh} ms) must be shorter than its expiration (${expiration} ms)` }))
    }
    const operation = Math.min(refresh, Math.floor(expiration / 3))
    if (operation < MIN_LOCK_OPERATION_MS) {
      return yield* Result.fail(new InvalidClusterSettings({
        problem: `the shard lock timings give each lock operation ${operation} ms (the refresh interval, at most a third of the expiration); ` +
          `a runner whose lock operation takes longer drops all its shards, which a busy machine does below ${MIN_LOCK_OPERATION_MS} ms: ` +
          `use an expiration of at least ${3 * MIN_LOCK_OPERATION_MS} ms and a refresh interval of at least ${MIN_LOCK_OPERATION_MS} ms`
      }))
    }
    const shards = (yield* positiveMs(given.shards, "the shard count")) ?? (yield* envNumber(env, "VEYYON_CLUSTER_SHARDS")) ?? DEFAULT_SHARDS
    const stopGraceMs = (yield* positiveMs(given.stopGraceMs, "the stop grace")) ?? (yield* envNumber(env, STOP_GRACE_ENV)) ?? DEFAULT_STOP_GRACE_MS
    const callLeaseMs = (yield* positiveMs(given.callLeaseMs, "the call lease")) ?? (yield* envNumber(env, CALL_LEASE_ENV)) ?? DEFAULT_CALL_LEASE_MS
    if (callLeaseMs < MIN_CALL_LEASE_MS) {
      return yield* Result.fail(new InvalidClusterSettings({
        problem: `the call lease (${callLeaseMs} ms) must be at least ${MIN_CALL_LEASE_MS} ms: a busy machine's caller may take seconds between two requests of a call`
      }))
    }
    return { postgresUrl, auth, listen, advertise, shardLockExpirationMs: expiration, shardLockRefreshMs: refresh, shards, stopGraceMs, callLeaseMs }
  })

/** `host:port` of an address, with an IPv6 host bracketed. */
export const formatHostPort = (address: HostPort): string =>
  address.host.includes(":") ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`
