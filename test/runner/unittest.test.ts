import { spawnSync } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, titled } from "../support/skip.ts"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

describe.skipIf(!integrationEnabled())(titled("runner unit tests (Python unittest)", integrationOff()), () => {
  it("pass: python -m unittest discover runner/python/tests", () => {
    const python = findPython()
    expect(python, "no Python interpreter found").toBeDefined()
    const run = spawnSync(python!, ["-m", "unittest", "discover", "runner/python/tests"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 120_000
    })
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0)
    expect(run.stderr).toMatch(/\nOK( \(skipped=\d+\))?\n$/)
  }, 180_000)
})
