/**
 * The cluster secret every runner and client holds: from a file
 * (`VEYYON_CLUSTER_SECRET_FILE`, a regular file owned by the running user that no group
 * or other user may read or write) or the environment (`VEYYON_CLUSTER_SECRET`), never
 * from argv. At least 32 characters once trimmed; `openssl rand -hex 32` makes one.
 */
import { Result } from "effect"
import * as NodeFs from "node:fs"

/** The variable naming the secret's file. */
export const SECRET_FILE_ENV = "VEYYON_CLUSTER_SECRET_FILE"

/** The variable holding the secret itself. */
export const SECRET_ENV = "VEYYON_CLUSTER_SECRET"

/** The shortest secret accepted, in characters. */
export const MIN_SECRET_CHARS = 32

/** The largest secret file read, in bytes. */
export const MAX_SECRET_FILE_BYTES = 4096

const currentUid = (): number | undefined => (typeof process.geteuid === "function" ? process.geteuid() : undefined)

/** Why a secret file's fstat makes it unfit to hold the secret, or undefined when it is fit. */
export const secretFileProblem = (stats: NodeFs.Stats, uid: number | undefined = currentUid()): string | undefined => {
  if (!stats.isFile()) return "it is not a regular file"
  if (uid !== undefined && stats.uid !== uid) return `it is owned by uid ${stats.uid}, not by the running user (uid ${uid})`
  if (uid !== undefined && (stats.mode & 0o077) !== 0) {
    return `group or other users may read or write it (mode ${(stats.mode & 0o777).toString(8).padStart(4, "0")}); chmod 600 it`
  }
  if (stats.size > MAX_SECRET_FILE_BYTES) return `it is larger than ${MAX_SECRET_FILE_BYTES} bytes`
  return undefined
}

/** The secret's text checked for length; `source` names where it came from in the error. */
export const checkSecretText = (raw: string, source: string): Result.Result<string, string> => {
  const text = raw.trim()
  return text.length >= MIN_SECRET_CHARS
    ? Result.succeed(text)
    : Result.fail(`the cluster secret from ${source} is ${text.length} characters long; it must have at least ${MIN_SECRET_CHARS} (make one with: openssl rand -hex 32)`)
}

/** Reads and checks a secret file (opened without following a symbolic link, checked on the open file). */
export const readSecretFile = (file: string): Result.Result<string, string> => {
  let fd: number
  try {
    fd = NodeFs.openSync(file, NodeFs.constants.O_RDONLY | (NodeFs.constants.O_NOFOLLOW ?? 0))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return Result.fail(`${SECRET_FILE_ENV}: cannot open ${file} (${code === "ELOOP" ? "it is a symbolic link" : code ?? String(error)})`)
  }
  try {
    const problem = secretFileProblem(NodeFs.fstatSync(fd))
    if (problem !== undefined) return Result.fail(`${SECRET_FILE_ENV}: refusing ${file}: ${problem}`)
    const buffer = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1)
    const length = NodeFs.readSync(fd, buffer, 0, buffer.length, 0)
    return checkSecretText(buffer.subarray(0, length).toString("utf8"), `${SECRET_FILE_ENV} (${file})`)
  } finally {
    NodeFs.closeSync(fd)
  }
}

/**
 * The secret from `given` (an embedder's own value), else the file `VEYYON_CLUSTER_SECRET_FILE`
 * names, else `VEYYON_CLUSTER_SECRET`; undefined when none is set. Setting both variables is an error.
 */
export const resolveSecret = (
  given: string | undefined,
  env: Readonly<Record<string, string | undefined>>
): Result.Result<string | undefined, string> => {
  if (given !== undefined) return checkSecretText(given, "the cluster settings")
  const file = env[SECRET_FILE_ENV]?.trim()
  const value = env[SECRET_ENV]
  const hasValue = value !== undefined && value.trim() !== ""
  if (file !== undefined && file !== "") {
    return hasValue ? Result.fail(`set either ${SECRET_FILE_ENV} or ${SECRET_ENV}, not both`) : readSecretFile(file)
  }
  return hasValue ? checkSecretText(value, SECRET_ENV) : Result.succeed(undefined)
}
