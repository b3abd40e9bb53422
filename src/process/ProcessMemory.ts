/**
 * How much memory a kernel holds, read from `/proc`: the resident set of its process and
 * every process below it, leaving out a sandbox launcher (`bwrap`, and the init it runs in
 * the namespace), whose few megabytes are not the kernel's. Undefined where it cannot be
 * measured (no `/proc`, the process gone).
 */
import * as NodeFs from "node:fs"

/** The most processes one measurement walks. */
const MAX_PROCESSES = 10_000

/** A process's name and resident set in bytes, from `/proc/<pid>/status`; undefined when it cannot be read. */
export const processStatus = (text: string): { readonly name: string; readonly residentBytes: number } | undefined => {
  const name = /^Name:\s*(.*)$/m.exec(text)?.[1]
  const resident = /^VmRSS:\s*(\d+)\s*kB$/m.exec(text)?.[1]
  if (name === undefined) return undefined
  return { name, residentBytes: resident === undefined ? 0 : Number(resident) * 1024 }
}

const readText = (file: string): string | undefined => {
  try {
    return NodeFs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

/** The children of every thread of `pid`. */
const childrenOf = (pid: number): Array<number> => {
  let tasks: Array<string>
  try {
    tasks = NodeFs.readdirSync(`/proc/${pid}/task`)
  } catch {
    return []
  }
  return tasks.flatMap((task) => (readText(`/proc/${pid}/task/${task}/children`) ?? "").trim().split(/\s+/).filter(Boolean).map(Number))
}

/** The resident bytes of `pid`'s tree, sandbox launchers left out; undefined when `pid` cannot be read. */
export const treeResidentBytes = (pid: number): number | undefined => {
  const root = processStatus(readText(`/proc/${pid}/status`) ?? "")
  if (root === undefined) return undefined
  let total = 0
  const pending = [pid]
  for (let walked = 0; pending.length > 0 && walked < MAX_PROCESSES; walked++) {
    const next = pending.pop()!
    const status = next === pid ? root : processStatus(readText(`/proc/${next}/status`) ?? "")
    if (status === undefined) continue
    if (status.name !== "bwrap") total += status.residentBytes
    pending.push(...childrenOf(next))
  }
  return total
}
