/**
 * Process facts from /proc (Linux): memory of a pid, the descendants of this process,
 * processes that carry a marker in their environment, and killing them.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as v8 from "node:v8"
import * as vm from "node:vm"

const readText = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const statusField = (pid: number, field: string): number | undefined => {
  const status = readText(`/proc/${pid}/status`)
  const match = status?.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"))
  return match === undefined || match === null ? undefined : Number(match[1]) * 1024
}

/** Resident set size of a process in bytes, or undefined when it is gone. */
export const rssOf = (pid: number): number | undefined => statusField(pid, "VmRSS")

/** Proportional set size (shared pages split among their users) in bytes, or undefined. */
export const pssOf = (pid: number): number | undefined => {
  const rollup = readText(`/proc/${pid}/smaps_rollup`)
  const match = rollup?.match(/^Pss:\s+(\d+) kB/m)
  return match === undefined || match === null ? undefined : Number(match[1]) * 1024
}

const pids = (): Array<number> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).map(Number)

const parentOf = (pid: number): number | undefined => {
  const stat = readText(`/proc/${pid}/stat`)
  if (stat === undefined) return undefined
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return fields[1] === undefined ? undefined : Number(fields[1])
}

const isZombie = (pid: number): boolean => {
  const stat = readText(`/proc/${pid}/stat`)
  return stat === undefined || stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
}

/** Live (non-zombie) descendants of `root` (default: this process). */
export const descendants = (root: number = process.pid): Array<number> => {
  const children = new Map<number, Array<number>>()
  for (const pid of pids()) {
    const parent = parentOf(pid)
    if (parent === undefined) continue
    const list = children.get(parent) ?? []
    list.push(pid)
    children.set(parent, list)
  }
  const found: Array<number> = []
  const queue = [root]
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()!) ?? []) {
      if (!isZombie(child)) found.push(child)
      queue.push(child)
    }
  }
  return found
}

/** Live processes whose environment contains `marker` (e.g. `NAME=value` of a unique directory). */
export const withEnvironment = (marker: string): Array<number> =>
  pids().filter((pid) => pid !== process.pid && !isZombie(pid) && (readText(`/proc/${pid}/environ`)?.includes(marker) ?? false))

/** Live processes whose working directory is `dir` or below it (also after `dir` was removed). */
export const withCwdUnder = (dir: string): Array<number> =>
  pids().filter((pid) => {
    if (pid === process.pid || isZombie(pid)) return false
    try {
      const cwd = fs.readlinkSync(`/proc/${pid}/cwd`).replace(/ \(deleted\)$/, "")
      return cwd === dir || cwd.startsWith(dir + path.sep)
    } catch {
      return false
    }
  })

/** Python processes below this one, plus every process whose environment holds `marker`: what a run must not leave behind. */
export const ourPythons = (marker?: string): Array<number> =>
  [...new Set([...descendants().filter(isPython), ...(marker === undefined ? [] : withEnvironment(marker))])]

/** The command line of a process, space-separated, or "" when it is gone. */
export const commandOf = (pid: number): string => readText(`/proc/${pid}/cmdline`)?.replaceAll("\0", " ").trim() ?? ""

/** Whether a process runs a Python interpreter. */
export const isPython = (pid: number): boolean => {
  try {
    return /python/i.test(path.basename(fs.readlinkSync(`/proc/${pid}/exe`)))
  } catch {
    return /python/i.test(commandOf(pid).split(" ")[0] ?? "")
  }
}

/** SIGKILLs each pid (and its process group when it leads one); returns how many were signalled. */
export const killAll = (targets: ReadonlyArray<number>): number => {
  let killed = 0
  for (const pid of targets) {
    for (const target of [-pid, pid]) {
      try {
        process.kill(target, "SIGKILL")
        killed++
        break
      } catch {
        // not a group leader, or already gone
      }
    }
  }
  return killed
}

let collect: (() => void) | undefined

/** Runs a full garbage collection (enabling `gc` on first use) so RSS readings settle. */
export const fullGc = (): void => {
  if (collect === undefined) {
    v8.setFlagsFromString("--expose-gc")
    collect = vm.runInNewContext("gc") as () => void
  }
  collect()
  collect()
}

/** This process's RSS in bytes once collections settle: the least of a few readings, each after a full collection. */
export const hostRss = async (readings = 5): Promise<number> => {
  let least = Number.POSITIVE_INFINITY
  for (let i = 0; i < readings; i++) {
    fullGc()
    await new Promise((resolve) => setTimeout(resolve, 100))
    least = Math.min(least, process.memoryUsage().rss)
  }
  return least
}

