import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import { forbiddenAddress } from "../../../../src/services/isolation/egress/AddressPolicy.ts"

const octet = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 255 }))

describe("forbiddenAddress", () => {
  it("names loopback, link-local, unspecified and multicast addresses in both families", () => {
    expect(forbiddenAddress("127.0.0.1")).toBe("loopback")
    expect(forbiddenAddress("127.255.0.9")).toBe("loopback")
    expect(forbiddenAddress("::1")).toBe("loopback")
    expect(forbiddenAddress("169.254.169.254")).toBe("link-local")
    expect(forbiddenAddress("fe80::1")).toBe("link-local")
    expect(forbiddenAddress("febf::1")).toBe("link-local")
    expect(forbiddenAddress("0.0.0.0")).toBe("unspecified")
    expect(forbiddenAddress("0.1.2.3")).toBe("unspecified")
    expect(forbiddenAddress("::")).toBe("unspecified")
    expect(forbiddenAddress("224.0.0.1")).toBe("multicast")
    expect(forbiddenAddress("239.255.255.250")).toBe("multicast")
    expect(forbiddenAddress("255.255.255.255")).toBe("multicast")
    expect(forbiddenAddress("ff02::1")).toBe("multicast")
  })

  it("sees through IPv4-mapped and IPv4-compatible IPv6 forms", () => {
    expect(forbiddenAddress("::ffff:127.0.0.1")).toBe("loopback")
    expect(forbiddenAddress("::ffff:7f00:1")).toBe("loopback")
    expect(forbiddenAddress("::ffff:169.254.169.254")).toBe("link-local")
    expect(forbiddenAddress("::127.0.0.1")).toBe("loopback")
    expect(forbiddenAddress("::ffff:10.1.2.3")).toBeUndefined()
  })

  it("lets public and private unicast addresses through", () => {
    for (const address of ["10.0.0.1", "192.168.1.1", "172.16.0.1", "192.0.2.10", "8.8.8.8", "169.253.255.255", "2001:db8::1", "fec0::1", "fd00::1"]) {
      expect(forbiddenAddress(address)).toBeUndefined()
    }
  })

  it("treats anything that is no address as unspecified", () => {
    expect(forbiddenAddress("localhost")).toBe("unspecified")
    expect(forbiddenAddress("")).toBe("unspecified")
  })

  it.prop("every 127/8 and 169.254/16 address is refused, plain or IPv4-mapped", [octet, octet, octet], ([b, c, d]) => {
    expect(forbiddenAddress(`127.${b}.${c}.${d}`)).toBe("loopback")
    expect(forbiddenAddress(`::ffff:127.${b}.${c}.${d}`)).toBe("loopback")
    expect(forbiddenAddress(`169.254.${c}.${d}`)).toBe("link-local")
    expect(forbiddenAddress(`::ffff:169.254.${c}.${d}`)).toBe("link-local")
  })

  it.prop("10/8 addresses stay reachable, plain or IPv4-mapped", [octet, octet, octet], ([b, c, d]) => {
    expect(forbiddenAddress(`10.${b}.${c}.${d}`)).toBeUndefined()
    expect(forbiddenAddress(`::ffff:10.${b}.${c}.${d}`)).toBeUndefined()
  })
})
