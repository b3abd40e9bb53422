/**
 * Builds the package (`tsc -p tsconfig.build.json` into `dist/`) once before the tests, so
 * tests that spawn `veyyon` run the entry users run (`bin/veyyon.mjs`) instead of
 * compiling the sources in every child.
 */
import { execFileSync } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

export default function setup(): void {
  execFileSync(process.execPath, [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", path.join(root, "tsconfig.build.json")], {
    cwd: root,
    stdio: "inherit"
  })
}
