/**
 * Shared set-up for the JavaScript kernel suites: the real runner/js/runner.mjs under the
 * kernel actor, a temporary artifacts directory, and output helpers.
 */
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { Duration, Effect, Layer } from "effect"
import { KernelTimings } from "../../src/kernel/KernelTimings.ts"
import type { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import * as Kernel from "../../src/kernel/Kernel.ts"
import { NodeKernelSpawnerLive } from "../../src/layers/NodeKernelSpawner.ts"
import { kvDirOf, makeKvStore, withKvWrites } from "../../src/services/storage/KvStore.ts"
import { AgentBridge, AgentBridgeNotConfigured, type AgentBridgeError, type BridgeCall } from "../../src/kernel/AgentBridge.ts"

export const jsRunnerPath = path.resolve(import.meta.dirname, "../../runner/js/runner.mjs")
export const jsPreludePath = path.resolve(import.meta.dirname, "../../runner/js/prelude.mjs")

/** The runner's exports (importing it does not start a server). */
export const loadRunner = (): Promise<Record<string, any>> => import(pathToFileURL(jsRunnerPath).href)

/** The prelude's exports. */
export const loadPrelude = (): Promise<Record<string, any>> => import(pathToFileURL(jsPreludePath).href)

/** The spawner and short escalation delays, with the default bridge unless one is given. */
export const jsLayer = (bridge: Layer.Layer<AgentBridge> = AgentBridgeNotConfigured) =>
  Layer.mergeAll(
    NodeKernelSpawnerLive,
    bridge,
    Layer.succeed(KernelTimings, {
      interruptEscalation: Duration.millis(1500),
      shutdownGrace: Duration.millis(500),
      startTimeout: Duration.seconds(20)
    })
  )

/** An AgentBridge that answers every call with `answer`. */
export const bridgeLayer = (answer: (call: BridgeCall) => Effect.Effect<unknown, AgentBridgeError>) =>
  Layer.succeed(AgentBridge, { call: answer })

/** A fresh directory, removed when the scope closes. */
export const tempDir = (prefix: string) =>
  Effect.acquireRelease(
    Effect.sync(() => NodeFs.realpathSync(NodeFs.mkdtempSync(path.join(NodeOs.tmpdir(), prefix)))),
    (dir) => Effect.sync(() => NodeFs.rmSync(dir, { recursive: true, force: true }))
  )

/** A JavaScript kernel in `cwd` with VEYYON_ARTIFACTS_DIR set; shut down with its scope. */
export const startJsKernel = (options: { readonly cwd?: string; readonly artifactsDir?: string } = {}) =>
  AgentBridge.use((bridge) =>
    Kernel.make({
      command: process.execPath,
      args: [jsRunnerPath],
      channel: "fd3",
      cwd: options.cwd ?? process.cwd(),
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        ...(options.artifactsDir === undefined ? {} : { VEYYON_ARTIFACTS_DIR: options.artifactsDir })
      }
    }).pipe(Effect.provideService(AgentBridge, withKvWrites(bridge, makeKvStore(), kvDirOf(options.artifactsDir ?? "/nonexistent")))))

/** Runs one cell and collects its outputs. */
export const run = (kernel: Kernel.Kernel, code: string, extra: Partial<Kernel.ExecuteRequest> = {}) =>
  Kernel.executeCollect(kernel, { code, ...extra })

export const stdoutOf = (outputs: ReadonlyArray<KernelOutput>): string =>
  outputs.flatMap((o) => (o._tag === "Stdout" ? [o.text] : [])).join("")

export const stderrOf = (outputs: ReadonlyArray<KernelOutput>): string =>
  outputs.flatMap((o) => (o._tag === "Stderr" ? [o.text] : [])).join("")

export const resultOf = (outputs: ReadonlyArray<KernelOutput>): string | undefined => {
  const result = outputs.find((o) => o._tag === "Result")
  return result?._tag === "Result" ? (result.bundle["text/plain"] as string | undefined) : undefined
}

export const errorOf = (outputs: ReadonlyArray<KernelOutput>) => {
  const error = outputs.find((o) => o._tag === "Error")
  return error?._tag === "Error" ? { ename: error.ename, evalue: error.evalue, traceback: error.traceback } : undefined
}

export const displaysOf = (outputs: ReadonlyArray<KernelOutput>) =>
  outputs.flatMap((o) => (o._tag === "Display" ? [o.bundle] : []))

export const statusesOf = (outputs: ReadonlyArray<KernelOutput>, op: string) =>
  outputs.flatMap((o) => (o._tag === "Status" && o.op === op ? [o.fields] : []))

export const doneOf = (outputs: ReadonlyArray<KernelOutput>) => {
  const done = outputs[outputs.length - 1]
  if (done?._tag !== "Done") throw new Error("the last output is not Done")
  return done
}
