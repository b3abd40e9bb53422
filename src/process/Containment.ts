/**
 * Whole-tree containment outside the sandbox: each kernel runs in a cgroup of its own, so
 * everything its cells start (including processes that called `setsid` or double-forked)
 * can be killed with it, and `pids.max` can cap its tree.
 *
 * Uses what the machine offers: a cgroup v2 directory below our own where we may write
 * (root, or a delegated subtree), killed at once with `cgroup.kill`; and the cgroup v1
 * `pids` hierarchy where writable (root), killed by signalling its members until none is
 * left, and the place `pids.max` works when v2 has no pids controller for us. With
 * neither, nothing here applies and a kernel's tree is its process group.
 *
 * Kernel groups live in one directory per host process (`veyyon-<pid>/k<n>`). A small
 * watcher started with the first group holds a pipe from this process; when it reads end
 * of file (the host exited, even by SIGKILL) it kills every group left and removes them.
 */
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { Deferred, Duration, Effect, Scope } from "effect"
import { runCommand } from "./RunCommand.ts"
import { start } from "./Subprocess.ts"

/** What the machine offers for containment. */
export type ContainmentMechanism = "cgroup-v2" | "cgroup-v1" | "none"

/** One kernel's cgroups. */
export interface TreeGroup {
  /** The `cgroup.procs` files a launcher writes its own pid to before starting the kernel. */
  readonly procsFiles: ReadonlyArray<string>
  /** Whether `pids.max` applies to this group. */
  readonly pidsLimited: boolean
  /** Kills every process in the group now, without waiting. */
  readonly kill: () => void
  /** Whether `pid` has joined the group (in every hierarchy it spans). */
  readonly holds: (pid: number) => boolean
  /** Whether no process is left in the group. */
  readonly empty: () => boolean
  /** Removes the group's directories (they must be empty). */
  readonly remove: () => void
}

/** The containment this process can give kernels. */
export interface Containment {
  readonly mechanism: ContainmentMechanism
  /** Whether a group can cap its number of processes. */
  readonly pidsLimit: boolean
  /** The directories holding this process's kernel groups (`veyyon-<pid>`), one per hierarchy used. */
  readonly hostDirs: ReadonlyArray<string>
  /** A new group (with `pids.max` set when asked and possible), or undefined when there is no mechanism; the caller removes it. */
  readonly create: (pidsMax: number | undefined) => TreeGroup | undefined
}

interface Mount {
  readonly root: string
  readonly point: string
  readonly fstype: string
  readonly superOptions: ReadonlyArray<string>
}

const readText = (file: string): string | undefined => {
  try {
    return NodeFs.readFileSync(file, "utf8")
  } catch {
    return undefined
  }
}

const mounts = (): ReadonlyArray<Mount> =>
  (readText("/proc/self/mountinfo") ?? "").split("\n").flatMap((line) => {
    const [left, right] = line.split(" - ")
    if (left === undefined || right === undefined) return []
    const fields = left.split(" ")
    const [fstype, , superOptions] = right.split(" ")
    if (fields[3] === undefined || fields[4] === undefined || fstype === undefined) return []
    return [{ root: fields[3], point: fields[4], fstype, superOptions: (superOptions ?? "").split(",") }]
  })

/** Our own cgroup path in the v2 hierarchy (`0::`) or in the v1 hierarchy holding `controller`. */
const ownCgroup = (controller: string | undefined): string | undefined => {
  for (const line of (readText("/proc/self/cgroup") ?? "").split("\n")) {
    const [id, controllers, ...rest] = line.split(":")
    const path = rest.join(":")
    if (controller === undefined ? id === "0" && controllers === "" : controllers?.split(",").includes(controller)) return path
  }
  return undefined
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Removes the empty groups of hosts that are gone (their watcher was killed before it could). */
const sweepDeadHosts = (parent: string): void => {
  let entries: Array<string> = []
  try {
    entries = NodeFs.readdirSync(parent)
  } catch {
    return
  }
  for (const entry of entries) {
    const match = /^veyyon-(\d+)$/.exec(entry)
    if (match === null || isAlive(Number(match[1]))) continue
    const dir = NodePath.join(parent, entry)
    try {
      for (const group of NodeFs.readdirSync(dir)) if (/^(k\d+|probe)$/.test(group)) removeQuietly(NodePath.join(dir, group))
    } catch {
      // not ours to read
    }
    removeQuietly(dir)
  }
}

const hostDirIn = (mount: Mount | undefined, own: string | undefined): string | undefined => {
  if (mount === undefined || own === undefined) return undefined
  const relative = NodePath.posix.relative(mount.root, own)
  if (relative.startsWith("..")) return undefined
  sweepDeadHosts(NodePath.join(mount.point, relative))
  const dir = NodePath.join(mount.point, relative, `veyyon-${process.pid}`)
  try {
    NodeFs.mkdirSync(dir, { recursive: true })
    return dir
  } catch {
    return undefined
  }
}

const killMembers = (dir: string): void => {
  for (const pid of (readText(NodePath.join(dir, "cgroup.procs")) ?? "").split("\n")) {
    const n = Number(pid)
    if (n > 0) {
      try {
        process.kill(n, "SIGKILL")
      } catch {
        // gone already
      }
    }
  }
}

const isEmpty = (dir: string): boolean => (readText(NodePath.join(dir, "cgroup.procs")) ?? "").trim() === ""

const WATCHER_SCRIPT = `trap '' INT TERM HUP QUIT
cat >/dev/null 2>&1
for d in "$@"; do
  for k in "$d"/k*; do
    [ -d "$k" ] || continue
    [ -f "$k/cgroup.kill" ] && echo 1 > "$k/cgroup.kill"
    i=0
    while [ $i -lt 200 ] && [ -n "$(cat "$k/cgroup.procs" 2>/dev/null)" ]; do
      [ -f "$k/cgroup.kill" ] || for p in $(cat "$k/cgroup.procs"); do kill -9 "$p" 2>/dev/null; done
      sleep 0.05; i=$((i+1))
    done
    rmdir "$k" 2>/dev/null
  done
  rmdir "$d" 2>/dev/null
done
`

/** What lives as long as this process (the watcher): never closed. */
const hostScope = Scope.makeUnsafe()

const startWatcher = (dirs: ReadonlyArray<string>): Effect.Effect<void> =>
  start({
    command: "/bin/sh",
    args: ["-c", WATCHER_SCRIPT, "veyyon-tree-watch", ...dirs],
    env: { PATH: "/usr/bin:/bin" },
    stdout: "ignore",
    stderr: "ignore",
    unref: true
  }).pipe(
    Scope.provide(hostScope),
    // without a watcher only a host SIGKILL leaves groups behind
    Effect.ignore
  )

const detect = Effect.gen(function*() {
  const all = mounts()
  const v2 = yield* usable(hostDirIn(all.find((m) => m.fstype === "cgroup2"), ownCgroup(undefined)), "cgroup.kill")
  const v1 = yield* usable(hostDirIn(all.find((m) => m.fstype === "cgroup" && m.superOptions.includes("pids")), ownCgroup("pids")), "pids.max")
  const v2Kill = v2 !== undefined
  const dirs = [...(v2 === undefined ? [] : [v2]), ...(v1 === undefined ? [] : [v1])]
  if (dirs.length === 0) return { mechanism: "none", pidsLimit: false, hostDirs: [], create: () => undefined } satisfies Containment
  yield* startWatcher(dirs)
  let next = 0
  const found: Containment = {
    mechanism: v2Kill ? "cgroup-v2" : "cgroup-v1",
    pidsLimit: v1 !== undefined || NodeFs.existsSync(NodePath.join(v2!, "pids.max")),
    hostDirs: dirs,
    create: (pidsMax) => {
      next += 1
      const made: Array<string> = []
      for (const dir of dirs) {
        const group = NodePath.join(dir, `k${next}`)
        try {
          NodeFs.mkdirSync(group)
          made.push(group)
        } catch {
          // this hierarchy is not usable for the group; the others still are
        }
      }
      if (made.length === 0) return undefined
      let pidsLimited = false
      if (pidsMax !== undefined) {
        for (const group of made) {
          try {
            NodeFs.writeFileSync(NodePath.join(group, "pids.max"), String(pidsMax))
            pidsLimited = true
          } catch {
            // no pids controller in this hierarchy
          }
        }
      }
      return {
        procsFiles: made.map((group) => NodePath.join(group, "cgroup.procs")),
        pidsLimited,
        kill: () => {
          for (const group of made) {
            try {
              NodeFs.writeFileSync(NodePath.join(group, "cgroup.kill"), "1")
            } catch {
              killMembers(group)
            }
          }
        },
        holds: (pid) => made.every((group) => (readText(NodePath.join(group, "cgroup.procs")) ?? "").split("\n").includes(String(pid))),
        empty: () => made.every(isEmpty),
        remove: () => made.forEach(removeQuietly)
      }
    }
  }
  return found
})

const removeQuietly = (dir: string): void => {
  try {
    NodeFs.rmdirSync(dir)
  } catch {
    // still busy or gone: the watcher removes it when the host exits
  }
}

/** `dir` when a child group there has `file` and a process can move itself into it; else removes `dir`. */
const usable = (dir: string | undefined, file: string): Effect.Effect<string | undefined> => {
  if (dir === undefined) return Effect.succeed(undefined)
  const probe = NodePath.join(dir, "probe")
  return Effect.gen(function*() {
    let ok = false
    try {
      NodeFs.mkdirSync(probe, { recursive: true })
      ok = NodeFs.existsSync(NodePath.join(probe, file))
    } catch {
      ok = false
    }
    if (ok) {
      const joined = yield* Effect.result(runCommand({
        command: "/bin/sh",
        args: ["-c", "echo $$ > \"$1\"", "veyyon-probe", NodePath.join(probe, "cgroup.procs")],
        env: { PATH: "/usr/bin:/bin" }
      }))
      ok = joined._tag === "Success" && joined.success.exit.code === 0
    }
    for (let i = 0; i < 100 && NodeFs.existsSync(probe); i++) {
      removeQuietly(probe)
      if (NodeFs.existsSync(probe)) yield* Effect.sleep(Duration.millis(5))
    }
    if (!ok) removeQuietly(dir)
    return ok ? dir : undefined
  })
}

let detected: Deferred.Deferred<Containment> | undefined

/** The containment of this process, detected (and its watcher started) once, by the first to ask; uninterruptible, as it creates and removes a probe group. */
export const containment: Effect.Effect<Containment> = Effect.suspend(() => {
  if (detected !== undefined) return Deferred.await(detected)
  const found = (detected = Deferred.makeUnsafe<Containment>())
  return Effect.uninterruptible(Effect.flatMap(Effect.exit(detect), (exit) => Effect.andThen(Deferred.done(found, exit), exit)))
})

/**
 * The launcher that puts itself into `procsFiles` and then becomes `command`: the group
 * holds the kernel before it runs any code, so nothing it starts can be outside. The
 * shell's own `PWD` is unset, so the kernel starts with exactly the environment it was given.
 */
export const joinGroupLauncher = (
  procsFiles: ReadonlyArray<string>,
  command: string,
  args: ReadonlyArray<string>
): { readonly command: string; readonly args: ReadonlyArray<string> } => ({
  command: "/bin/sh",
  args: [
    "-c",
    "unset PWD; n=$1; shift; while [ \"$n\" -gt 0 ]; do echo $$ > \"$1\" || exit 125; shift; n=$((n-1)); done; exec \"$@\"",
    "veyyon-join",
    String(procsFiles.length),
    ...procsFiles,
    command,
    ...args
  ]
})
