/**
 * `veyyon runner`: a cluster runner. Joins the cluster in Postgres (`--postgres-url` or
 * `VEYYON_CLUSTER_POSTGRES_URL`), listens for peers and clients on `--listen`, tells
 * them to reach it at `--advertise`, authenticates every connection with the cluster secret
 * (`VEYYON_CLUSTER_SECRET_FILE` or `VEYYON_CLUSTER_SECRET`; without one it refuses to start
 * unless `--insecure-no-auth` says so), and runs the kernels of the sessions whose shards
 * it owns, until SIGTERM or SIGINT: then it hands its sessions off and exits. Its kernels run
 * sandboxed, without network and under memory and pids limits unless `VEYYON_*` says otherwise.
 */
import { Context, Effect, Exit, Fiber, Layer, Option, Result, Scope } from "effect"
import { hostVariables } from "../../services/config/ConfigSources.ts"
import { Command, Flag } from "effect/cli"
import { type ClusterSettingsInput, formatHostPort, resolveClusterSettings } from "../../cluster/ClusterSettings.ts"
import { KernelRegistry, type KernelRegistryService } from "../../services/registry/KernelRegistry.ts"
import { doorSandboxDefaults } from "../../services/isolation/SandboxSettings.ts"
import { failureOf, usageError } from "../exitCodes.ts"
import { mapLayerError } from "../layerFailure.ts"

const optionalText = (name: string, pseudo: string, description: string) =>
  Flag.String(name).pipe(Flag.withMetavar(pseudo), Flag.withDescription(description), Flag.optional)

const optionalInteger = (name: string, description: string) =>
  Flag.Int(name).pipe(Flag.withMetavar("MS"), Flag.withDescription(description), Flag.optional)

const postgresUrl = optionalText("postgres-url", "URL", "The cluster's Postgres (default VEYYON_CLUSTER_POSTGRES_URL); prefer the variable, flags show in `ps`.")
const listen = optionalText("listen", "HOST:PORT", "Where to listen for peers and clients (default VEYYON_CLUSTER_LISTEN, else 127.0.0.1:34431).")
const advertise = optionalText("advertise", "HOST:PORT", "The address peers and clients reach this runner at (default VEYYON_CLUSTER_ADVERTISE, else the listen address).")
const lockExpiration = optionalInteger("shard-lock-expiration-ms", "How long a dead runner's shards stay locked (default VEYYON_CLUSTER_SHARD_LOCK_EXPIRATION_MS, else 35000).")
const lockRefresh = optionalInteger("shard-lock-refresh-ms", "How often a runner refreshes its shard locks, and how long one lock operation may take (default VEYYON_CLUSTER_SHARD_LOCK_REFRESH_MS, else 10000 or a third of the expiration; at least 3000).")
const stopGrace = optionalInteger("stop-grace-ms", "How long a stopping runner waits for its running cells before it ends its kernels (default VEYYON_CLUSTER_STOP_GRACE_MS, else 6000).")
const callLease = optionalInteger("call-lease-ms", "How long a running cell whose caller sends no request is kept before it is interrupted (default VEYYON_CLUSTER_CALL_LEASE_MS, else 30000).")
const insecureNoAuth = Flag.Boolean("insecure-no-auth").pipe(
  Flag.withDescription("Listen without the cluster secret: ANYONE who can reach the port runs code as this user. Only for a throwaway cluster on a machine you alone use."),
  Flag.withDefault(false)
)
const shards = Flag.Int("shards").pipe(
  Flag.withMetavar("N"),
  Flag.withDescription("The number of shards; every runner and client must agree (default VEYYON_CLUSTER_SHARDS, else 300)."),
  Flag.optional
)

/** What a runner started with `--insecure-no-auth` prints first. */
export const INSECURE_WARNING =
  "veyyon runner: WARNING: --insecure-no-auth: this runner does not authenticate its peers. Anyone who can reach its port " +
  "(any local user, any cell of its kernels) can run code as this user and read every session's state. Set VEYYON_CLUSTER_SECRET_FILE instead.\n"

/** How long ending the kernels may take after the stop grace (each is SIGKILLed within it). */
const KERNEL_STOP_MS = 2500

/**
 * The last resort of a stop: if the runner has not exited this long after the signal
 * (one CI run saw a runner whose Postgres was gone never finish its stop), a host timer
 * ends the process; the kernels' containment watchers then end their trees.
 */
const armHardStop = (stopGraceMs: number) =>
  Effect.sync(() => {
    const hardStopMs = stopGraceMs + KERNEL_STOP_MS + 500
    setTimeout(() => {
      process.stderr.write(`veyyon runner: the stop did not finish within ${hardStopMs} ms; exiting now\n`)
      process.exit(143)
    }, hardStopMs).unref()
  })

/** Runs `effect` on its own fiber: interrupted, it returns at once and interrupts the effect in the background. */
const detached = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.flatMap(Effect.forkDetach(effect), (fiber) =>
    Effect.onInterrupt(Fiber.join(fiber), () => Effect.asVoid(Effect.forkDetach(Fiber.interrupt(fiber)))))

/**
 * Closes the runner: hands its shards off, its running cells finishing first (bounded by
 * the stop grace: a longer cell, or a hand-off with Postgres gone, is cut there), then
 * ends every kernel still alive, so the process exits within the grace plus about 3 s of
 * SIGTERM with nothing left running.
 */
const stopRunner = (scope: Scope.Closeable, registry: KernelRegistryService, stopGraceMs: number) =>
  detached(Scope.close(scope, Exit.void)).pipe(
    Effect.timeout(stopGraceMs),
    Effect.catchTag("TimeoutError", () =>
      Effect.sync(() =>
        process.stderr.write(`veyyon runner: the hand-off did not finish within the stop grace of ${stopGraceMs} ms (a cell still running, or Postgres unreachable); ending the kernels and exiting\n`)
      ).pipe(
        Effect.andThen(detached(registry.shutdownAll).pipe(Effect.timeout(KERNEL_STOP_MS), Effect.ignore))
      ))
  )

/** The `runner` command. */
export const runnerCommand = Command.make("runner", { postgresUrl, listen, advertise, lockExpiration, lockRefresh, stopGrace, callLease, shards, insecureNoAuth }, (options) => {
  const given: ClusterSettingsInput = {
    postgresUrl: Option.getOrUndefined(options.postgresUrl),
    listen: Option.getOrUndefined(options.listen),
    advertise: Option.getOrUndefined(options.advertise),
    shardLockExpirationMs: Option.getOrUndefined(options.lockExpiration),
    shardLockRefreshMs: Option.getOrUndefined(options.lockRefresh),
    shards: Option.getOrUndefined(options.shards),
    stopGraceMs: Option.getOrUndefined(options.stopGrace),
    callLeaseMs: Option.getOrUndefined(options.callLease),
    insecureNoAuth: options.insecureNoAuth
  }
  return Result.match(resolveClusterSettings(given, hostVariables()), {
    onFailure: (problem) => Effect.fail(usageError(problem.message)),
    onSuccess: (cluster) =>
      Effect.gen(function*() {
        if (cluster.auth._tag === "Insecure") process.stderr.write(INSECURE_WARNING)
        const runner = yield* Effect.promise(() => import("../../cluster/RunnerLayer.ts"))
        const layer = mapLayerError(
          runner.runnerLayer(cluster, { settings: doorSandboxDefaults("runner") }),
          (error) => failureOf({ _tag: error._tag, message: `the runner could not start: ${error.message}` })
        )
        const scope = yield* Scope.make()
        const context = yield* Effect.onError(Layer.buildWithScope(layer, scope), (cause) => Scope.close(scope, Exit.failCause(cause)))
        process.stderr.write(`veyyon runner: serving sessions at ${formatHostPort(cluster.advertise)} (listening on ${formatHostPort(cluster.listen)})\n`)
        return yield* Effect.never.pipe(Effect.onInterrupt(() => Effect.andThen(armHardStop(cluster.stopGraceMs), stopRunner(scope, Context.get(context, KernelRegistry), cluster.stopGraceMs))))
      })
  })
}).pipe(
  Command.withDescription("Serve kernel sessions as a runner of a veyyon cluster (Postgres-backed); stops on SIGTERM, handing its sessions off.")
)
