/**
 * Builds the package (`tsc -p tsconfig.build.json` into `dist/`) once before the tests, so
 * tests that spawn `veyyon` run the entry users run (`bin/veyyon.mjs`) instead of
 * compiling the sources in every child; and keeps the run's list of temporary directories
 * (`tempDirList.ts`), removing every one listed when the run ends.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { TEMP_DIR_LIST_ENV } from "./support/tempDirList.ts"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

export default function setup(): () => void {
  execFileSync(process.execPath, [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", path.join(root, "tsconfig.build.json")], {
    cwd: root,
    stdio: "inherit"
  })
  const listDir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-test-run-"))
  const list = path.join(listDir, "temp-dirs")
  fs.writeFileSync(list, "", { flag: "wx", mode: 0o600 })
  process.env[TEMP_DIR_LIST_ENV] = list
  return () => {
    for (const dir of new Set(fs.readFileSync(list, "utf8").split("\n"))) {
      if (path.isAbsolute(dir)) fs.rmSync(dir, { recursive: true, force: true })
    }
    fs.rmSync(listDir, { recursive: true, force: true })
  }
}
