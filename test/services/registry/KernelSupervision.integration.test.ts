/**
 * Supervision with real kernels: a kernel's process killed from outside (no call in
 * flight) leaves the registry at once, and the next cell runs in a fresh kernel.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schedule } from "effect"
import { KernelRegistry } from "../../../src/services/registry/KernelRegistry.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { makeToolRuntime } from "../../support/toolRuntime.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(titled("kernel supervision", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const { runtime, run, close } = makeToolRuntime("veyyon-supervise-", python!)
  afterAll(close)
  const keysOf = (sessionId: string) =>
    runtime.runPromise(Effect.flatMap(KernelRegistry, (registry) => Effect.map(registry.keys, (keys) => keys.filter((key) => key.sessionId === sessionId))))
  const untilGone = (sessionId: string) =>
    runtime.runPromise(
      Effect.flatMap(KernelRegistry, (registry) =>
        registry.keys.pipe(
          Effect.repeat({ until: (keys) => !keys.some((key) => key.sessionId === sessionId), schedule: Schedule.spaced(Duration.millis(20)) }),
          Effect.timeoutOption(Duration.seconds(60)),
          Effect.map((found) => found._tag === "Some")
        ))
    )

  const pidCell = { py: "import os\nprint(os.getpid())", js: "console.log(process.pid)" }
  const stateCell = { py: ["kept = 1", "print(globals().get('kept', 'fresh'))"], js: ["globalThis.kept = 1", "console.log(globalThis.kept ?? 'fresh')"] }

  for (const language of ["py", "js"] as const) {
    it(`${language}: killing the kernel's process evicts it without a call; the next cell gets a new kernel`, async () => {
      const sessionId = `supervise-${language}`
      await run(language, stateCell[language][0]!, sessionId)
      const pid = Number((await run(language, pidCell[language], sessionId)).text.trim())
      expect(pid).toBeGreaterThan(0)
      expect(await keysOf(sessionId)).toHaveLength(1)
      process.kill(pid, "SIGKILL")
      expect(await untilGone(sessionId)).toBe(true)
      const next = await run(language, stateCell[language][1]!, sessionId)
      expect(next.text.trim()).toBe("fresh")
      expect(next.retried).toBeUndefined()
      expect(Number((await run(language, pidCell[language], sessionId)).text.trim())).not.toBe(pid)
    }, 120_000)
  }
})
