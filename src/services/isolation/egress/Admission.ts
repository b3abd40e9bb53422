/**
 * The egress proxy's decision about one destination: the allowlist first (no name it refuses
 * is ever resolved), then the host side's resolution, then every resolved address checked, so
 * a listed name that resolves to loopback, link-local, unspecified or multicast space is
 * refused as a whole (a name with one bad address among good ones included).
 */
import { Effect } from "effect"
import { type AllowList, decideHost } from "./AllowHosts.ts"
import { forbiddenAddress } from "./AddressPolicy.ts"
import type { EgressEvent, EgressVia } from "./EgressEvent.ts"
import { EgressResolver } from "./EgressResolver.ts"

/** Admitted with the addresses to connect to (pinned: never resolved again), or the event that says why not. */
export type Admission =
  | { readonly _tag: "Admitted"; readonly event: Extract<EgressEvent, { _tag: "Allowed" }> }
  | { readonly _tag: "Denied"; readonly event: Extract<EgressEvent, { _tag: "Refused" | "Failed" }> }

/** Decides whether `via` may reach (rawHost, port) under `allow`, resolving only names the list admits. */
export const admit = Effect.fnUntraced(function*(
  allow: AllowList,
  via: EgressVia,
  rawHost: string,
  port: number
): Effect.fn.Return<Admission, never, EgressResolver> {
  const decision = decideHost(allow, rawHost, port)
  if (decision._tag === "Refused") {
    const { reason, host, detail } = decision
    return { _tag: "Denied", event: { _tag: "Refused", via, host, port, reason, detail } }
  }
  const host = decision.host
  const resolved = yield* Effect.result((yield* EgressResolver).lookup(host))
  if (resolved._tag === "Failure") {
    return { _tag: "Denied", event: { _tag: "Failed", via, host, port, detail: resolved.failure.message } }
  }
  const addresses = resolved.success.map((found) => found.address)
  for (const address of addresses) {
    const kind = forbiddenAddress(address)
    if (kind !== undefined) {
      return {
        _tag: "Denied",
        event: { _tag: "Refused", via, host, port, reason: "forbidden-address", detail: `${host} resolves to ${address}, a ${kind} address` }
      }
    }
  }
  return { _tag: "Admitted", event: { _tag: "Allowed", via, host, port, addresses } }
})
