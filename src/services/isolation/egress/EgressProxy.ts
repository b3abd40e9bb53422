/**
 * One session's egress proxy as a scoped resource: an HTTP proxy (see `ProxyServer`) on a Unix
 * socket in a fresh 0700 directory of its own inside a private directory of ours (both
 * checked), so only the running user (and the sandbox the socket is bound into) can reach it.
 * Closing the scope closes the server, destroys every connection, interrupts pending
 * resolutions and removes the socket and its directory.
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Effect, FiberSet, Schema, type Scope } from "effect"
import { admit } from "./Admission.ts"
import type { AllowList } from "./AllowHosts.ts"
import type { EgressEvent } from "./EgressEvent.ts"
import { DEFAULT_EGRESS_LIMITS, type EgressLimits } from "./EgressLimits.ts"
import { EgressResolver } from "./EgressResolver.ts"
import { createProxyServer, type EgressUsage } from "./ProxyServer.ts"
import { ensurePrivateDir, ownDirProblem, PRIVATE_FILE_MODE } from "../../storage/PrivateDir.ts"

/** The longest Unix socket path Linux accepts (sun_path holds 108 bytes with the terminating NUL). */
export const MAX_SOCKET_PATH_BYTES = 107

/** The socket's file name inside the proxy's directory. */
export const EGRESS_SOCKET_NAME = "egress.sock"

/** The proxy could not start. */
export class EgressProxyFailed extends Schema.TaggedError<EgressProxyFailed>()("EgressProxyFailed", {
  reason: Schema.String
}) {
  override get message(): string {
    return `The sandbox's egress proxy could not start: ${this.reason}.`
  }
}

/** What one proxy is told. */
export interface EgressProxyOptions {
  readonly allow: AllowList
  /** A private directory of ours (0700, checked) in which the proxy makes its own directory for the socket. */
  readonly directory: string
  readonly limits?: Partial<EgressLimits>
  /** Called with every destination decided about, in order. */
  readonly onEvent?: (event: EgressEvent) => void
}

/** A running proxy. */
export interface EgressProxy {
  /** The Unix socket clients connect to. */
  readonly socketPath: string
  readonly limits: EgressLimits
  /** Connections open now and bytes relayed so far. */
  readonly usage: () => EgressUsage
}

const fail = (reason: string) => new EgressProxyFailed({ reason })

/** A fresh 0700 directory for the socket under the checked private `parent`, removed with the scope. */
const socketDirectory = (parent: string): Effect.Effect<string, EgressProxyFailed, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const checked = yield* Effect.mapError(ensurePrivateDir(parent), (refused) => fail(refused.message))
      const dir = yield* Effect.try({
        try: () => NodeFs.mkdtempSync(NodePath.join(checked, "egress-")),
        catch: (error) => fail(`cannot create a directory in ${checked}: ${(error as Error).message}`)
      })
      const problem = ownDirProblem(NodeFs.lstatSync(dir))
      if (problem !== undefined) return yield* fail(`${dir} is not private: ${problem}`)
      return dir
    }),
    (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
  )

/** Starts a proxy for one session; it serves until the scope closes. */
export const makeEgressProxy = Effect.fnUntraced(function*(
  options: EgressProxyOptions
): Effect.fn.Return<EgressProxy, EgressProxyFailed, EgressResolver | Scope.Scope> {
  const limits: EgressLimits = { ...DEFAULT_EGRESS_LIMITS, ...options.limits }
  const resolver = yield* EgressResolver
  const dir = yield* socketDirectory(options.directory)
  const socketPath = NodePath.join(dir, EGRESS_SOCKET_NAME)
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
    return yield* fail(`its socket path ${socketPath} is longer than the ${MAX_SOCKET_PATH_BYTES} bytes a Unix socket path may have; use a shorter state directory`)
  }
  const runPromise = yield* FiberSet.makeRuntimePromise<never>()
  const onEvent = options.onEvent ?? (() => undefined)
  const proxy = createProxyServer({
    admit: (via, host, port) => runPromise(Effect.provideService(admit(options.allow, via, host, port), EgressResolver, resolver)),
    limits,
    report: (event) => {
      try {
        onEvent(event)
      } catch {
        // a reporting callback that throws must not take a connection down with it
      }
    }
  })
  yield* Effect.acquireRelease(
    Effect.callback<void, EgressProxyFailed>((resume) => {
      const onError = (error: Error) => resume(Effect.fail(fail(`cannot listen on ${socketPath}: ${error.message}`)))
      proxy.server.once("error", onError)
      proxy.server.listen(socketPath, () => {
        proxy.server.off("error", onError)
        proxy.server.on("error", () => undefined)
        NodeFs.chmodSync(socketPath, PRIVATE_FILE_MODE)
        resume(Effect.void)
      })
    }),
    () =>
      Effect.callback<void>((resume) => {
        proxy.server.close(() => resume(Effect.void))
        proxy.destroyAll()
        proxy.server.closeAllConnections()
      })
  )
  return { socketPath, limits, usage: proxy.usage }
})
