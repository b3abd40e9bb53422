/**
 * The output sink alone: 100 MiB of 1 KiB lines in 64 KiB frames (the runner's coalesced
 * frame size) through `makeCellSink` with a real artifact store, seven runs; wall time
 * and this process's CPU time (user + system, so the artifact writes count too).
 * `node --import tsx bench/sink.ts`
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KernelOutput } from "../dist/kernel/KernelOutput.js"
import { makeArtifactStore } from "../dist/services/output/ArtifactStore.js"
import { makeCellSink } from "../dist/services/output/OutputSink.js"

const chunk = ("x".repeat(1023) + "\n").repeat(64)
const frames = 1600
const once = Effect.gen(function*() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sinkbench-"))
  const store = yield* makeArtifactStore(dir).pipe(Effect.provide(NodeFileSystem.layer))
  const start = performance.now()
  const cpu = process.cpuUsage()
  yield* Effect.scoped(Effect.gen(function*() {
    const sink = yield* makeCellSink(store)
    for (let i = 0; i < frames; i++) yield* sink.push(KernelOutput.Stdout({ text: chunk }))
    yield* sink.finish
  }))
  const ms = performance.now() - start
  const used = process.cpuUsage(cpu)
  fs.rmSync(dir, { recursive: true })
  return { ms, cpuMs: (used.user + used.system) / 1000 }
})
const runs: Array<{ ms: number; cpuMs: number }> = []
for (let r = 0; r < 7; r++) runs.push(await Effect.runPromise(once))
const ms = runs.map((r) => r.ms).sort((a, b) => a - b)
const cpu = runs.map((r) => r.cpuMs).sort((a, b) => a - b)
console.log(
  `100 MiB in 64 KiB frames through the sink: median ${ms[3]!.toFixed(0)} ms (${(100 * 1.048576 / (ms[3]! / 1000)).toFixed(0)} MB/s), ` +
    `min ${ms[0]!.toFixed(0)}; host CPU median ${cpu[3]!.toFixed(0)} ms (${cpu[0]!.toFixed(0)}-${cpu[6]!.toFixed(0)})`
)
