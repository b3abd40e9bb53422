/**
 * Host names as the egress allowlist compares them: lower case, without the trailing dot of
 * a fully qualified name, internationalised names in their ASCII (punycode) form by UTS #46
 * (`node:url`'s `domainToASCII`, the WHATWG URL host rules). IP literals are told apart so
 * they can be refused: IPv4 and IPv6 addresses (bracketed or not), and every name the URL and
 * resolver rules would read as an IPv4 address (a last label that is a number: `127.1`,
 * `2130706433`, `0x7f.1`).
 */
import * as NodeNet from "node:net"
import { domainToASCII } from "node:url"
import { Result } from "effect"

/** Why a host cannot be allowed: it is an IP address, or not a valid host name. */
export type HostProblem =
  | { readonly _tag: "IpLiteral"; readonly host: string }
  | { readonly _tag: "InvalidHost"; readonly host: string; readonly detail: string }

const MAX_NAME = 253
const MAX_LABEL = 63
const LABEL = /^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?$/
const NUMERIC_LABEL = /^(0x[0-9a-f]*|[0-9]+)$/

/** Whether `host` is an IP literal, bracketed IPv6 included. */
export const isIpLiteral = (host: string): boolean => {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host
  return NodeNet.isIP(bare) !== 0
}

/** Whether the last label (after one trailing dot) is a number, which URL parsers and resolvers read as an IPv4 address. */
const endsInNumber = (name: string): boolean => {
  const labels = (name.endsWith(".") ? name.slice(0, -1) : name).split(".")
  return NUMERIC_LABEL.test(labels[labels.length - 1]!)
}

const invalid = (host: string, detail: string): Result.Result<never, HostProblem> =>
  Result.fail({ _tag: "InvalidHost", host, detail })

/** The canonical ASCII form of a host name, or why it is an IP literal or no valid name. */
export const normalizeHost = (raw: string): Result.Result<string, HostProblem> => {
  if (isIpLiteral(raw)) return Result.fail({ _tag: "IpLiteral", host: raw })
  if (raw.length === 0) return invalid(raw, "it is empty")
  if (/[%\s/\\@:?#[\]]/.test(raw)) return invalid(raw, "it holds a character no host name has")
  if (endsInNumber(raw.toLowerCase())) return Result.fail({ _tag: "IpLiteral", host: raw })
  const ascii = domainToASCII(raw)
  if (ascii === "") return invalid(raw, "it is not a valid internationalised domain name (IDNA)")
  const name = ascii.endsWith(".") ? ascii.slice(0, -1) : ascii
  if (isIpLiteral(name)) return Result.fail({ _tag: "IpLiteral", host: raw })
  if (endsInNumber(name)) return Result.fail({ _tag: "IpLiteral", host: raw })
  const labels = name.split(".")
  if (name.length > MAX_NAME) return invalid(raw, `it is longer than ${MAX_NAME} characters`)
  for (const label of labels) {
    if (label.length === 0) return invalid(raw, "it has an empty label")
    if (label.length > MAX_LABEL) return invalid(raw, `a label is longer than ${MAX_LABEL} characters`)
    if (!LABEL.test(label)) return invalid(raw, `the label ${JSON.stringify(label)} is not letters, digits, - and _`)
  }
  return Result.succeed(name)
}

/** A sentence saying why a host is refused as a name. */
export const describeHostProblem = (problem: HostProblem): string =>
  problem._tag === "IpLiteral"
    ? `${problem.host} is an IP address; only host names can be allowed`
    : `${JSON.stringify(problem.host)} is not a valid host name: ${problem.detail}`
