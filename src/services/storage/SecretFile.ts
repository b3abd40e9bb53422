/**
 * Secrets read from files: a regular file owned by the running user that no group or
 * other user may read or write, opened without following a symbolic link, checked on the
 * open file, read up to a bound.
 */
import { Result } from "effect"
import * as NodeFs from "node:fs"

const currentUid = (): number | undefined => (typeof process.geteuid === "function" ? process.geteuid() : undefined)

/** Why a secret file's fstat makes it unfit to hold a secret, or undefined when it is fit. */
export const secretFileProblem = (stats: NodeFs.Stats, maxBytes: number, uid: number | undefined = currentUid()): string | undefined => {
  if (!stats.isFile()) return "it is not a regular file"
  if (uid !== undefined && stats.uid !== uid) return `it is owned by uid ${stats.uid}, not by the running user (uid ${uid})`
  if (uid !== undefined && (stats.mode & 0o077) !== 0) {
    return `group or other users may read or write it (mode ${(stats.mode & 0o777).toString(8).padStart(4, "0")}); chmod 600 it`
  }
  if (stats.size > maxBytes) return `it is larger than ${maxBytes} bytes`
  return undefined
}

/** A secret file's text, or a sentence saying why it was refused (`label` names the setting that named it). */
export const readSecretFile = (file: string, label: string, maxBytes: number): Result.Result<string, string> => {
  let fd: number
  try {
    fd = NodeFs.openSync(file, NodeFs.constants.O_RDONLY | (NodeFs.constants.O_NOFOLLOW ?? 0))
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return Result.fail(`${label}: cannot open ${file} (${code === "ELOOP" ? "it is a symbolic link" : code ?? String(error)})`)
  }
  try {
    const problem = secretFileProblem(NodeFs.fstatSync(fd), maxBytes)
    if (problem !== undefined) return Result.fail(`${label}: refusing ${file}: ${problem}`)
    const buffer = Buffer.alloc(maxBytes + 1)
    const length = NodeFs.readSync(fd, buffer, 0, buffer.length, 0)
    if (length > maxBytes) return Result.fail(`${label}: refusing ${file}: it is larger than ${maxBytes} bytes`)
    return Result.succeed(buffer.subarray(0, length).toString("utf8"))
  } finally {
    NodeFs.closeSync(fd)
  }
}
