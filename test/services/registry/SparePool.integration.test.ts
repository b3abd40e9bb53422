/**
 * Spare kernels with real Python: a new session's first cell runs in a spare that sees
 * exactly what a fresh kernel sees (cwd, `os.environ`, `/proc/self/environ`, a child
 * process's environment, sys.path), a dead spare is never
 * handed out, shutdownAll ends spares, and with spares off nothing is spawned ahead.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Duration, Effect, ManagedRuntime, Schedule } from "effect"
import { evalLayer } from "../../../src/layers/EvalLive.ts"
import { KernelRegistry } from "../../../src/services/registry/KernelRegistry.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"
import { tempDir } from "../../support/tempDirs.ts"

const python = findPython()

const OBSERVE = [
  "import os, sys, json",
  "proc = sorted(e.decode() for e in open('/proc/self/environ', 'rb').read().split(b'\\0') if e)",
  "print(json.dumps({'pid': os.getpid(), 'cwd': os.getcwd(), 'env': dict(sorted(os.environ.items())), 'path': sys.path, 'proc': proc, 'child': os.popen('printenv VEYYON_ARTIFACTS_DIR PWD').read()}))"
].join("\n")

describe.skipIf(!integrationEnabled() || python === undefined)(titled("spare kernels", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const root = fs.realpathSync(tempDir("veyyon-spares-"))
  const work = path.join(root, "work")
  fs.mkdirSync(work)
  const settings = (spares: number) => ({ artifactsDir: path.join(root, "artifacts"), python: { interpreter: python! }, kernel: { spares } })
  const pooled = ManagedRuntime.make(evalLayer({ env: false, settings: settings(1) }))
  const fresh = ManagedRuntime.make(evalLayer({ env: false, settings: settings(0) }))
  afterAll(async () => {
    await pooled.dispose()
    await fresh.dispose()
    fs.rmSync(root, { recursive: true, force: true })
  })

  const cell = (runtime: typeof pooled, sessionId: string, code: string) =>
    runtime.runPromise(Effect.gen(function*() {
      const registry = yield* KernelRegistry
      let text = ""
      const outcome = yield* registry.run({ sessionId, cwd: work, code }, (output) =>
        Effect.sync(() => {
          if (output._tag === "Stdout") text += output.text
        }))
      expect(outcome.status).toBe("ok")
      return text
    }))
  const observe = async (runtime: typeof pooled, sessionId: string) =>
    JSON.parse(await cell(runtime, sessionId, OBSERVE)) as { pid: number; cwd: string; env: Record<string, string>; path: Array<string>; proc: Array<string>; child: string }
  const sparePids = (runtime: typeof pooled) => runtime.runPromise(Effect.flatMap(KernelRegistry, (registry) => registry.sparePids))
  const untilSpare = (runtime: typeof pooled, unlike: ReadonlyArray<number> = []) =>
    runtime.runPromise(Effect.flatMap(KernelRegistry, (registry) =>
      registry.sparePids.pipe(
        Effect.repeat({ until: (pids) => pids.some((pid) => !unlike.includes(pid)), schedule: Schedule.spaced(Duration.millis(20)) }),
        Effect.timeoutOrElse({ duration: Duration.seconds(60), orElse: () => Effect.fail(new Error("no spare kernel became ready")) }),
        Effect.andThen(registry.sparePids),
        Effect.map((pids) => pids.filter((pid) => !unlike.includes(pid)))
      )))
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  }

  it("a new session's first cell runs in a spare and sees the cwd, environment and sys.path a fresh kernel sees", async () => {
    await cell(pooled, "warm", "1")
    const [spare] = await untilSpare(pooled)
    const viaSpare = await observe(pooled, "same-session")
    expect(viaSpare.pid).toBe(spare)
    const viaFresh = await observe(fresh, "same-session")
    expect(viaFresh.pid).not.toBe(spare)
    expect(viaSpare.cwd).toBe(work)
    expect(viaSpare.cwd).toBe(viaFresh.cwd)
    expect(viaSpare.path).toEqual(viaFresh.path)
    expect(viaSpare.env).toEqual(viaFresh.env)
    expect(viaSpare.proc).toEqual(viaFresh.proc)
    expect(viaSpare.child).toEqual(viaFresh.child)
    expect(viaSpare.child).toContain("same-session")
    expect(viaSpare.env.VEYYON_ARTIFACTS_DIR).toContain("same-session")
    expect(await sparePids(fresh)).toEqual([])
  }, 180_000)

  it("a spare that died is not handed out; the cell runs in a fresh kernel", async () => {
    const [spare] = await untilSpare(pooled)
    process.kill(spare!, "SIGKILL")
    const seen = await observe(pooled, "after-dead-spare")
    expect(seen.pid).not.toBe(spare)
    expect(seen.cwd).toBe(work)
    const [replacement] = await untilSpare(pooled, [spare!])
    expect(replacement).not.toBe(spare)
  }, 180_000)

  it("shutdownAll ends the spares", async () => {
    const [spare] = await untilSpare(pooled)
    await pooled.runPromise(Effect.flatMap(KernelRegistry, (registry) => registry.shutdownAll))
    expect(await sparePids(pooled)).toEqual([])
    await pooled.runPromise(
      Effect.sync(() => alive(spare!)).pipe(
        Effect.repeat({ until: (up) => !up, schedule: Schedule.spaced(Duration.millis(20)) }),
        Effect.timeoutOrElse({ duration: Duration.seconds(60), orElse: () => Effect.fail(new Error(`spare ${spare} still runs`)) })
      )
    )
  }, 180_000)

  it("closing the layer with a spare ready ends the spare and returns", async () => {
    const closing = ManagedRuntime.make(evalLayer({ env: false, settings: settings(1) }))
    let disposed = false
    try {
      await cell(closing, "closing", "1")
      const [spare] = await untilSpare(closing)
      await closing.dispose()
      disposed = true
      expect(alive(spare!)).toBe(false)
    } finally {
      if (!disposed) await closing.dispose()
    }
  }, 180_000)

  it("with spares off, no kernel is started ahead", async () => {
    await cell(fresh, "off-1", "1")
    await cell(fresh, "off-2", "1")
    expect(await sparePids(fresh)).toEqual([])
  }, 180_000)
})
