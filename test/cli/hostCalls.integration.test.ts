/**
 * `veyyon eval` has no model or person to ask: a cell's completion() raises at once with
 * a sentence saying where such calls are answered, and its input() gets end of input.
 */
import { afterAll, describe, expect, it } from "vitest"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { childEnv, runCli, stopAll, tempDir } from "./support.ts"

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(titled("the CLI's host calls", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  afterAll(stopAll)

  it("answers completion() and input() with sentences naming the doors that answer them", async () => {
    const env = childEnv(tempDir("veyyon-cli-host-calls-"))
    const completion = await runCli(["eval", "completion('hi')"], { env })
    expect(completion.code).toBe(1)
    expect(completion.stdout + completion.stderr).toContain("completion() has no one to answer it: the veyyon CLI has no model or person to ask")
    const input = await runCli(["eval", "try:\n    input('name? ')\nexcept EOFError as e:\n    print('eof:', e)"], { env })
    expect(input.code).toBe(0)
    expect(input.stdout).toContain("eof: input() got no line: the veyyon CLI has no model or person to ask")
  }, 240_000)
})
