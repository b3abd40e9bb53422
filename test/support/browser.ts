/**
 * A real browser for the viewer's tests: Debian's `chromium`, found on PATH, driven
 * headless by playwright-core. A test without one skips and says why.
 */
import * as fs from "node:fs"
import * as path from "node:path"

/** The chromium executable on PATH, if there is one. */
export const findChromium = (): string | undefined => {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue
    for (const name of ["chromium", "chromium-browser"]) {
      const candidate = path.join(dir, name)
      try {
        fs.accessSync(candidate, fs.constants.X_OK)
        return candidate
      } catch {
        // not here
      }
    }
  }
  return undefined
}
