/**
 * `veyyon eval --session ID` keeps kv (and artifacts) and variables across separate
 * `veyyon eval` processes, in the per-user state directory, one private directory per
 * session id; without `--session` variables are not carried between runs.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { sessionArtifactsDir } from "../../src/services/output/ArtifactStore.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { childEnv, runCli, stopAll, tempDir } from "./support.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()
const SPAWN_TIMEOUT = 600_000

describe.skipIf(!integrationEnabled() || python === undefined)(titled("veyyon eval --session", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const state = fs.realpathSync(tempDir("veyyon-cli-state-"))
  const { VEYYON_ARTIFACTS_DIR: _unused, ...inherited } = childEnv(state)
  const env = { ...inherited, XDG_STATE_HOME: state }
  afterAll(() => {
    stopAll()
    fs.rmSync(state, { recursive: true, force: true })
  })

  it("keeps kv across runs of the same session id, in Python and JavaScript, and not across ids", async () => {
    const first = await runCli(["eval", "--session", "keep-me", "kv.set('n', 41)\nprint('stored')"], { env })
    expect(first.stderr).toBe("")
    expect(first.stdout).toContain("stored")
    const second = await runCli(["eval", "--session", "keep-me", "print(kv.get('n') + 1)"], { env })
    expect(second.stderr).not.toMatch(/error|refused|not loaded/i)
    expect(second.stdout).toMatch(/^42$/m)
    const js = await runCli(["eval", "--language", "js", "--session", "keep-me", "console.log('js sees', kv.get('n'))"], { env })
    expect(js.stdout).toContain("js sees 41")
    const other = await runCli(["eval", "--session", "someone-else", "print(kv.get('n', 'absent'))"], { env })
    expect(other.stdout).toMatch(/^absent$/m)

    const sessionDir = sessionArtifactsDir(path.join(state, "veyyon", "sessions"), "keep-me")
    expect(fs.readdirSync(path.join(sessionDir, "kv"))).toHaveLength(1)
    for (const dir of [path.join(state, "veyyon"), path.join(state, "veyyon", "sessions"), sessionDir, path.join(sessionDir, "kv")]) {
      expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
    }
  }, SPAWN_TIMEOUT)

  it("carries variables between runs of the same --session, and not between runs without one", async () => {
    const first = await runCli(["eval", "--session", "vars", "import math\nradius = 2\nhistory = ['a']"], { env })
    expect(first.code, first.stderr).toBe(0)
    const second = await runCli(["eval", "--session", "vars", "history.append('b'); print(round(math.pi * radius ** 2, 3), history)"], { env })
    expect(second.stdout).toContain("12.566 ['a', 'b']")
    expect(second.stderr).toMatch(/restored as of cell 1/)
    const third = await runCli(["eval", "--session", "vars", "print(history)"], { env })
    expect(third.stdout).toContain("['a', 'b']")
    expect(third.stderr).toMatch(/restored as of cell 2 \("history.append/)

    const plain = await runCli(["eval", "unnamed = 5"], { env })
    expect(plain.code, plain.stderr).toBe(0)
    const plainAgain = await runCli(["eval", "print(globals().get('unnamed'))"], { env })
    expect(plainAgain.stdout).toMatch(/^None$/m)
    expect(plainAgain.stderr).not.toMatch(/restored/)

    const listed = await runCli(["session", "list"], { env })
    expect(listed.stdout).toMatch(/^vars\tpy\tcell 3\t[0-9.]+ (B|KiB)\t\d+ s ago\t3 names$/m)
    expect(listed.stdout).not.toMatch(/^cli\t/m)
    const removed = await runCli(["session", "rm", "vars"], { env })
    expect(removed.code).toBe(0)
    const after = await runCli(["eval", "--session", "vars", "print(globals().get('radius'))"], { env })
    expect(after.stdout).toMatch(/^None$/m)
  }, SPAWN_TIMEOUT)
})
