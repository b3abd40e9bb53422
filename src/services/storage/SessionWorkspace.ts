/**
 * Per-session working directories under one root, for the doors that serve remote callers
 * (the HTTP MCP door, cluster runners): each session's cells run in its own private
 * directory (0700, created and checked as `PrivateDir` does), named after the session id
 * (its safe characters, then a hash of the whole id, so no id names a path outside the
 * root), and removed when the session ends.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { ensurePrivateDir, type PrivateDirRefused, processUserDirsContext, userStateDir } from "./PrivateDir.ts"

/** The directory name of a session's workspace: up to 40 of its id's safe characters and 16 hex digits of its SHA-256. */
export const sessionDirName = (sessionId: string): string => {
  const safe = sessionId.replace(/[^A-Za-z0-9_-]/g, "").slice(0, 40)
  const hash = createHash("sha256").update(sessionId, "utf8").digest("hex").slice(0, 16)
  return safe === "" ? hash : `${safe}-${hash}`
}

/** The default root of a door's session directories: `<state dir>/workspaces/<door>`. */
export const defaultWorkspaceRoot = (door: string): string => path.join(userStateDir(processUserDirsContext()), "workspaces", door)

/** A root of per-session directories. */
export interface SessionWorkspace {
  readonly root: string
  /** The session's directory, created (0700) on first use and checked every time. */
  readonly dirOf: (sessionId: string) => Effect.Effect<string, PrivateDirRefused>
  /** Removes the session's directory and everything in it (nothing when there is none). */
  readonly remove: (sessionId: string) => Effect.Effect<void>
}

/** The session directories under `root`. */
export const makeSessionWorkspace = (root: string): SessionWorkspace => {
  const absolute = path.resolve(root)
  const pathOf = (sessionId: string) => path.join(absolute, sessionDirName(sessionId))
  return {
    root: absolute,
    dirOf: (sessionId) => ensurePrivateDir(pathOf(sessionId)),
    remove: (sessionId) =>
      Effect.sync(() => NodeFs.rmSync(pathOf(sessionId), { recursive: true, force: true })).pipe(
        Effect.catchDefect((error) => Effect.logWarning(`the working directory of session ${sessionId} was not removed: ${String(error)}`))
      )
  }
}
