/**
 * One kernel's way out under `sandbox.network: allowlist`: its own egress proxy, started in
 * the kernel's scope (so it ends with the kernel) with its socket in a fresh 0700 directory
 * under the user's private state directory (`<state>/egress/`), and the stream of what the
 * proxy decided as outputs for the running cell (see `EgressReport`).
 */
import * as NodePath from "node:path"
import { Effect, Queue, type Scope, Stream } from "effect"
import { KernelStartError } from "../../../kernel/KernelError.ts"
import type { KernelOutput } from "../../../kernel/KernelOutput.ts"
import { processUserDirsContext, userStateDir } from "../../storage/PrivateDir.ts"
import type { AllowList } from "./AllowHosts.ts"
import { makeEgressProxy } from "./EgressProxy.ts"
import { egressOutputs } from "./EgressReport.ts"
import { EgressResolver } from "./EgressResolver.ts"

/** The private directory the proxies' socket directories are made in. */
export const egressStateDir = (): string => NodePath.join(userStateDir(processUserDirsContext()), "egress")

/** A started kernel proxy: the directory to bind into the sandbox, and its decisions as cell outputs. */
export interface KernelEgress {
  readonly socketDir: string
  readonly notes: Stream.Stream<KernelOutput>
}

/** Starts the proxy for one kernel in the current scope; a failure to start is the kernel's start error. */
export const startKernelEgress = Effect.fnUntraced(function*(
  allow: AllowList,
  resolver: EgressResolver["Service"],
  directory: string = egressStateDir()
): Effect.fn.Return<KernelEgress, KernelStartError, Scope.Scope> {
  const decisions = yield* Queue.unbounded<KernelOutput>()
  const proxy = yield* makeEgressProxy({
    allow,
    directory,
    onEvent: (event) => {
      for (const output of egressOutputs(event)) Queue.offerUnsafe(decisions, output)
    }
  }).pipe(
    Effect.provideService(EgressResolver, resolver),
    Effect.mapError((failed) => new KernelStartError({ reason: failed.message, stderr: "" }))
  )
  return { socketDir: NodePath.dirname(proxy.socketPath), notes: Stream.fromQueue(decisions) }
})
