/**
 * Files written whole or not at all: the data goes to a fresh temporary file beside the
 * target, created exclusively without following a symbolic link, then renamed into place.
 */
import { randomBytes } from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { PRIVATE_FILE_MODE } from "./PrivateDir.ts"

/** Open flags that create a new file, never an existing one, never through a symbolic link. */
export const EXCLUSIVE_CREATE = NodeFs.constants.O_WRONLY | NodeFs.constants.O_CREAT | NodeFs.constants.O_EXCL |
  (NodeFs.constants.O_NOFOLLOW ?? 0)

/** A temporary name beside `target` (a dot file ending `.tmp`), unique to this process and call. */
export const temporaryBeside = (target: string): string =>
  path.join(path.dirname(target), `.${path.basename(target)}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`)

/** Writes `data` to `target` atomically with `mode` (default 0600); `sync` flushes it to disk before the rename. */
export const writeFileAtomically = (
  target: string,
  data: string | Uint8Array,
  options: { readonly mode?: number; readonly sync?: boolean } = {}
): void => {
  const temporary = temporaryBeside(target)
  const fd = NodeFs.openSync(temporary, EXCLUSIVE_CREATE, options.mode ?? PRIVATE_FILE_MODE)
  try {
    NodeFs.writeFileSync(fd, data)
    if (options.sync === true) NodeFs.fsyncSync(fd)
    NodeFs.closeSync(fd)
    NodeFs.renameSync(temporary, target)
  } catch (error) {
    try {
      NodeFs.closeSync(fd)
    } catch {
      // already closed
    }
    NodeFs.rmSync(temporary, { force: true })
    throw error
  }
}

/** `writeFileAtomically` off the event loop, mode 0600, without the sync. */
export const writeFileAtomicallyAsync = async (target: string, data: string | Uint8Array): Promise<void> => {
  const temporary = temporaryBeside(target)
  const handle = await NodeFs.promises.open(temporary, EXCLUSIVE_CREATE, PRIVATE_FILE_MODE)
  try {
    await handle.writeFile(data)
    await handle.close()
    await NodeFs.promises.rename(temporary, target)
  } catch (error) {
    await handle.close().catch(() => undefined)
    await NodeFs.promises.rm(temporary, { force: true })
    throw error
  }
}
