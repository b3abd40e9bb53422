/**
 * A kernel's memory from `/proc`: the resident set of its whole process tree, a sandbox
 * launcher (a process named `bwrap`) left out, and nothing for a process that is gone.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { processStatus, treeResidentBytes } from "../../src/process/ProcessMemory.ts"
import { tempDir } from "../cli/support.ts"
import { findPython } from "../support/python.ts"

const python = findPython()
const spawned: Array<ChildProcess> = []
afterEach(() => {
  for (const child of spawned.splice(0)) child.kill("SIGKILL")
})

const statusOf = (pid: number) => processStatus(fs.readFileSync(`/proc/${pid}/status`, "utf8"))

const childrenOf = (pid: number) =>
  fs.readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)

const poll = async <A>(find: () => A | undefined, what: string): Promise<A> => {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    const found = find()
    if (found !== undefined) return found
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}

describe("process memory", () => {
  it("reads a status file's name and resident set", () => {
    expect(processStatus("Name:\tpython3\nState:\tS (sleeping)\nVmRSS:\t  20480 kB\n")).toEqual({ name: "python3", residentBytes: 20480 * 1024 })
    expect(processStatus("Name:\tkworker\n")).toEqual({ name: "kworker", residentBytes: 0 })
    expect(processStatus("")).toBeUndefined()
  })

  it("nothing for a process that does not exist", () => {
    expect(treeResidentBytes(2 ** 22 + 12345)).toBeUndefined()
  })

  it.skipIf(python === undefined || !fs.existsSync("/proc/self/status"))("counts the tree below a launcher named bwrap, and not the launcher", async () => {
    const dir = tempDir("veyyon-memory-")
    const launcher = path.join(dir, "bwrap")
    const ready = path.join(dir, "ready")
    fs.copyFileSync("/bin/sh", launcher)
    fs.chmodSync(launcher, 0o700)
    // The trailing `:` keeps the shell (the "launcher") alive as the parent of the kernel-like child,
    // which says when it holds its 64 MiB and has nothing more to load (its resident set then stays put).
    const child = spawn(launcher, ["-c", `${python} -c "import time; x = bytearray(64 * 1024 * 1024); open('${ready}', 'w').close(); time.sleep(60)"; :`], { stdio: "ignore" })
    spawned.push(child)
    const kernel = await poll(() => childrenOf(child.pid!)[0], "the child below the launcher")
    await poll(() => (fs.existsSync(ready) ? true : undefined), "the child to hold 64 MiB")
    const tree = treeResidentBytes(child.pid!)!
    expect(statusOf(child.pid!)!.name).toBe("bwrap")
    expect(tree).toBeGreaterThanOrEqual(64 * 1024 * 1024)
    expect(tree).toBe(statusOf(kernel)!.residentBytes)
    process.kill(kernel, "SIGKILL")
  })
})
