import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Result, Schema } from "effect"
import { type AllowList, decideHost, parseAllowEntry, parseAllowHosts } from "../../../../src/services/isolation/egress/AllowHosts.ts"
import { isIpLiteral, normalizeHost } from "../../../../src/services/isolation/egress/HostName.ts"

const list = (...entries: Array<string>): AllowList => {
  const parsed = parseAllowHosts(entries)
  if (Result.isFailure(parsed)) throw new Error(JSON.stringify(parsed.failure))
  return parsed.success
}

const problemOf = (entry: string): string => {
  const parsed = parseAllowEntry(entry)
  if (Result.isSuccess(parsed)) throw new Error(`${entry} parsed`)
  return parsed.failure.problem
}

describe("normalizeHost", () => {
  it("lower-cases, drops one trailing dot and converts IDNA names to punycode", () => {
    expect(normalizeHost("PyPI.Org.")).toEqual(Result.succeed("pypi.org"))
    expect(normalizeHost("Bücher.example")).toEqual(Result.succeed("xn--bcher-kva.example"))
    expect(normalizeHost("xn--bcher-kva.example")).toEqual(Result.succeed("xn--bcher-kva.example"))
  })

  it("tells IP literals apart, the numeric forms a resolver reads as IPv4 included", () => {
    for (const host of ["127.0.0.1", "::1", "[::1]", "[::ffff:127.0.0.1]", "127.1", "2130706433", "0x7f.1", "0x7f000001", "10.0.0.1.", "a.b.0x1"]) {
      expect(Result.isFailure(normalizeHost(host)) && normalizeHost(host)).toMatchObject({ failure: { _tag: "IpLiteral" } })
    }
  })

  it("refuses what is no host name, with the reason", () => {
    const invalid = (host: string) => {
      const result = normalizeHost(host)
      return Result.isFailure(result) && result.failure._tag === "InvalidHost" ? result.failure.detail : undefined
    }
    expect(invalid("")).toMatch(/empty/)
    expect(invalid("a..b")).toMatch(/empty label/)
    expect(invalid("xn--zz.com")).toMatch(/IDNA/)
    expect(invalid("%41.com")).toMatch(/character/)
    expect(invalid("a b.com")).toMatch(/character/)
    expect(invalid("user@a.com")).toMatch(/character/)
    expect(invalid(`${"a".repeat(64)}.com`)).toMatch(/label is longer/)
    expect(invalid(`${"a.".repeat(130)}com`)).toMatch(/longer than 253/)
    expect(invalid("-a.com")).toMatch(/label/)
  })
})

describe("parseAllowEntry", () => {
  it("reads hosts, suffix patterns and ports", () => {
    expect(parseAllowEntry(" PyPI.org ")).toEqual(Result.succeed({ kind: "exact", host: "pypi.org", port: undefined, entry: " PyPI.org " }))
    expect(parseAllowEntry("*.pythonhosted.org:443")).toEqual(
      Result.succeed({ kind: "suffix", host: "pythonhosted.org", port: 443, entry: "*.pythonhosted.org:443" })
    )
  })

  it("refuses IP addresses, bad ports, stray wildcards and top-level patterns, saying why", () => {
    expect(problemOf("10.0.0.1")).toMatch(/IP addresses cannot be listed/)
    expect(problemOf("[::1]:80")).toMatch(/IP addresses cannot be listed/)
    expect(problemOf("::1")).toMatch(/IP addresses cannot be listed/)
    expect(problemOf("a.com:0")).toMatch(/not a port/)
    expect(problemOf("a.com:65536")).toMatch(/not a port/)
    expect(problemOf("a.com:http")).toMatch(/not a port/)
    expect(problemOf("a.com:")).toMatch(/not a port/)
    expect(problemOf("*")).toMatch(/pattern/)
    expect(problemOf("a.*.com")).toMatch(/pattern/)
    expect(problemOf("**.a.com")).toMatch(/pattern/)
    expect(problemOf("*.com")).toMatch(/top-level domain/)
  })

  it("reports every entry that cannot be used", () => {
    expect(parseAllowHosts(["ok.example", "1.2.3.4", "*.net"])).toMatchObject(Result.fail([{ entry: "1.2.3.4" }, { entry: "*.net" }]))
  })
})

describe("decideHost", () => {
  const allow = list("pypi.org", "*.pythonhosted.org", "index.test:8080", "Bücher.example")

  it("allows exact hosts on every port, whatever their case or trailing dot", () => {
    expect(decideHost(allow, "pypi.org", 443)).toMatchObject({ _tag: "Allowed", host: "pypi.org", port: 443 })
    expect(decideHost(allow, "PYPI.ORG.", 80)).toMatchObject({ _tag: "Allowed", host: "pypi.org" })
    expect(decideHost(allow, "www.pypi.org", 443)).toMatchObject({ _tag: "Refused", reason: "not-listed" })
  })

  it("allows names below a suffix pattern but not the suffix itself nor look-alikes", () => {
    expect(decideHost(allow, "files.pythonhosted.org", 443)).toMatchObject({ _tag: "Allowed" })
    expect(decideHost(allow, "a.b.pythonhosted.org", 443)).toMatchObject({ _tag: "Allowed" })
    expect(decideHost(allow, "pythonhosted.org", 443)).toMatchObject({ _tag: "Refused", reason: "not-listed" })
    expect(decideHost(allow, "evilpythonhosted.org", 443)).toMatchObject({ _tag: "Refused", reason: "not-listed" })
    expect(decideHost(allow, "pythonhosted.org.evil.com", 443)).toMatchObject({ _tag: "Refused", reason: "not-listed" })
  })

  it("holds an entry with a port to that port, and says so", () => {
    expect(decideHost(allow, "index.test", 8080)).toMatchObject({ _tag: "Allowed" })
    const refused = decideHost(allow, "index.test", 443)
    expect(refused).toMatchObject({ _tag: "Refused", reason: "port-not-listed" })
    expect(refused._tag === "Refused" && refused.detail).toMatch(/only for port 8080, not 443/)
  })

  it("matches internationalised names in either form", () => {
    expect(decideHost(allow, "BÜCHER.example", 443)).toMatchObject({ _tag: "Allowed", host: "xn--bcher-kva.example" })
    expect(decideHost(allow, "xn--bcher-kva.example", 443)).toMatchObject({ _tag: "Allowed" })
  })

  it("refuses IP literals and invalid names, naming the setting for unlisted ones", () => {
    expect(decideHost(allow, "10.0.0.5", 80)).toMatchObject({ _tag: "Refused", reason: "ip-literal" })
    expect(decideHost(allow, "[fe80::1]", 80)).toMatchObject({ _tag: "Refused", reason: "ip-literal" })
    expect(decideHost(allow, "a..b", 80)).toMatchObject({ _tag: "Refused", reason: "invalid-host" })
    const refused = decideHost(allow, "evil.example", 443)
    expect(refused._tag === "Refused" && refused.detail).toBe("evil.example is not in sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS)")
  })
})

const chars = (alphabet: string) => Arbitrary.schema(Schema.Literals([...alphabet]))
const word = (alphabet: string, maxLength: number) =>
  Arbitrary.array(chars(alphabet), { minLength: 1, maxLength }).pipe(Arbitrary.map((letters) => letters.join("")))
/** A canonical host name: two to four labels of letters and digits, the last one starting with a letter. */
const hostName = Arbitrary.all([
  Arbitrary.array(word("abcxyz019", 8), { minLength: 1, maxLength: 3 }),
  word("abcxyz", 6)
]).pipe(Arbitrary.map(([labels, top]) => [...labels, top].join(".")))
const port = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 65535 }))
const octet = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 255 }))
const hextet = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 0xffff }))

describe("allowlist properties", () => {
  it.prop("a listed host is allowed on any port, in any case and with a trailing dot", [hostName, port], ([host, p]) => {
    const allow = list(host)
    expect(decideHost(allow, host, p)).toMatchObject({ _tag: "Allowed", host })
    expect(decideHost(allow, `${host.toUpperCase()}.`, p)).toMatchObject({ _tag: "Allowed", host })
  })

  it.prop("*.suffix allows every name below the suffix and neither the suffix nor a name merely ending in it", [hostName, word("abc", 5)], ([suffix, label]) => {
    const allow = list(`*.${suffix}`)
    expect(decideHost(allow, `${label}.${suffix}`, 443)._tag).toBe("Allowed")
    expect(decideHost(allow, suffix, 443)._tag).toBe("Refused")
    expect(decideHost(allow, `${label}${suffix}`, 443)._tag).toBe("Refused")
  })

  it.prop("a port entry allows that port and no other", [hostName, port, port], ([host, listed, asked]) => {
    const decision = decideHost(list(`${host}:${listed}`), host, asked)
    expect(decision._tag).toBe(listed === asked ? "Allowed" : "Refused")
  })

  it.prop("IPv4 literals are refused whatever is listed", [octet, octet, octet, octet, port], ([a, b, c, d, p]) => {
    const address = `${a}.${b}.${c}.${d}`
    expect(isIpLiteral(address)).toBe(true)
    expect(decideHost(list("*.example.com", "example.com"), address, p)).toMatchObject({ _tag: "Refused", reason: "ip-literal" })
  })

  it.prop("IPv6 literals, bracketed or not, are refused whatever is listed", [Arbitrary.array(Arbitrary.schema(hextet), { minLength: 8, maxLength: 8 })], ([groups]) => {
    const address = groups.map((group) => group.toString(16)).join(":")
    for (const form of [address, `[${address}]`]) {
      expect(decideHost(list("example.com"), form, 443)).toMatchObject({ _tag: "Refused", reason: "ip-literal" })
    }
  })
})
