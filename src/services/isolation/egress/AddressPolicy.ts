/**
 * Which resolved addresses the egress proxy never connects to, whatever name led there:
 * loopback, link-local (cloud metadata services live at 169.254.169.254), unspecified
 * ("this host") and multicast or broadcast, in IPv4 and IPv6, IPv4-mapped IPv6 included.
 * Private networks (10/8, 192.168/16...) stay reachable by listed names: package mirrors
 * live there.
 */
import * as NodeNet from "node:net"

/** Why an address is never a destination. */
export type ForbiddenKind = "loopback" | "link-local" | "unspecified" | "multicast"

const blockList = (v4: ReadonlyArray<readonly [string, number]>, v6: ReadonlyArray<readonly [string, number]>): NodeNet.BlockList => {
  const list = new NodeNet.BlockList()
  for (const [net, prefix] of v4) list.addSubnet(net, prefix, "ipv4")
  for (const [net, prefix] of v6) list.addSubnet(net, prefix, "ipv6")
  return list
}

const FORBIDDEN: ReadonlyArray<readonly [ForbiddenKind, NodeNet.BlockList]> = [
  ["loopback", blockList([["127.0.0.0", 8]], [["::1", 128]])],
  ["link-local", blockList([["169.254.0.0", 16]], [["fe80::", 10]])],
  ["unspecified", blockList([["0.0.0.0", 8]], [["::", 128]])],
  ["multicast", blockList([["224.0.0.0", 4], ["255.255.255.255", 32]], [["ff00::", 8]])]
]

/** The IPv4 address an IPv4-compatible IPv6 address (`::a.b.c.d`, deprecated) embeds, which BlockList does not map. */
const embeddedCompatibleV4 = (address: string): string | undefined => {
  const match = /^::(\d{1,3}(?:\.\d{1,3}){3})$/.exec(address)
  return match?.[1]
}

/** Why `address` is never a destination, or undefined when it may be one; anything that is no IP address counts as unspecified. */
export const forbiddenAddress = (address: string): ForbiddenKind | undefined => {
  const family = NodeNet.isIP(address)
  if (family === 0) return "unspecified"
  const compatible = family === 6 ? embeddedCompatibleV4(address) : undefined
  const [checked, type] = compatible !== undefined ? [compatible, "ipv4" as const] : [address, family === 4 ? "ipv4" as const : "ipv6" as const]
  return FORBIDDEN.find(([, list]) => list.check(checked, type))?.[0]
}
