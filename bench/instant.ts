/**
 * The tool and the registry over an in-process instant runner: a `KernelSpawner` whose
 * process answers every execute request with `started` and `done` from a `setImmediate`,
 * so a cell's cost is the host's alone (no Python). Built from the package in `dist/`.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Deferred, Effect, Layer, Stream } from "effect"
import * as path from "node:path"
import { KernelSpawner, type KernelProcess, type ProcessExit } from "../dist/kernel/KernelProcess.js"
import { AgentBridgeNotConfigured } from "../dist/kernel/AgentBridge.js"
import { ArtifactStore } from "../dist/services/output/ArtifactStore.js"
import { EvalTool } from "../dist/services/tool/EvalTool.js"
import { KernelRegistry } from "../dist/services/registry/KernelRegistry.js"
import { OutputSink } from "../dist/services/output/OutputSink.js"
import { PythonRuntime } from "../dist/backends/python/PythonRuntime.js"
import { RunnerCache } from "../dist/services/storage/RunnerCache.js"
import { Sandbox } from "../dist/services/isolation/Sandbox.js"
import { SessionRecord } from "../dist/services/output/SessionRecord.js"
import { Settings } from "../dist/services/config/Settings.js"

let nextPid = 900_000

/** A process that answers every execute request with `started` and `done` on the next turn of the event loop. */
const instantProcess = Effect.map(Deferred.make<ProcessExit>(), (exited): KernelProcess => {
  let listener: { readonly onBytes: (bytes: Uint8Array) => void; readonly onEnd: () => void } | undefined
  let count = 0
  const end = (exit: ProcessExit) =>
    setImmediate(() => {
      listener?.onEnd()
      Deferred.doneUnsafe(exited, Effect.succeed(exit))
    })
  return {
    pid: nextPid++,
    listenFrames: (given) => {
      listener = given
      return { pause: () => {}, resume: () => {} }
    },
    stdout: Stream.never,
    stderr: Stream.never,
    write: (text) =>
      Effect.sync(() => {
        let answer = ""
        for (const line of (typeof text === "string" ? text : Buffer.from(text).toString("utf8")).split("\n")) {
          if (line.length === 0) continue
          const request = JSON.parse(line)
          if (request.type === "exit") end({ code: 0, signal: null })
          if (typeof request.code !== "string") continue
          if (request.storeHistory === true) count++
          answer += `{"type":"started","id":"${request.id}"}\n{"type":"done","id":"${request.id}","status":"ok","executionCount":${count}}\n`
        }
        if (answer.length > 0) {
          const bytes = Buffer.from(answer)
          setImmediate(() => listener?.onBytes(bytes))
        }
      }),
    signal: (signal) => Effect.sync(() => (signal === "SIGINT" ? undefined : void end({ code: null, signal }))),
    exited: Deferred.await(exited),
    exitNow: Effect.map(Deferred.poll(exited), () => undefined)
  }
})

/** The tool's and registry's layers over the instant runner, artifacts under `dir`. */
export const instantLayer = (dir: string) => {
  const platform = Layer.mergeAll(
    PythonRuntime.Live,
    RunnerCache.Live,
    ArtifactStore.Live,
    SessionRecord.layer,
    Layer.succeed(KernelSpawner, { spawn: () => instantProcess }),
    Sandbox.Live,
    AgentBridgeNotConfigured
  ).pipe(Layer.provideMerge(Layer.merge(Layer.orDie(Settings.layer({ artifactsDir: path.join(dir, "artifacts") })), NodeServices.layer)))
  return EvalTool.layer.pipe(Layer.provideMerge(OutputSink.Live), Layer.provideMerge(KernelRegistry.layer.pipe(Layer.provideMerge(platform))))
}

