/**
 * What the pieces of the tool's per-cell path cost in isolation, in microseconds per cell,
 * beside `Effect.void` run the same way: the registry's lease (`Effect.scoped(RcMap.get)`),
 * a semaphore permit (the session lock), the output sink as a scoped sink (before) and as
 * the plain sink the tool uses, and recording a cell. Each is the median of five runs of
 * 20000. `node --import tsx bench/parts.ts`
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Context, Duration, Effect, Exit, Layer, RcMap, Scope, Semaphore } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KernelOutput } from "../dist/kernel/KernelOutput.js"
import { makeArtifactStore } from "../dist/services/output/ArtifactStore.js"
import { cellSink, makeCellSink } from "../dist/services/output/OutputSink.js"
import { SessionRecord } from "../dist/services/output/SessionRecord.js"
import { Settings } from "../dist/services/config/Settings.js"

const CELLS = 20_000

const perCell = async (once: Effect.Effect<unknown>): Promise<number> => {
  await Effect.runPromise(once.pipe(Effect.repeat({ times: 2_000 })))
  const runs: Array<number> = []
  for (let run = 0; run < 5; run++) {
    const start = performance.now()
    await Effect.runPromise(once.pipe(Effect.repeat({ times: CELLS - 1 })))
    runs.push(((performance.now() - start) * 1000) / CELLS)
  }
  return runs.sort((a, b) => a - b)[2]!
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-parts-"))
const scope = Effect.runSync(Scope.make())
try {
  const leases = Effect.runSync(Scope.provide(RcMap.make({ lookup: (key: string) => Effect.succeed({ key }), idleTimeToLive: Duration.minutes(1) }), scope))
  const lock = Effect.runSync(Semaphore.make(1))
  const store = await Effect.runPromise(makeArtifactStore(path.join(dir, "artifacts")).pipe(Effect.provide(NodeFileSystem.layer)))
  const records = await Effect.runPromise(
    Scope.provide(Layer.buildWithScope(SessionRecord.layer.pipe(Layer.provide(Layer.orDie(Settings.layer({ artifactsDir: dir })))), scope), scope)
      .pipe(Effect.map((context) => Context.get(context, SessionRecord)))
  )
  const done = KernelOutput.Done({ status: "ok", executionCount: 1, cancelled: false, timedOut: false, killed: false })
  const cell = { language: "py" as const, source: "x = 1 + 1", executionCount: 1, outputs: [] }
  const rows: Array<readonly [string, Effect.Effect<unknown>]> = [
    ["Effect.void", Effect.void],
    ["Effect.scoped(RcMap.get) (the registry's lease)", Effect.scoped(RcMap.get(leases, "key"))],
    ["semaphore withPermits(1) (a lock)", lock.withPermits(1)(Effect.void)],
    ["scoped sink: open, push Done, finish", Effect.scoped(Effect.flatMap(makeCellSink(store), (sink) => Effect.andThen(sink.push(done), sink.finish)))],
    ["plain sink: make, push Done, finish", Effect.suspend(() => {
      const sink = cellSink(store)
      return Effect.andThen(Effect.onError(sink.push(done), () => sink.close), sink.finish)
    })],
    ["record a cell (journal line)", Effect.orDie(records.record("parts", cell))]
  ]
  for (const [name, once] of rows) console.log(`${name.padEnd(48)} ${(await perCell(once)).toFixed(1).padStart(8)} us`)
} finally {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  fs.rmSync(dir, { recursive: true, force: true })
}
