/** What the egress proxy reports about each destination a kernel asks for: admitted, refused, or unreachable. */

/** How the kernel asked: a `CONNECT` tunnel (TLS and anything else) or a plain HTTP request in absolute form. */
export type EgressVia = "connect" | "http"

/** Why the proxy refused a destination. */
export type RefusalReason =
  | "ip-literal"
  | "invalid-host"
  | "not-listed"
  | "port-not-listed"
  | "forbidden-address"
  | "connection-limit"
  | "byte-limit"

/** One destination the proxy decided about (host empty and port 0 when refused before the request was read: the connection limit). */
export type EgressEvent =
  | {
    readonly _tag: "Allowed"
    readonly via: EgressVia
    readonly host: string
    readonly port: number
    /** The checked addresses the connection is pinned to, in the order tried. */
    readonly addresses: ReadonlyArray<string>
  }
  | {
    readonly _tag: "Refused"
    readonly via: EgressVia
    readonly host: string
    readonly port: number
    readonly reason: RefusalReason
    /** A sentence saying why. */
    readonly detail: string
  }
  | {
    readonly _tag: "Failed"
    readonly via: EgressVia
    readonly host: string
    readonly port: number
    /** A sentence saying what went wrong (unresolvable name, unreachable address, time-out). */
    readonly detail: string
  }
