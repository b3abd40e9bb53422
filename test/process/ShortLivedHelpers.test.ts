/**
 * The short-lived commands the host runs (the Ruby and Python interpreter checks, the
 * Python runner's warm-up, the bubblewrap probe) are killed, with every process they
 * started, when the caller is interrupted. Each is given a fake executable that starts a
 * sleeper and becomes another, so it never ends on its own.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { warmRunnerCache } from "../../src/backends/python/PythonBackend.ts"
import { commandInspector } from "../../src/backends/python/PythonRuntime.ts"
import { resolveRuby } from "../../src/backends/ruby.ts"
import { probeBwrap } from "../../src/services/isolation/Sandbox.ts"
import { eventually, isLive, liveWithMark, uniqueSleep } from "../support/process.ts"
import { tempDir } from "../support/tempDirs.ts"

const PATH = process.env.PATH ?? "/usr/bin:/bin"

/** An executable that never ends: it starts a sleeper (in its group) and becomes another; both carry `mark`. */
const hangingExecutable = (mark: string): string => {
  const file = path.join(tempDir("veyyon-helper-"), "hangs")
  fs.writeFileSync(file, `#!/bin/sh\nsleep ${mark} &\nexec sleep ${mark}\n`, { mode: 0o755 })
  return file
}

/** Runs `helper` until both sleepers run, interrupts it, and expects neither left. */
const killedWhenInterrupted = <A, E>(mark: string, helper: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(helper)
    yield* eventually(() => liveWithMark(mark).length === 2, "the helper and its sleeper")
    const started = liveWithMark(mark)
    yield* Fiber.interrupt(fiber)
    expect(started.filter(isLive)).toEqual([])
    expect(liveWithMark(mark)).toEqual([])
  })

describe("short-lived helpers are killed when interrupted", () => {
  it.live("the Ruby interpreter check", () => {
    const mark = uniqueSleep()
    return killedWhenInterrupted(mark, resolveRuby({ setting: hangingExecutable(mark), cwd: tempDir("veyyon-helper-cwd-"), env: { PATH } }))
  }, 30_000)

  it.live("the Python interpreter check", () => {
    const mark = uniqueSleep()
    return killedWhenInterrupted(mark, commandInspector("60 seconds")({ executable: hangingExecutable(mark), cwd: tempDir("veyyon-helper-cwd-"), env: { PATH } }))
  }, 30_000)

  it.live("the Python runner's warm-up", () => {
    const mark = uniqueSleep()
    const runner = { folder: "python", dir: tempDir("veyyon-helper-runner-"), sources: new Map<string, string>(), hash: "0", wrote: false }
    return killedWhenInterrupted(mark, warmRunnerCache(hangingExecutable(mark), runner))
  }, 30_000)

  it.live("the bubblewrap probe", () => {
    const mark = uniqueSleep()
    return killedWhenInterrupted(mark, probeBwrap(hangingExecutable(mark)))
  }, 30_000)
})
