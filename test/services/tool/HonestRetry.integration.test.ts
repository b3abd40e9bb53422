/**
 * A kernel that dies during a cell, with real Python and Node kernels: the cell runs again
 * once, the result says so (`retried`, a notice, the first attempt's output kept before the
 * restart line), and a second death is an EvalResult with the exit, not a thrown error.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { makeToolRuntime } from "../../support/toolRuntime.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(titled("a kernel dying during a cell", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const { root, run, close } = makeToolRuntime("veyyon-retry-", python!)
  afterAll(close)

  const cells = {
    py: (log: string, always: boolean) => [
      "import os, signal",
      `with open(${JSON.stringify(log)}, "a") as f: f.write("ran\\n")`,
      `attempt = len(open(${JSON.stringify(log)}).read().splitlines())`,
      "print('attempt', attempt, flush=True)",
      `if ${always ? "True" : "attempt == 1"}: os.kill(os.getpid(), signal.SIGKILL)`,
      "print('finished')"
    ].join("\n"),
    js: (log: string, always: boolean) => [
      "const fs = require('node:fs')",
      `fs.appendFileSync(${JSON.stringify(log)}, 'ran\\n')`,
      `const attempt = fs.readFileSync(${JSON.stringify(log)}, 'utf8').trim().split('\\n').length`,
      "console.log('attempt', attempt)",
      `if (${always ? "true" : "attempt === 1"}) process.kill(process.pid, 'SIGKILL')`,
      "console.log('finished')"
    ].join("\n")
  }

  for (const language of ["py", "js"] as const) {
    it(`${language}: the cell runs twice, and the result says so and keeps the first attempt's output`, async () => {
      const log = path.join(root, `${language}-once.log`)
      const result = await run(language, cells[language](log, false), `${language}-once`)
      expect(fs.readFileSync(log, "utf8")).toBe("ran\nran\n")
      expect(result.status).toBe("ok")
      expect(result.retried).toBe(true)
      expect(result.notice).toContain("may have happened twice")
      expect(result.notice).toContain("signal SIGKILL")
      const first = result.text.indexOf("attempt 1")
      const restart = result.text.indexOf("the kernel died (signal SIGKILL); the output above is from the first attempt")
      const second = result.text.indexOf("attempt 2")
      expect(first).toBeGreaterThanOrEqual(0)
      expect(restart).toBeGreaterThan(first)
      expect(second).toBeGreaterThan(restart)
      expect(result.text).toContain("finished")
      expect(result.text).toContain("may have happened twice")
      const next = await run(language, language === "py" ? "1 + 1" : "1 + 1", `${language}-once`)
      expect(next.retried).toBeUndefined()
    })

    it(`${language}: a second death returns an error result with the signal`, async () => {
      const log = path.join(root, `${language}-always.log`)
      const result = await run(language, cells[language](log, true), `${language}-always`)
      expect(fs.readFileSync(log, "utf8")).toBe("ran\nran\n")
      expect(result).toMatchObject({ status: "error", retried: true, kernelExit: { code: null, signal: "SIGKILL" } })
      expect(result.error?.ename).toBe("KernelDied")
      expect(result.error?.evalue).toContain("signal SIGKILL")
      expect(result.notice).toContain("twice")
      expect(result.text).toContain("KernelDied")
      expect((await run(language, "2 + 2", `${language}-always`)).text).toBe("4")
    })
  }
})
