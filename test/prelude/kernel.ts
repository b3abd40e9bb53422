/**
 * Shared set-up for the prelude suites: a real kernel started with runner/python/prelude.py,
 * a temporary artifacts directory, and AgentBridge test layers.
 */
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as path from "node:path"
import { Duration, Effect, Layer } from "effect"
import { KernelTimings } from "../../src/kernel/KernelTimings.ts"
import type { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { NodeKernelSpawnerLive } from "../../src/layers/NodeKernelSpawner.ts"
import { AgentBridge, type AgentBridgeError, type BridgeCall } from "../../src/kernel/AgentBridge.ts"
import { kvDirOf, makeKvStore, withKvWrites } from "../../src/services/storage/KvStore.ts"
import { findPython } from "../support/python.ts"

export const python = findPython()
export const runnerPath = path.resolve(import.meta.dirname, "../../runner/python/runner.py")
export const preludePath = path.resolve(import.meta.dirname, "../../runner/python/prelude.py")
export const preludeSource = NodeFs.readFileSync(preludePath, "utf8")

/** The spawner and short escalation delays; add an AgentBridge layer. */
export const baseLayer = Layer.mergeAll(
  NodeKernelSpawnerLive,
  Layer.succeed(KernelTimings, {
    interruptEscalation: Duration.seconds(3),
    shutdownGrace: Duration.millis(500),
    startTimeout: Duration.seconds(30)
  })
)

/** An AgentBridge that answers every call with `answer`. */
export const bridgeLayer = (answer: (call: BridgeCall) => Effect.Effect<unknown, AgentBridgeError>) =>
  Layer.succeed(AgentBridge, { call: answer })

/** A fresh directory, removed when the scope closes. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), prefix))),
    (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
  )

/** A kernel with the prelude loaded and VEYYON_ARTIFACTS_DIR set; shut down with its scope. */
export const startKernel = (artifactsDir: string) =>
  AgentBridge.use((bridge) =>
    Kernel.make({
      command: python!,
      args: ["-u", runnerPath],
      cwd: process.cwd(),
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        PYTHONUNBUFFERED: "1",
        PYTHONIOENCODING: "utf-8",
        VEYYON_ARTIFACTS_DIR: artifactsDir
      },
      prelude: preludeSource
    }).pipe(Effect.provideService(AgentBridge, withKvWrites(bridge, makeKvStore(), kvDirOf(artifactsDir)))))

/** Runs one cell and collects its outputs. */
export const run = (kernel: Kernel.Kernel, code: string, timeoutSeconds?: number) =>
  Kernel.executeCollect(kernel, { code, ...(timeoutSeconds === undefined ? {} : { timeoutSeconds }) })

export const stdoutOf = (outputs: ReadonlyArray<KernelOutput>): string =>
  outputs.flatMap((o) => (o._tag === "Stdout" ? [o.text] : [])).join("")

export const resultOf = (outputs: ReadonlyArray<KernelOutput>): string | undefined => {
  const result = outputs.find((o) => o._tag === "Result")
  return result?._tag === "Result" ? (result.bundle["text/plain"] as string | undefined) : undefined
}

export const errorOf = (outputs: ReadonlyArray<KernelOutput>) => {
  const error = outputs.find((o) => o._tag === "Error")
  return error?._tag === "Error" ? { ename: error.ename, evalue: error.evalue } : undefined
}

export const doneOf = (outputs: ReadonlyArray<KernelOutput>) => {
  const done = outputs[outputs.length - 1]
  if (done?._tag !== "Done") throw new Error("the last output is not Done")
  return done
}

export const statusesOf = (outputs: ReadonlyArray<KernelOutput>, op: string) =>
  outputs.flatMap((o) => (o._tag === "Status" && o.op === op ? [o.fields] : []))
