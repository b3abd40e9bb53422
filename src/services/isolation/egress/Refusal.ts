/**
 * What a kernel's client reads when the egress proxy will not or cannot reach a destination:
 * an HTTP response with a status, an `X-Veyyon-Egress` header naming the outcome, and a
 * plain-text body naming the host and what to change.
 */
import { ALLOW_HOSTS_SETTING } from "./AllowHosts.ts"
import type { EgressEvent } from "./EgressEvent.ts"

/** A response the proxy writes itself. */
export interface ProxyResponse {
  readonly status: number
  readonly statusText: string
  /** The value of the `X-Veyyon-Egress` header: `refused:<reason>`, `failed` or `bad-request`. */
  readonly outcome: string
  readonly body: string
}

const destination = (event: { readonly via: string; readonly host: string; readonly port: number }): string =>
  `${event.via === "connect" ? "CONNECT to" : "HTTP request to"} ${event.host}:${event.port}`

const advice = (event: Extract<EgressEvent, { _tag: "Refused" }>): string => {
  switch (event.reason) {
    case "not-listed":
      return `To allow it, add ${event.host} to ${ALLOW_HOSTS_SETTING}.`
    case "port-not-listed":
      return `To allow it, add ${event.host}:${event.port} to ${ALLOW_HOSTS_SETTING}.`
    case "ip-literal":
      return `Connect by a host name listed in ${ALLOW_HOSTS_SETTING}; IP addresses are never allowed.`
    case "invalid-host":
      return `Use a valid host name listed in ${ALLOW_HOSTS_SETTING}.`
    case "forbidden-address":
      return "Loopback, link-local, unspecified and multicast addresses are never reached from the sandbox, whatever the allowlist says."
    case "connection-limit":
      return "Close connections the cell no longer needs, or retry when some have finished."
    case "byte-limit":
      return "The session's egress byte budget is spent; start a new session to download more."
  }
}

/** The response for a refused destination: 403, or 503 when only the connection limit stands in the way. */
export const refusalResponse = (event: Extract<EgressEvent, { _tag: "Refused" }>): ProxyResponse => ({
  status: event.reason === "connection-limit" ? 503 : 403,
  statusText: event.reason === "connection-limit" ? "Service Unavailable" : "Forbidden",
  outcome: `refused:${event.reason}`,
  body: `veyyon sandbox egress proxy refused the ${destination(event)}: ${event.detail}.\n${advice(event)}\n`
})

/** The response for an admitted destination that could not be reached: 504 after a time-out, else 502. */
export const failureResponse = (event: Extract<EgressEvent, { _tag: "Failed" }>, timedOut: boolean): ProxyResponse => ({
  status: timedOut ? 504 : 502,
  statusText: timedOut ? "Gateway Timeout" : "Bad Gateway",
  outcome: "failed",
  body: `veyyon sandbox egress proxy could not complete the ${destination(event)}: ${event.detail}.\n`
})

/** The response for a request the proxy cannot read or does not serve. */
export const badRequestResponse = (status: number, statusText: string, detail: string): ProxyResponse => ({
  status,
  statusText,
  outcome: "bad-request",
  body: `veyyon sandbox egress proxy: ${detail}\n`
})

/** A response as raw HTTP/1.1 bytes that close the connection, for sockets no longer under node:http's control. */
export const rawResponse = (response: ProxyResponse): string => {
  const body = Buffer.from(response.body, "utf8")
  return `HTTP/1.1 ${response.status} ${response.statusText}\r\nContent-Type: text/plain; charset=utf-8\r\n` +
    `Content-Length: ${body.length}\r\nX-Veyyon-Egress: ${response.outcome}\r\nConnection: close\r\n\r\n${response.body}`
}
