/**
 * A second, unprivileged user for tests that play an attacker on a shared machine: created
 * with useradd when the tests run as root, removed with `userdel -r` afterwards.
 */
import { spawnSync, type SpawnSyncReturns } from "node:child_process"
import { randomBytes } from "node:crypto"

/** A user created for one test file. */
export interface OtherUser {
  readonly name: string
  readonly uid: number
  readonly gid: number
  /** Runs a command as this user (no shell); its exit status and output. */
  readonly run: (command: string, args: ReadonlyArray<string>) => SpawnSyncReturns<string>
}

/** Why a second user cannot be made here, or undefined when it can. */
export const otherUserSkipReason = (): string | undefined => {
  if (process.platform === "win32") return "Windows has no useradd"
  if (process.getuid?.() !== 0) return "creating a second user needs root (CI runs the tests as root)"
  if (spawnSync("useradd", ["--help"]).error !== undefined) return "useradd is not installed"
  return undefined
}

/** Creates a fresh user with a home directory; remove it with `removeOtherUser`. */
export const createOtherUser = (): OtherUser => {
  const name = `vytest${randomBytes(4).toString("hex")}`
  const made = spawnSync("useradd", ["--create-home", "--shell", "/bin/sh", name], { encoding: "utf8" })
  if (made.status !== 0) throw new Error(`useradd ${name} failed: ${made.stderr}`)
  const id = (flag: string) => Number(spawnSync("id", [flag, name], { encoding: "utf8" }).stdout.trim())
  const uid = id("-u")
  const gid = id("-g")
  return {
    name,
    uid,
    gid,
    run: (command, args) => spawnSync(command, [...args], { uid, gid, encoding: "utf8", cwd: "/" })
  }
}

/** Removes the user and its home (`run` waits for every command, so nothing of it is still running). */
export const removeOtherUser = (user: OtherUser | undefined): void => {
  if (user === undefined) return
  spawnSync("userdel", ["-r", user.name], { encoding: "utf8" })
}
