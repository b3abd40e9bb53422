/**
 * Private directories: what is created, what is refused (and left as it was), where the
 * per-user locations are, and a second user planting directories, links and runner code.
 */
import { NodeServices } from "@effect/platform-node"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { makeArtifactStore } from "../../../src/services/output/ArtifactStore.ts"
import {
  ensurePrivateDir,
  PrivateDirRefused,
  processUserDirsContext,
  tmpFallbackDir,
  userCacheDir,
  userStateDir,
  type UserDirsContext
} from "../../../src/services/storage/PrivateDir.ts"
import { makeRunnerCache, RunnerCacheWriteFailed } from "../../../src/services/storage/RunnerCache.ts"
import { createOtherUser, type OtherUser, otherUserSkipReason, removeOtherUser } from "../../support/otherUser.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-private-test-")))
  roots.push(dir)
  return dir
}

const modeOf = (file: string): number => fs.lstatSync(file).mode & 0o7777

const refusal = (dir: string): Effect.Effect<PrivateDirRefused, string> => Effect.flip(ensurePrivateDir(dir))

const posix = process.platform !== "win32"

describe.skipIf(!posix)("ensurePrivateDir", () => {
  it.effect("creates every missing directory with mode 0700 and returns the absolute path", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const target = path.join(root, "a", "b", "c")
      expect(yield* ensurePrivateDir(target)).toBe(target)
      for (const dir of ["a", "a/b", "a/b/c"]) expect(modeOf(path.join(root, dir))).toBe(0o700)
      expect(yield* ensurePrivateDir(target)).toBe(target)
    }))

  it.effect("refuses a directory of ours that group or others can write, naming it, and leaves its mode alone", () =>
    Effect.gen(function*() {
      const dir = path.join(tempDir(), "open")
      fs.mkdirSync(dir)
      fs.chmodSync(dir, 0o777)
      const error = yield* refusal(dir)
      expect(error).toBeInstanceOf(PrivateDirRefused)
      expect(error.path).toBe(dir)
      expect(error.message).toContain(dir)
      expect(error.problem).toContain("writable by group or others (mode 0777)")
      expect(modeOf(dir)).toBe(0o777)
      fs.chmodSync(dir, 0o750)
      expect(yield* ensurePrivateDir(dir)).toBe(dir)
    }))

  it.effect("refuses a symbolic link even to a private directory of ours, and a file", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const real = path.join(root, "real")
      fs.mkdirSync(real, { mode: 0o700 })
      fs.symlinkSync(real, path.join(root, "link"))
      expect((yield* refusal(path.join(root, "link"))).problem).toBe("it is a symbolic link")
      fs.writeFileSync(path.join(root, "file"), "")
      expect((yield* refusal(path.join(root, "file"))).problem).toBe("it is not a directory")
      expect((yield* refusal(path.join(root, "file", "below"))).path).toBe(path.join(root, "file"))
    }))

  it.effect("refuses to create below a directory others can write that is not root's sticky one", () =>
    Effect.gen(function*() {
      const open = path.join(tempDir(), "shared")
      fs.mkdirSync(open)
      fs.chmodSync(open, 0o777)
      const error = yield* refusal(path.join(open, "mine", "state"))
      expect(error.path).toBe(open)
      expect(error.problem).toContain("not a root-owned sticky directory")
      expect(fs.existsSync(path.join(open, "mine"))).toBe(false)
    }))

  it.effect("accepts a parent that only our own group can write (umask 002), and refuses one another group can write", () =>
    Effect.gen(function*() {
      const parent = path.join(tempDir(), "group")
      fs.mkdirSync(parent)
      fs.chmodSync(parent, 0o775)
      expect(yield* ensurePrivateDir(path.join(parent, "state"))).toBe(path.join(parent, "state"))
      if (process.getuid?.() !== 0) return
      const shared = path.join(tempDir(), "shared-group")
      fs.mkdirSync(shared)
      fs.chmodSync(shared, 0o775)
      fs.chownSync(shared, 0, 65534)
      const error = yield* refusal(path.join(shared, "state"))
      expect(error.path).toBe(shared)
      expect(error.problem).toContain("writable by group 65534")
    }))

  it.effect("accepts the system temp directory (root's, sticky) and a link of ours among the parents", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const real = path.join(root, "real")
      fs.mkdirSync(real, { mode: 0o755 })
      fs.symlinkSync(real, path.join(root, "via"))
      expect(yield* ensurePrivateDir(path.join(root, "via", "state"))).toBe(path.join(root, "via", "state"))
      expect(modeOf(path.join(real, "state"))).toBe(0o700)
    }))
})

describe("per-user locations", () => {
  const context: UserDirsContext = { env: {}, home: "/home/ada", tmpdir: "/tmp", uid: 1000 }

  it("use XDG_CACHE_HOME / XDG_STATE_HOME when absolute, else the home directory", () => {
    expect(userCacheDir(context)).toBe("/home/ada/.cache/veyyon")
    expect(userStateDir(context)).toBe("/home/ada/.local/state/veyyon")
    const xdg = { ...context, env: { XDG_CACHE_HOME: "/x/cache", XDG_STATE_HOME: "/x/state" } }
    expect(userCacheDir(xdg)).toBe("/x/cache/veyyon")
    expect(userStateDir(xdg)).toBe("/x/state/veyyon")
    const relative = { ...context, env: { XDG_CACHE_HOME: "cache", XDG_STATE_HOME: " " } }
    expect(userCacheDir(relative)).toBe("/home/ada/.cache/veyyon")
    expect(userStateDir(relative)).toBe("/home/ada/.local/state/veyyon")
  })

  it("read XDG_STATE_HOME / XDG_CACHE_HOME through the settings reader: trimmed, blank as unset, the process's by default", () => {
    const padded = { ...context, env: { XDG_CACHE_HOME: " /x/cache ", XDG_STATE_HOME: "" } }
    expect(userCacheDir(padded)).toBe("/x/cache/veyyon")
    expect(userStateDir(padded)).toBe("/home/ada/.local/state/veyyon")
    const saved = process.env["XDG_STATE_HOME"]
    process.env["XDG_STATE_HOME"] = "/from/process/state"
    try {
      expect(userStateDir({ ...processUserDirsContext(), home: "/home/ada" })).toBe("/from/process/state/veyyon")
    } finally {
      if (saved === undefined) delete process.env["XDG_STATE_HOME"]
      else process.env["XDG_STATE_HOME"] = saved
    }
  })

  it("fall back to a per-user directory below the temp directory only without a home", () => {
    const homeless = { ...context, home: undefined }
    expect(tmpFallbackDir(homeless)).toBe("/tmp/veyyon-1000")
    expect(userCacheDir(homeless)).toBe("/tmp/veyyon-1000/cache")
    expect(userStateDir(homeless)).toBe("/tmp/veyyon-1000/state")
  })
})

const noOtherUser = otherUserSkipReason()

describe.skipIf(noOtherUser !== undefined)(titled("a second user on the machine", noOtherUser), () => {
  let other: OtherUser | undefined
  let sticky = ""
  beforeAll(() => {
    other = createOtherUser()
    const parent = tempDir()
    fs.chmodSync(parent, 0o755)
    sticky = path.join(parent, "tmp")
    fs.mkdirSync(sticky)
    fs.chmodSync(sticky, 0o1777)
  })
  afterAll(() => removeOtherUser(other))

  const plantDir = (name: string, mode = "777"): string => {
    const dir = path.join(sticky, name)
    const made = other!.run("mkdir", ["-m", mode, dir])
    expect(made.status, made.stderr).toBe(0)
    return dir
  }

  it.effect("a directory they made where ours would go is refused, not taken over", () =>
    Effect.gen(function*() {
      const planted = plantDir("veyyon-0")
      const error = yield* refusal(path.join(planted, "state"))
      expect(error.path).toBe(planted)
      expect(error.problem).toContain(`owned by uid ${other!.uid}`)
      expect(fs.readdirSync(planted)).toEqual([])
      expect(modeOf(planted)).toBe(0o777)
      expect(fs.lstatSync(planted).uid).toBe(other!.uid)
      const tight = plantDir("veyyon-1", "700")
      expect((yield* refusal(tight)).problem).toContain(`owned by uid ${other!.uid}`)
    }))

  it.effect("a symbolic link they planted is refused, whether it points at their directory or ours", () =>
    Effect.gen(function*() {
      const theirs = plantDir("theirs")
      const ours = tempDir()
      for (const [name, target] of [["to-theirs", theirs], ["to-ours", ours]] as const) {
        const link = path.join(sticky, name)
        expect(other!.run("ln", ["-s", target, link]).status).toBe(0)
        const error = yield* refusal(link)
        expect(error.problem).toBe("it is a symbolic link")
        const below = yield* refusal(path.join(link, "state"))
        expect(below.path).toBe(link)
        expect(below.problem).toContain(`symbolic link owned by uid ${other!.uid}`)
      }
    }))

  it.effect("an artifacts root they made is refused with ArtifactDirUnavailable naming it", () =>
    Effect.gen(function*() {
      const planted = plantDir("artifacts")
      const exit = yield* Effect.exit(makeArtifactStore(planted).pipe(Effect.provide(NodeServices.layer)))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = yield* Effect.flip(makeArtifactStore(planted).pipe(Effect.provide(NodeServices.layer)))
      expect(error._tag).toBe("ArtifactDirUnavailable")
      expect(error.message).toContain(planted)
      expect(error.message).toContain(`owned by uid ${other!.uid}`)
    }))

  it.effect("a runner cache directory they made, holding planted code, is refused and nothing is written into it", () =>
    Effect.gen(function*() {
      const cacheRoot = plantDir("runner-cache")
      const source = tempDir()
      fs.mkdirSync(path.join(source, "python"))
      for (const name of ["runner.py", "prelude.py", "boot.py"]) fs.writeFileSync(path.join(source, "python", name), "print('x')\n")
      const cache = yield* makeRunnerCache({ sourceDir: source, cacheRoot }).pipe(Effect.provide(NodeServices.layer))
      const error = yield* Effect.flip(cache.ensure("python"))
      expect(error).toBeInstanceOf(RunnerCacheWriteFailed)
      expect(error.message).toContain(cacheRoot)
      expect(fs.readdirSync(cacheRoot)).toEqual([])
    }))

  const python = findPython()
  it.skipIf(!integrationEnabled() || python === undefined)(titled("boot.py run from their directory refuses to load anything", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
    const planted = plantDir("boot-dir", "755")
    const runnerDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "runner", "python")
    for (const name of ["boot.py", "runner.py"]) {
      const copied = other!.run("cp", [path.join(runnerDir, name), path.join(planted, name)])
      expect(copied.status, copied.stderr).toBe(0)
    }
    const run = spawnSync(python!, ["-u", path.join(planted, "boot.py")], { encoding: "utf8", input: "" })
    expect(run.status).not.toBe(0)
    expect(run.stderr).toContain(`refusing to load code from ${planted}: it is owned by uid ${other!.uid}`)
    expect(fs.readdirSync(planted).sort()).toEqual(["boot.py", "runner.py"])
  })

  it.effect("they cannot read a session's artifacts or kv files", () =>
    Effect.gen(function*() {
      const top = tempDir()
      fs.chmodSync(top, 0o755)
      const root = path.join(top, "state", "sessions")
      const store = yield* makeArtifactStore(root).pipe(Effect.provide(NodeServices.layer))
      const session = yield* store.forSession("s1")
      const writer = yield* session.create("out", "txt")
      yield* writer.append("secret output")
      yield* writer.close
      expect(modeOf(writer.path)).toBe(0o600)
      expect(modeOf(session.dir)).toBe(0o700)
      const read = other!.run("cat", [writer.path])
      expect(read.status).not.toBe(0)
      expect(read.stderr).toContain("Permission denied")
      expect(other!.run("ls", [session.dir]).status).not.toBe(0)
    }).pipe(Effect.scoped))
})
