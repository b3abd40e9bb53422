/**
 * What moves a runner's shards, in sentences: runners joining, leaving or failing their
 * health check (from two views of the runner list), and a shard list written compactly.
 * Pure; `ShardLockStorage` logs a runner's shard moves with them.
 */

/** One view of the runner list: the addresses (host:port) marked healthy and those marked unhealthy. */
export interface Membership {
  readonly healthy: ReadonlySet<string>
  readonly unhealthy: ReadonlySet<string>
}

/** The changes between two views of the runner list, one sentence each; none for the first view. */
export const membershipChanges = (before: Membership | undefined, after: Membership): Array<string> => {
  if (before === undefined) return []
  const changes: Array<string> = []
  for (const address of after.healthy) {
    if (before.healthy.has(address)) continue
    changes.push(before.unhealthy.has(address) ? `runner ${address} is healthy again` : `runner ${address} joined`)
  }
  for (const address of before.healthy) {
    if (after.healthy.has(address)) continue
    changes.push(after.unhealthy.has(address) ? `runner ${address} failed its health check` : `runner ${address} left`)
  }
  return changes
}

/** Shard numbers as ranges, ascending: `[1, 2, 3, 7]` is `1-3,7`. */
export const shardRanges = (shards: Iterable<number>): string => {
  const sorted = [...new Set(shards)].sort((a, b) => a - b)
  const parts: Array<string> = []
  let index = 0
  while (index < sorted.length) {
    const start = sorted[index]!
    let end = start
    while (index + 1 < sorted.length && sorted[index + 1] === end + 1) end = sorted[++index]!
    parts.push(start === end ? String(start) : `${start}-${end}`)
    index++
  }
  return parts.join(",")
}
