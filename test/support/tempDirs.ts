/**
 * Temporary directories a test file made, removed after its tests (under vitest: an
 * `afterAll` of the importing file, and the run's teardown for a file whose tests were all
 * skipped; elsewhere, as in the bench, when the process exits), so a file that forgets, or
 * fails before its own clean-up, leaves nothing behind.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { TEMP_DIR_LIST_ENV } from "./tempDirList.ts"

const made = new Set<string>()

const removeAll = () => {
  for (const entry of made) fs.rmSync(entry, { recursive: true, force: true })
  made.clear()
}

// vitest refuses to be imported outside its runner (the bench imports the cluster's test support).
if (process.env.VITEST !== undefined) (await import("vitest")).afterAll(removeAll)
else process.once("exit", removeAll)

/** Removes `dir` (recursively) after the importing file's tests. */
export const removeWhenDone = (dir: string): string => {
  made.add(dir)
  const list = process.env[TEMP_DIR_LIST_ENV]
  if (list !== undefined) fs.appendFileSync(list, `${dir}\n`)
  return dir
}

/** A fresh private temporary directory named by `prefix`, removed after the importing file's tests. */
export const tempDir = (prefix: string): string => removeWhenDone(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
