import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { isRunning, waitUntil } from "../support/process.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { tempDir } from "../support/tempDirs.ts"

const root = path.resolve(import.meta.dirname, "../..")
describe.skipIf(!integrationEnabled() || findPython() === undefined)("host signals", () => {
  const state = tempDir("veyyon-host-signals-")
  afterAll(() => fs.rmSync(state, { recursive: true, force: true }))
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`a host receiving ${signal} under NodeRuntime.runMain leaves no Python process behind`, async () => {
      const host = spawn(process.execPath, ["--import", "tsx", "test/fixtures/hold-kernel.ts"], {
        cwd: root,
        env: { ...process.env, VEYYON_PYTHON_INTERPRETER: findPython()!, XDG_STATE_HOME: state },
        stdio: ["ignore", "pipe", "inherit"]
      })
      const pids: Array<number> = []
      try {
        const line = await new Promise<string>((resolve, reject) => {
          let out = ""
          host.stdout!.on("data", (chunk: Buffer) => {
            out += chunk.toString()
            const match = /pids (\d+) (\d+)/.exec(out)
            if (match) resolve(match[0])
          })
          host.on("exit", () => reject(new Error(`host exited early: ${out}`)))
        })
        pids.push(...line.split(" ").slice(1).map(Number))
        expect(pids.every(isRunning)).toBe(true)
        host.kill(signal)
        expect(await waitUntil(() => host.exitCode !== null || host.signalCode !== null, 20_000)).toBe(true)
        expect(await waitUntil(() => !pids.some(isRunning), 5_000)).toBe(true)
      } finally {
        host.kill("SIGKILL")
        for (const pid of pids) if (isRunning(pid)) process.kill(pid, "SIGKILL")
      }
    }, 60_000)
  }
})
