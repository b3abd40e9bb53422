/**
 * Room `storage`: what we keep on disk for a user: private directories, files written
 * exclusively and renamed into place, the kv store, session workspaces and the runner
 * cache. It uses the kernel's bridge port, isolation's env type and config's reader of
 * variables; nothing above.
 *
 * Directories only the running user can touch, and where they live.
 *
 * `ensurePrivateDir` walks a path from `/`: every directory it creates is made with mode
 * 0700 and every one it ends on must be ours: owned by the running uid, not a symbolic
 * link (lstat), no group or other write bit. The directories above (ones we did not
 * create, like `/home` or `/tmp`) must be owned by us or root and not writable by others
 * unless they are root-owned and sticky (`/tmp`); group write is accepted only for our own
 * primary group (a user-private group, as with a umask of 002); a symbolic link among
 * them must itself be owned by us or root. A directory that fails is refused with an error
 * naming it and what is wrong; it is never chmod-ed or reused anyway.
 *
 * Per-user locations: the runner cache under `$XDG_CACHE_HOME/veyyon` (or
 * `~/.cache/veyyon`), session state (artifacts, kv) under `$XDG_STATE_HOME/veyyon` (or
 * `~/.local/state/veyyon`), and `<tmpdir>/veyyon-<uid>` only when there is no home.
 * Windows has no mode bits or uids in this sense: the checks do nothing there.
 */
import { Effect, Schema } from "effect"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as path from "node:path"
import { hostVariables, readText } from "../config/ConfigSources.ts"
import type { EnvRecord } from "../isolation/EnvPolicy.ts"

/** Mode of every directory we create. */
export const PRIVATE_DIR_MODE = 0o700
/** Mode of every file we create. */
export const PRIVATE_FILE_MODE = 0o600

/** A directory that is not safe to keep our state in. */
export class PrivateDirRefused extends Schema.TaggedError<PrivateDirRefused>()("PrivateDirRefused", {
  path: Schema.String,
  problem: Schema.String
}) {
  override get message(): string {
    return `Refusing to use ${this.path}: ${this.problem}. veyyon keeps its state only in directories ` +
      `no other user can write; remove or fix it, or point the setting that chose it elsewhere.`
  }
}

const checksApply = (): boolean => process.platform !== "win32" && typeof process.getuid === "function"

const currentUid = (): number => (typeof process.geteuid === "function" ? process.geteuid() : -1)

const currentGid = (): number => (typeof process.getegid === "function" ? process.getegid() : -1)

const describeMode = (mode: number): string => `mode ${(mode & 0o7777).toString(8).padStart(4, "0")}`

/** Why a directory's lstat makes it unfit to be ours, or undefined when it is fit. */
export const ownDirProblem = (stats: NodeFs.Stats, uid: number = currentUid()): string | undefined => {
  if (stats.isSymbolicLink()) return "it is a symbolic link"
  if (!stats.isDirectory()) return "it is not a directory"
  if (stats.uid !== uid) return `it is owned by uid ${stats.uid}, not by the running user (uid ${uid})`
  if ((stats.mode & 0o022) !== 0) return `it is writable by group or others (${describeMode(stats.mode)})`
  return undefined
}

/** Why a directory above ours (stat, symlinks followed) lets someone else swap what is below it, or undefined. */
export const parentDirProblem = (
  stats: NodeFs.Stats,
  uid: number = currentUid(),
  gid: number = currentGid()
): string | undefined => {
  if (!stats.isDirectory()) return "it is not a directory"
  if (stats.uid !== uid && stats.uid !== 0) return `it is owned by uid ${stats.uid}, neither the running user nor root`
  if (stats.uid === 0 && (stats.mode & 0o1000) !== 0) return undefined
  if ((stats.mode & 0o002) !== 0) {
    return `it is writable by others and not a root-owned sticky directory (${describeMode(stats.mode)})`
  }
  if ((stats.mode & 0o020) !== 0 && stats.gid !== gid) {
    return `it is writable by group ${stats.gid}, which is not the running user's own group (${describeMode(stats.mode)})`
  }
  return undefined
}

/** Why a file's lstat (or fstat) makes it not one we wrote, or undefined when it is a regular file of ours. */
export const ownFileProblem = (stats: NodeFs.Stats, uid: number = currentUid()): string | undefined => {
  if (stats.isSymbolicLink()) return "it is a symbolic link"
  if (!stats.isFile()) return "it is not a regular file"
  if (checksApply() && stats.uid !== uid) return `it is owned by uid ${stats.uid}, not by the running user (uid ${uid})`
  return undefined
}

/** The contents of `file`, read without following a symbolic link, refused (code `EREFUSED`) unless it is a regular file of ours. */
export const readOwnFile = (file: string): Promise<Buffer> =>
  NodeFs.promises.open(file, NodeFs.constants.O_RDONLY | (NodeFs.constants.O_NOFOLLOW ?? 0)).then(async (handle) => {
    try {
      const problem = ownFileProblem(await handle.stat())
      if (problem !== undefined) throw Object.assign(new Error(problem), { code: "EREFUSED" })
      return await handle.readFile()
    } finally {
      await handle.close()
    }
  })

const errnoOf = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | undefined)?.code

/** The lstat of `file`, undefined when it does not exist (without throwing, which costs a stack trace per missing directory). */
const lstatOrUndefined = (file: string): NodeFs.Stats | undefined => NodeFs.lstatSync(file, { throwIfNoEntry: false })

const checkAncestor = (dir: string, link: NodeFs.Stats, uid: number): string | undefined => {
  if (link.isSymbolicLink() && link.uid !== uid && link.uid !== 0) {
    return `it is a symbolic link owned by uid ${link.uid}, neither the running user nor root`
  }
  return parentDirProblem(link.isSymbolicLink() ? NodeFs.statSync(dir) : link, uid, currentGid())
}

const ensureSync = (target: string): string => {
  const dir = path.resolve(target)
  if (!checksApply()) {
    NodeFs.mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE })
    return dir
  }
  const uid = currentUid()
  const parts = dir.split(path.sep).filter((part) => part.length > 0)
  let current: string = path.sep
  let created = false
  for (let index = 0; index < parts.length; index++) {
    current = path.join(current, parts[index]!)
    const last = index === parts.length - 1
    let stats = lstatOrUndefined(current)
    if (stats === undefined) {
      try {
        NodeFs.mkdirSync(current, { mode: PRIVATE_DIR_MODE })
      } catch (error) {
        if (errnoOf(error) !== "EEXIST") throw error
      }
      stats = NodeFs.lstatSync(current)
      created = true
    }
    const problem = last || created ? ownDirProblem(stats, uid) : checkAncestor(current, stats, uid)
    if (problem !== undefined) throw new PrivateDirRefused({ path: current, problem })
  }
  return dir
}

/** `ensurePrivateDir` for synchronous callers: the absolute directory, or a thrown `PrivateDirRefused` (or file system error). */
export const ensurePrivateDirSync = (target: string): string => ensureSync(target)

/** Creates (0700) or checks `target` and everything above it as described in the module doc; succeeds with its absolute path. */
export const ensurePrivateDir = (target: string): Effect.Effect<string, PrivateDirRefused> =>
  Effect.try({
    try: () => ensureSync(target),
    catch: (error) =>
      error instanceof PrivateDirRefused
        ? error
        : new PrivateDirRefused({ path: path.resolve(target), problem: (error as Error).message })
  })

/** The process facts the per-user locations depend on. */
export interface UserDirsContext {
  readonly env: EnvRecord
  readonly home: string | undefined
  readonly tmpdir: string
  readonly uid: number
}

/** The facts of the running process. */
export const processUserDirsContext = (): UserDirsContext => {
  let home: string | undefined
  try {
    home = NodeOs.homedir()
  } catch {
    home = undefined
  }
  return {
    env: hostVariables(),
    home: home === undefined || home.length === 0 ? undefined : home,
    tmpdir: NodeOs.tmpdir(),
    uid: typeof process.getuid === "function" ? process.getuid() : 0
  }
}

const xdgDir = (context: UserDirsContext, name: string, homeRelative: string): string | undefined => {
  const given = readText(name, context.env)
  if (given !== undefined && path.isAbsolute(given)) return path.join(given, "veyyon")
  return context.home === undefined ? undefined : path.join(context.home, homeRelative, "veyyon")
}

/** The private per-user fallback below the temp directory: `<tmpdir>/veyyon-<uid>`. */
export const tmpFallbackDir = (context: UserDirsContext): string =>
  path.join(context.tmpdir, `veyyon-${context.uid}`)

/** Where the runner cache lives: `$XDG_CACHE_HOME/veyyon`, `~/.cache/veyyon`, else `<tmpdir>/veyyon-<uid>/cache`. */
export const userCacheDir = (context: UserDirsContext): string =>
  xdgDir(context, "XDG_CACHE_HOME", ".cache") ?? path.join(tmpFallbackDir(context), "cache")

/** Where per-session state lives: `$XDG_STATE_HOME/veyyon`, `~/.local/state/veyyon`, else `<tmpdir>/veyyon-<uid>/state`. */
export const userStateDir = (context: UserDirsContext): string =>
  xdgDir(context, "XDG_STATE_HOME", path.join(".local", "state")) ?? path.join(tmpFallbackDir(context), "state")
