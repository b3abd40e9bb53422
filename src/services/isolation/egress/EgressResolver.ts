/**
 * The `EgressResolver` service: the host side's name resolution for the egress proxy, asked
 * only about names the allowlist admits. Live: `dns.lookup` (the system resolver, /etc/hosts
 * included) with every address; tests: a fixed map of names to addresses.
 */
import * as NodeDns from "node:dns"
import { Context, Effect, Layer, Schema } from "effect"

/** One address a name resolves to. */
export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

/** A name that could not be resolved. */
export class ResolveFailed extends Schema.TaggedError<ResolveFailed>()("ResolveFailed", {
  host: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.host} could not be resolved: ${this.reason}`
  }
}

/** Resolves host names to every address they have. */
export class EgressResolver extends Context.Service<EgressResolver, {
  readonly lookup: (host: string) => Effect.Effect<ReadonlyArray<ResolvedAddress>, ResolveFailed>
}>()("veyyon-eval/services/egress/EgressResolver") {
  /** The system resolver (`dns.lookup` with `all`, in the order it answers). */
  static readonly layer: Layer.Layer<EgressResolver> = Layer.sync(EgressResolver, () => systemResolver)

  /** A resolver answering from `names` (canonical host name to addresses); any other name fails as not found. */
  static readonly layerTest = (names: Readonly<Record<string, ReadonlyArray<string>>>): Layer.Layer<EgressResolver> =>
    Layer.succeed(EgressResolver, {
      lookup: (host) => {
        const addresses = Object.hasOwn(names, host) ? names[host]! : []
        return addresses.length === 0
          ? Effect.fail(new ResolveFailed({ host, reason: "ENOTFOUND" }))
          : Effect.succeed(addresses.map((address) => ({ address, family: address.includes(":") ? 6 as const : 4 as const })))
      }
    })
}

/** The system resolver as a value: `dns.lookup` with `all`, in the order it answers (/etc/hosts included). */
export const systemResolver: EgressResolver["Service"] = {
    lookup: (host) =>
      Effect.tryPromise({
        try: (signal) => {
          signal.throwIfAborted()
          return NodeDns.promises.lookup(host, { all: true, order: "verbatim" })
        },
        catch: (error) => new ResolveFailed({ host, reason: (error as NodeJS.ErrnoException).code ?? String(error) })
      }).pipe(Effect.map((found) => found.map(({ address, family }) => ({ address, family: family === 6 ? 6 as const : 4 as const }))))
}
