/**
 * `veyyon mcp`: the eval tool as an MCP server (see `src/mcp/`). On stdio by default:
 * one client, one kernel session for the life of the server, stopping (and shutting its
 * kernels down) when stdin closes or on SIGINT/SIGTERM; stdout is the protocol and logs
 * go to stderr. With `--http`: streamable HTTP at `/mcp` on `--host` (default 127.0.0.1)
 * and `--port` (default 7523), a bearer token always required (`VEYYON_MCP_TOKEN`, or one
 * generated and printed once on stderr), one kernel session per MCP session.
 * On stdio cells run in the directory the server started in; over HTTP each session runs
 * in its own private directory (under `VEYYON_MCP_WORKSPACE`), removed when it ends.
 * Session ids carry 128 random bits. With `--viewer` (HTTP only) the door also serves a live
 * page of its sessions at `/viewer/` and prints its sign-in link. With `--cluster` (or `VEYYON_CLUSTER=1`)
 * cells run on a veyyon cluster's runners instead of in this process.
 */
import { Cause, Config, Effect, Exit, Fiber, Layer, Option, Result, Stdio } from "effect"
import { Command, Flag } from "effect/cli"
import * as HttpServer from "effect/http/HttpServer"
import { randomBytes } from "node:crypto"
import { createServer } from "node:http"
import { evalLayer } from "../../layers/EvalLive.ts"
import { serveMcp } from "../../mcp/EvalMcpServer.ts"
import { bearerMatches, makeHttpDoor, MCP_PATH } from "../../mcp/HttpDoor.ts"
import type { CellObserver } from "../../mcp/CellObserver.ts"
import { makeSessionWatch } from "../../mcp/viewer/SessionWatch.ts"
import { SOLE_TOKEN } from "../../mcp/viewer/ViewerAccess.ts"
import { LINK_LIFETIME_TEXT, makeViewerAuth } from "../../mcp/viewer/ViewerAuth.ts"
import { VIEWER_PATH } from "../../mcp/viewer/ViewerHtml.ts"
import { linkUrl, makeViewer, viewerOrigin } from "../../mcp/viewer/ViewerRoutes.ts"
import { SessionRecord } from "../../services/output/SessionRecord.ts"
import { progressIntervalMs } from "../../mcp/Progress.ts"
import { serveStdio, STDIO_CLIENT_ID } from "../../mcp/StdioDoor.ts"
import { defaultWorkspaceRoot, makeSessionWorkspace, type SessionWorkspace } from "../../services/storage/SessionWorkspace.ts"
import { KernelRegistry, type KernelRegistryService } from "../../services/registry/KernelRegistry.ts"
import { treeResidentBytes } from "../../process/ProcessMemory.ts"
import { doorSandboxDefaults } from "../../services/isolation/SandboxSettings.ts"
import { fromVariables, type InvalidSettings, optionalSetting, readConfig, setting } from "../../services/config/ConfigSources.ts"
import { Settings, type SettingsInput } from "../../services/config/Settings.ts"
import { FlagText, TrimmedText } from "../../services/config/Spellings.ts"
import type { EnvRecord } from "../../services/isolation/EnvPolicy.ts"
import { failureOf, usageError } from "../exitCodes.ts"
import { mapLayerError } from "../layerFailure.ts"
import { cliSettings } from "../session.ts"
import { VERSION } from "../version.ts"

/** The port `mcp --http` listens on unless `--port` says otherwise. */
export const DEFAULT_MCP_PORT = 7523

/** The host `mcp --http` listens on unless `--host` says otherwise. */
export const DEFAULT_MCP_HOST = "127.0.0.1"

/** The environment variable holding the HTTP door's bearer token. */
export const MCP_TOKEN_ENV = "VEYYON_MCP_TOKEN"

/**
 * The settings each door starts from. stdio serves the one local client that started
 * it and keeps its kernel for the life of the server; HTTP serves remote callers, whose
 * kernels idle out and run sandboxed, without network and under memory and pids limits
 * (`REMOTE_DOOR_DEFAULTS`; each `VEYYON_*` variable still wins). Both keep a spare Python
 * kernel: a server lives for many cells, resets and sessions.
 */
export const doorSettings = (door: "stdio" | "http"): SettingsInput => ({
  ...cliSettings({ longLived: door === "stdio", spares: true }),
  ...doorSandboxDefaults(door === "http" ? "mcp-http" : "mcp")
})

/** The variable setting the interval of a long call's progress notifications, in ms. */
export const MCP_PROGRESS_INTERVAL_ENV = "VEYYON_MCP_PROGRESS_INTERVAL_MS"

/** The variable naming the root of the HTTP door's per-session directories (default `<state dir>/workspaces/mcp-http`). */
export const MCP_WORKSPACE_ENV = "VEYYON_MCP_WORKSPACE"

/** The variable naming the stdio door's session, as `--session` does. */
export const MCP_SESSION_ENV = "VEYYON_MCP_SESSION"

/** The environment variable that makes `veyyon mcp` a cluster client, as `--cluster` does. */
export const MCP_CLUSTER_ENV = "VEYYON_CLUSTER"

/** The environment variable that turns the viewer page on, as `--viewer` does. */
export const MCP_VIEWER_ENV = "VEYYON_MCP_VIEWER"

/** What `veyyon mcp` reads from its variables. */
export interface McpVariables {
  /** The interval of a long call's progress notifications (`VEYYON_MCP_PROGRESS_INTERVAL_MS`, kept within bounds). */
  readonly progressIntervalMs: number
  /** The HTTP door's bearer token (`VEYYON_MCP_TOKEN`), when one is set. */
  readonly token: string | undefined
  /** The root of the HTTP door's per-session directories (`VEYYON_MCP_WORKSPACE`), when one is set. */
  readonly workspace: string | undefined
  /** Whether to serve as a cluster client (`VEYYON_CLUSTER`, a boolean). */
  readonly cluster: boolean
  /** The stdio door's session id (`VEYYON_MCP_SESSION`), when one is set. */
  readonly session: string | undefined
  /** Whether the HTTP door also serves the viewer page (`VEYYON_MCP_VIEWER`, a boolean). */
  readonly viewer: boolean
}

const mcpConfig: Config.Config<McpVariables> = Config.all({
  progressIntervalMs: Config.map(optionalSetting(TrimmedText, MCP_PROGRESS_INTERVAL_ENV), progressIntervalMs),
  token: optionalSetting(TrimmedText, MCP_TOKEN_ENV),
  workspace: optionalSetting(TrimmedText, MCP_WORKSPACE_ENV),
  cluster: setting(FlagText, MCP_CLUSTER_ENV).pipe(Config.withDefault(false)),
  session: optionalSetting(TrimmedText, MCP_SESSION_ENV),
  viewer: setting(FlagText, MCP_VIEWER_ENV).pipe(Config.withDefault(false))
})

/** The variables of `veyyon mcp` from `env` (the process's by default); an unreadable one fails naming it. */
export const readMcpVariables = (env?: EnvRecord): Result.Result<McpVariables, InvalidSettings> =>
  readConfig(mcpConfig, fromVariables(env))

const serveOptions = (variables: McpVariables, options: { readonly sessionDirs?: SessionWorkspace; readonly sessionId?: string | undefined; readonly observer?: CellObserver } = {}) => ({
  version: VERSION,
  progressIntervalMs: variables.progressIntervalMs,
  sessionDirs: options.sessionDirs,
  sessionId: options.sessionId,
  observer: options.observer
})

/** The longest session id `--session` takes. */
const MAX_SESSION_ID = 200

/** The HTTP door's per-session directories: under `VEYYON_MCP_WORKSPACE`, else the default root. */
const httpSessionDirs = (variables: McpVariables): SessionWorkspace =>
  makeSessionWorkspace(variables.workspace ?? defaultWorkspaceRoot("mcp-http"))

const writeStdout = (line: string) =>
  Effect.callback<void>((resume) => {
    if (process.stdout.destroyed || process.stdout.writableEnded) return resume(Effect.void)
    process.stdout.write(line, () => resume(Effect.void))
  })

/** The cluster client's layer, its modules loaded only when asked for (they are most of the CLI's start-up otherwise). */
const clusterToolLayer = (settings: SettingsInput, insecureNoAuth: boolean) =>
  Layer.unwrap(Effect.map(Effect.promise(() => import("../../cluster/EvalClusterLayer.ts")), (cluster) =>
    cluster.evalClusterLayer({ settings, cluster: { insecureNoAuth } })))

/** How the tool runs: in this process, or on a cluster's runners (`insecureNoAuth`: without the cluster secret). */
type Placement = { readonly _tag: "Local" } | { readonly _tag: "Cluster"; readonly insecureNoAuth: boolean }

/** The tool's layer for a door: kernels in this process, or (with `--cluster`) on the cluster's runners. */
const toolLayer = (door: "stdio" | "http", placement: Placement) =>
  mapLayerError(
    placement._tag === "Cluster" ? clusterToolLayer(doorSettings(door), placement.insecureNoAuth) : evalLayer({ settings: doorSettings(door) }),
    failureOf
  )

/** Starts the default backend's spare for the server's directory (where its cells run) while the client connects; none as a cluster client. */
const prepareSpares = Effect.flatMap(Effect.serviceOption(KernelRegistry), (registry) =>
  Option.isSome(registry) ? registry.value.prepareSpares({ cwd: process.cwd() }) : Effect.void)

const stdioServer = (cluster: Placement, variables: McpVariables, sessionId: string | undefined) =>
  prepareSpares.pipe(
    // The client's session ends with the server (stdin closed, a signal): on a cluster, its kernels on the runner too.
    // Its saved state is kept for a named session (a server started again with it restores it); nobody can name a random one again.
    Effect.andThen(serveMcp(serveOptions(variables, { sessionId }), (door, sessions) =>
      Effect.gen(function*() {
        const stdio = yield* Stdio.Stdio
        yield* serveStdio(door, stdio.stdin, writeStdout)
      }).pipe(Effect.ensuring(sessions.end(STDIO_CLIENT_ID, { forget: sessionId === undefined }))))),
    Effect.provide(toolLayer("stdio", cluster))
  )

/** What a session's kernels hold in memory now (their process trees' resident sets), when any can be measured. */
const kernelMemory = (registry: KernelRegistryService) => (sessionId: string) =>
  Effect.map(registry.sessionPids(sessionId), (kernels) => {
    const measured = kernels.map((kernel) => treeResidentBytes(kernel.pid)).filter((bytes): bytes is number => bytes !== undefined)
    return measured.length === 0 ? undefined : measured.reduce((sum, bytes) => sum + bytes, 0)
  })

const tokenOf = (given: string | undefined): { readonly token: string; readonly generated: boolean } =>
  given !== undefined ? { token: given, generated: false } : { token: randomBytes(32).toString("base64url"), generated: true }

/** Node's HTTP server as a layer, its module (with undici and ws) loaded only for `--http`: it is a third of the CLI's start-up otherwise. */
const nodeHttpServer = (host: string, port: number) =>
  Layer.unwrap(Effect.map(Effect.promise(() => import("@effect/platform-node/NodeHttpServer")), (NodeHttpServer) => NodeHttpServer.layer(createServer, { host, port })))

const httpServer = (host: string, port: number, cluster: Placement, variables: McpVariables, withViewer: boolean) =>
  Effect.gen(function*() {
    const { token, generated } = tokenOf(variables.token)
    const settings = yield* Settings
    const records = yield* Effect.serviceOption(SessionRecord)
    const registry = yield* Effect.serviceOption(KernelRegistry)
    const watch = withViewer && Option.isSome(records) ? makeSessionWatch() : undefined
    yield* prepareSpares
    yield* serveMcp(serveOptions(variables, { ...(cluster._tag === "Local" ? { sessionDirs: httpSessionDirs(variables) } : {}), ...(watch === undefined ? {} : { observer: watch.observer }) }), (door, sessions) =>
      Effect.gen(function*() {
        const server = yield* HttpServer.HttpServer
        const origin = server.address._tag === "UnixPathAddress" ? undefined : viewerOrigin(host, server.address.port)
        const auth = makeViewerAuth()
        const viewer = watch === undefined || origin === undefined || Option.isNone(records) ? undefined : makeViewer({
          origin,
          watch,
          auth,
          authenticate: (header) => (bearerMatches(header, token) ? SOLE_TOKEN : undefined),
          notebook: (sessionId) => records.value.notebook(sessionId),
          ...(Option.isNone(registry) ? {} : { memoryOf: kernelMemory(registry.value) })
        })
        const router = yield* makeHttpDoor(door, sessions, {
          token,
          host,
          idleTtlMs: settings.kernel.idleTtlMs,
          ...(viewer === undefined ? {} : { beside: { prefix: VIEWER_PATH, app: viewer } })
        })
        yield* server.serve(router)
        const address = server.address._tag === "UnixPathAddress" ? MCP_PATH : `${HttpServer.formatAddress(server.address)}${MCP_PATH}`
        process.stderr.write(`veyyon mcp: serving MCP (streamable HTTP) at ${address}\n`)
        if (generated) process.stderr.write(`veyyon mcp: bearer token (set ${MCP_TOKEN_ENV} to choose your own): ${token}\n`)
        if (viewer !== undefined && origin !== undefined) {
          process.stderr.write(
            `veyyon mcp: viewer page (this link works for ${LINK_LIFETIME_TEXT}; POST ${VIEWER_PATH}/link with the bearer token for a fresh one): ${linkUrl(origin, auth.mint(SOLE_TOKEN).code)}\n`
          )
        }
        return yield* Effect.never
      }).pipe(Effect.scoped))
  }).pipe(
    Effect.provide(nodeHttpServer(host, port)),
    Effect.provide(toolLayer("http", cluster)),
    Effect.catchTag("ServeError", (error) =>
      Effect.fail(usageError(`cannot listen on ${host}:${port} (${String(error.cause)}); choose another --host or --port`)))
  )

/** Serves until stdin closes or a signal arrives (stdio), or until a signal (HTTP). */
const serve = <E, R>(server: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(server)
    const exit = yield* Fiber.await(fiber)
    if (Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)) return yield* Effect.failCause(exit.cause)
  })

const cluster = Flag.Boolean("cluster").pipe(
  Flag.withDescription(`Run cells on a veyyon cluster's runners instead of in this process (also ${MCP_CLUSTER_ENV}=1; the cluster's Postgres from VEYYON_CLUSTER_POSTGRES_URL, its secret from VEYYON_CLUSTER_SECRET_FILE).`),
  Flag.withDefault(false)
)
const insecureNoAuth = Flag.Boolean("insecure-no-auth").pipe(
  Flag.withDescription("With --cluster: talk to runners started with --insecure-no-auth, without the cluster secret (VEYYON_CLUSTER_SECRET_FILE)."),
  Flag.withDefault(false)
)
const http = Flag.Boolean("http").pipe(
  Flag.withDescription(`Serve streamable HTTP at ${MCP_PATH} instead of stdio (bearer token required).`),
  Flag.withDefault(false)
)
const host = Flag.String("host").pipe(
  Flag.withMetavar("HOST"),
  Flag.withDescription(`With --http: the address to listen on (default ${DEFAULT_MCP_HOST}).`),
  Flag.withDefault(DEFAULT_MCP_HOST)
)
const session = Flag.String("session").pipe(
  Flag.withMetavar("ID"),
  Flag.withDescription(
    `On stdio: the session the client's cells run in (also ${MCP_SESSION_ENV}); a server started again with the same ID finds its kv, artifacts and variables (restored). Default: a new random session.`
  ),
  Flag.optional
)
const viewer = Flag.Boolean("viewer").pipe(
  Flag.withDescription(`With --http: also serve a live page of the sessions at /viewer/ for the people behind the agents (also ${MCP_VIEWER_ENV}=1; a sign-in link is printed at start).`),
  Flag.withDefault(false)
)
const port = Flag.Int("port").pipe(
  Flag.withMetavar("PORT"),
  Flag.withDescription(`With --http: the TCP port (default ${DEFAULT_MCP_PORT}; 0 picks a free one).`),
  Flag.withDefault(DEFAULT_MCP_PORT)
)

/** The `mcp` command. */
export const mcpCommand = Command.make("mcp", { http, host, port, cluster, insecureNoAuth, session, viewer }, (options) => {
  if (!options.http && (options.host !== DEFAULT_MCP_HOST || options.port !== DEFAULT_MCP_PORT)) {
    return Effect.fail(usageError("--host and --port apply only with --http"))
  }
  if (options.port < 0 || options.port > 65535) return Effect.fail(usageError("--port must be between 0 and 65535"))
  const variables = readMcpVariables()
  if (Result.isFailure(variables)) return Effect.fail(failureOf(variables.failure))
  const asClient = options.cluster || variables.success.cluster
  if (options.insecureNoAuth && !asClient) return Effect.fail(usageError("--insecure-no-auth applies only with --cluster"))
  const withViewer = options.viewer || variables.success.viewer
  if (withViewer && !options.http) return Effect.fail(usageError("--viewer applies only with --http (the page is served beside /mcp)"))
  if (withViewer && asClient) {
    return Effect.fail(usageError("--viewer is not available with --cluster yet: the cells' records and live output live on the runners, not in this process"))
  }
  const placement: Placement = asClient ? { _tag: "Cluster", insecureNoAuth: options.insecureNoAuth } : { _tag: "Local" }
  const sessionId = Option.getOrUndefined(options.session) ?? variables.success.session
  if (options.http && Option.isSome(options.session)) return Effect.fail(usageError("--session applies only on stdio: each HTTP client gets its own session"))
  if (sessionId !== undefined && (sessionId.length === 0 || sessionId.length > MAX_SESSION_ID || /[\u0000-\u001f]/.test(sessionId))) {
    return Effect.fail(usageError(`the session id must be 1 to ${MAX_SESSION_ID} characters without control characters`))
  }
  return serve(
    options.http
      ? httpServer(options.host, options.port, placement, variables.success, withViewer)
      : stdioServer(placement, variables.success, sessionId)
  )
}).pipe(
  Command.withDescription("Serve the eval tool to MCP clients on stdio, or with --http over streamable HTTP; state persists per session.")
)

