/**
 * A kernel spawn interrupted at each of its steps (the cgroup, the spawn, the attach to the
 * cgroup, the kernel's readiness) leaves nothing: no process of the kernel's tree (its own
 * pid, its process group, a member that left the group with setsid), no cgroup, no file in
 * the kernel's scratch directory. The kernel is a shell that starts two sleepers (one in
 * its group, one setsid'd), waits for its first request and never answers it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer } from "effect"
import { AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { KernelSpawner, type SpawnSpec } from "../../src/kernel/KernelProcess.ts"
import { KernelTimings } from "../../src/kernel/KernelTimings.ts"
import { makeNodeKernelSpawner, type SpawnStep } from "../../src/layers/NodeKernelSpawner.ts"
import { containment } from "../../src/process/Containment.ts"
import { eventually, isLive, liveInGroup, liveWithMark, procStat, uniqueSleep } from "../support/process.ts"
import { titled } from "../support/skip.ts"
import { tempDir } from "../support/tempDirs.ts"

const mechanism = await Effect.runPromise(containment)
const noCgroup = mechanism.mechanism === "none" ? "this machine gives no writable cgroup (run as root or with a delegated cgroup)" : undefined

/** The kernel groups (`k<n>`) that exist now. */
const groups = (): Set<string> =>
  new Set(mechanism.hostDirs.flatMap((dir) => fs.readdirSync(dir).filter((name) => /^k\d+$/.test(name)).map((name) => path.join(dir, name))))

interface Kernelish {
  readonly mark: string
  readonly scratch: string
  readonly asked: string
  readonly spec: SpawnSpec
}

const kernelish = (): Kernelish => {
  const mark = uniqueSleep()
  const scratch = tempDir("veyyon-spawn-steps-")
  const asked = path.join(path.dirname(scratch), `${path.basename(scratch)}.asked`)
  const script = `setsid sleep ${mark} & sleep ${mark} & read -r line; : > "$ASKED"; exec sleep ${mark}`
  return {
    mark,
    scratch,
    asked,
    spec: { command: "/bin/sh", args: ["-c", script], cwd: scratch, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", TMPDIR: scratch, ASKED: asked } }
  }
}

const timings = Layer.succeed(KernelTimings, {
  interruptEscalation: Duration.millis(500),
  shutdownGrace: Duration.millis(200),
  startTimeout: Duration.seconds(120)
})

/** A kernel on the real spawner, started up (never, for this runner). */
const startKernel = (kernel: Kernelish) =>
  Kernel.make(kernel.spec).pipe(
    Effect.provide(Layer.mergeAll(Layer.succeed(KernelSpawner, makeNodeKernelSpawner()), AgentBridgeNotConfigured, timings))
  )

/** What the kernel's tree is while the spawn is held: its processes and their process groups. */
const treeOf = (mark: string) => {
  const pids = liveWithMark(mark)
  return { pids, pgrps: [...new Set(pids.flatMap((pid) => procStat(pid)?.pgrp ?? []))] }
}

/** Nothing of the kernel is left: no process with its mark, none in a group it had, no new cgroup, no file in its scratch dir. */
const expectNothingLeft = (kernel: Kernelish, held: { readonly pids: ReadonlyArray<number>; readonly pgrps: ReadonlyArray<number> }, before: Set<string>) => {
  expect(liveWithMark(kernel.mark)).toEqual([])
  expect(held.pids.filter(isLive)).toEqual([])
  expect(held.pgrps.flatMap(liveInGroup)).toEqual([])
  expect([...groups()].filter((group) => !before.has(group))).toEqual([])
  expect(fs.readdirSync(kernel.scratch)).toEqual([])
}

const SPAWNER_STEPS: ReadonlyArray<SpawnStep> = ["cgroup", "spawn", "attach"]

describe.skipIf(noCgroup !== undefined)(titled("a kernel spawn interrupted at each step leaves nothing", noCgroup), () => {
  for (const step of SPAWNER_STEPS) {
    it.live(`interrupted after the ${step} step`, () =>
      Effect.gen(function*() {
        const kernel = kernelish()
        const before = groups()
        const reached = yield* Deferred.make<void>()
        const spawner = makeNodeKernelSpawner({
          afterStep: (at) => (at === step ? Effect.andThen(Deferred.succeed(reached, undefined), Effect.never) : Effect.void)
        })
        const fiber = yield* Effect.forkChild(Effect.scoped(spawner.spawn(kernel.spec)))
        yield* Deferred.await(reached)
        const made = [...groups()].filter((group) => !before.has(group))
        expect(made).toHaveLength(mechanism.hostDirs.length)
        if (step !== "cgroup") {
          // the spawn is held, the child runs on: wait for its whole tree, the setsid'd sleeper included
          yield* eventually(() => liveWithMark(kernel.mark).length === 3 && treeOf(kernel.mark).pgrps.length === 2, "the kernel's shell and its two sleepers, one in a session of its own")
        }
        const held = treeOf(kernel.mark)
        yield* Fiber.interrupt(fiber)
        expectNothingLeft(kernel, held, before)
      }), 60_000)
  }

  it.live("interrupted while the kernel waits for its runner to be ready", () =>
    Effect.gen(function*() {
      const kernel = kernelish()
      const before = groups()
      const fiber = yield* Effect.forkChild(Effect.scoped(startKernel(kernel)))
      yield* eventually(
        () => fs.existsSync(kernel.asked) && liveWithMark(kernel.mark).length === 3 && treeOf(kernel.mark).pgrps.length === 2,
        "the runner to be asked to start"
      )
      fs.rmSync(kernel.asked)
      const held = treeOf(kernel.mark)
      yield* Fiber.interrupt(fiber)
      expectNothingLeft(kernel, held, before)
    }), 60_000)

  it.live("interrupted at any moment, from before the cgroup to readiness", () =>
    Effect.gen(function*() {
      for (const delay of [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89]) {
        const kernel = kernelish()
        const before = groups()
        const fiber = yield* Effect.forkChild(Effect.scoped(startKernel(kernel)))
        yield* Effect.sleep(Duration.millis(delay))
        const held = treeOf(kernel.mark)
        yield* Fiber.interrupt(fiber)
        if (fs.existsSync(kernel.asked)) fs.rmSync(kernel.asked)
        expectNothingLeft(kernel, held, before)
      }
    }), 120_000)
})
