/**
 * The cluster secret every runner and client holds: from a file
 * (`VEYYON_CLUSTER_SECRET_FILE`, a regular file owned by the running user that no group
 * or other user may read or write) or the environment (`VEYYON_CLUSTER_SECRET`), never
 * from argv. At least 32 characters once trimmed; `openssl rand -hex 32` makes one.
 */
import { Result } from "effect"
import { readSecretFile as readPrivateSecret } from "../services/storage/SecretFile.ts"

/** The variable naming the secret's file. */
export const SECRET_FILE_ENV = "VEYYON_CLUSTER_SECRET_FILE"

/** The variable holding the secret itself. */
export const SECRET_ENV = "VEYYON_CLUSTER_SECRET"

/** The shortest secret accepted, in characters. */
export const MIN_SECRET_CHARS = 32

/** The largest secret file read, in bytes. */
export const MAX_SECRET_FILE_BYTES = 4096

/** The secret's text checked for length; `source` names where it came from in the error. */
export const checkSecretText = (raw: string, source: string): Result.Result<string, string> => {
  const text = raw.trim()
  return text.length >= MIN_SECRET_CHARS
    ? Result.succeed(text)
    : Result.fail(`the cluster secret from ${source} is ${text.length} characters long; it must have at least ${MIN_SECRET_CHARS} (make one with: openssl rand -hex 32)`)
}

/** Reads and checks a secret file (opened without following a symbolic link, checked on the open file). */
export const readSecretFile = (file: string): Result.Result<string, string> =>
  Result.flatMap(readPrivateSecret(file, SECRET_FILE_ENV, MAX_SECRET_FILE_BYTES), (text) => checkSecretText(text, `${SECRET_FILE_ENV} (${file})`))

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
