/**
 * The egress allowlist (`sandbox.allowHosts`) as pure data and decisions.
 *
 * An entry is a host name (`pypi.org`), or `*.` and a suffix of at least two labels
 * (`*.pythonhosted.org`: every name below it, not the suffix itself), optionally followed by
 * `:port` (then only that port; without one, every port). Names compare in the canonical form
 * of `HostName` (case, trailing dot and IDNA do not matter). IP addresses cannot be listed:
 * the proxy refuses IP literals always, and resolves names itself.
 */
import { Result } from "effect"
import { describeHostProblem, normalizeHost } from "./HostName.ts"

/** The setting that lists the allowed hosts, and its environment variable, as messages name them. */
export const ALLOW_HOSTS_SETTING = "sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS)"

/** One parsed entry: an exact host or a suffix pattern, with the one port it allows or none (all ports). */
export interface AllowRule {
  readonly kind: "exact" | "suffix"
  /** The canonical host, or for a suffix pattern the canonical suffix without `*.`. */
  readonly host: string
  readonly port: number | undefined
  /** The entry as written. */
  readonly entry: string
}

/** The parsed allowlist. */
export interface AllowList {
  readonly rules: ReadonlyArray<AllowRule>
}

/** An entry that cannot be used, and why. */
export interface EntryProblem {
  readonly entry: string
  readonly problem: string
}

/** The outcome of asking whether a (host, port) may be reached, before any name is resolved. */
export type HostDecision =
  | { readonly _tag: "Allowed"; readonly host: string; readonly port: number; readonly rule: AllowRule }
  | {
    readonly _tag: "Refused"
    readonly reason: "ip-literal" | "invalid-host" | "not-listed" | "port-not-listed"
    readonly host: string
    readonly port: number
    /** A sentence saying why. */
    readonly detail: string
  }

const PORT = /^[0-9]{1,5}$/

/** A port number from its decimal text, or undefined unless it is 1 to 65535. */
export const parsePort = (text: string): number | undefined => {
  if (!PORT.test(text)) return undefined
  const port = Number(text)
  return port >= 1 && port <= 65535 ? port : undefined
}

/** One entry parsed, or why it cannot be used. */
export const parseAllowEntry = (entry: string): Result.Result<AllowRule, EntryProblem> => {
  const fail = (problem: string) => Result.fail({ entry, problem })
  const text = entry.trim()
  if (text.startsWith("[")) return fail("IP addresses cannot be listed; list a host name")
  const colon = text.lastIndexOf(":")
  const hostText = colon === -1 ? text : text.slice(0, colon)
  let port: number | undefined
  if (colon !== -1) {
    if (hostText.includes(":")) return fail("IP addresses cannot be listed; list a host name")
    port = parsePort(text.slice(colon + 1))
    if (port === undefined) return fail(`${JSON.stringify(text.slice(colon + 1))} is not a port from 1 to 65535`)
  }
  const wildcard = hostText.startsWith("*.")
  const nameText = wildcard ? hostText.slice(2) : hostText
  if (nameText.includes("*")) return fail("a pattern is `*.` followed by a domain, like *.example.com")
  const name = normalizeHost(nameText)
  if (Result.isFailure(name)) {
    return fail(name.failure._tag === "IpLiteral" ? "IP addresses cannot be listed; list a host name" : describeHostProblem(name.failure))
  }
  if (wildcard && !name.success.includes(".")) {
    return fail(`*.${name.success} would allow every host under a top-level domain; list narrower names`)
  }
  return Result.succeed({ kind: wildcard ? "suffix" : "exact", host: name.success, port, entry })
}

/** The allowlist from its entries, or every entry that cannot be used. */
export const parseAllowHosts = (entries: ReadonlyArray<string>): Result.Result<AllowList, ReadonlyArray<EntryProblem>> => {
  const rules: Array<AllowRule> = []
  const problems: Array<EntryProblem> = []
  for (const entry of entries) {
    const parsed = parseAllowEntry(entry)
    if (Result.isSuccess(parsed)) rules.push(parsed.success)
    else problems.push(parsed.failure)
  }
  return problems.length === 0 ? Result.succeed({ rules }) : Result.fail(problems)
}

/** Whether a rule's host part covers a canonical host name. */
export const ruleCoversHost = (rule: AllowRule, host: string): boolean =>
  rule.kind === "exact" ? host === rule.host : host.endsWith(`.${rule.host}`)

/** Whether (host, port) may be reached by the list: refused as an IP literal, an invalid name, not listed, or on a port not listed. */
export const decideHost = (list: AllowList, rawHost: string, port: number): HostDecision => {
  const name = normalizeHost(rawHost)
  if (Result.isFailure(name)) {
    return {
      _tag: "Refused",
      reason: name.failure._tag === "IpLiteral" ? "ip-literal" : "invalid-host",
      host: rawHost,
      port,
      detail: describeHostProblem(name.failure)
    }
  }
  const host = name.success
  const covering = list.rules.filter((rule) => ruleCoversHost(rule, host))
  const rule = covering.find((candidate) => candidate.port === undefined || candidate.port === port)
  if (rule !== undefined) return { _tag: "Allowed", host, port, rule }
  return covering.length === 0
    ? { _tag: "Refused", reason: "not-listed", host, port, detail: `${host} is not in ${ALLOW_HOSTS_SETTING}` }
    : {
      _tag: "Refused",
      reason: "port-not-listed",
      host,
      port,
      detail: `${host} is listed in ${ALLOW_HOSTS_SETTING} only for port ${covering.map((r) => r.port).join(", ")}, not ${port}`
    }
}
