/**
 * The host's own work per warm cell, with no Python: the registry and the tool over an
 * in-process instant runner (a `KernelSpawner` whose process answers `started` and `done`
 * from a `setImmediate`). Prints this process's CPU per cell for each path, rounds
 * alternated; with `HOSTPARTS_OPS=registry|tool`, instead counts the Effect operations one
 * cell evaluates (a tracer whose `context` sees every primitive the fibers run) and lists
 * the commonest by the function they run. Measures the built package: `npm run build` first.
 * `node --import tsx bench/hostparts.ts [rounds] [cells]`
 */
import { Effect, ManagedRuntime, Tracer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { EvalTool } from "../dist/services/tool/EvalTool.js"
import { KernelRegistry } from "../dist/services/registry/KernelRegistry.js"
import { instantLayer } from "./instant.ts"
import { median } from "./stats.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-hostparts-"))
const runtime = ManagedRuntime.make(instantLayer(dir))

const EVALUATE = "~effect/Effect/evaluate"
const IDENTIFIER = "~effect/Effect/identifier"
const ARGS = "~effect/Effect/args"
const SUCCESS_CONT = "~effect/Effect/successCont"

/** Counts the operations the fibers it runs under evaluate, by operation and the function it runs. */
class OperationCounter {
  total = 0
  readonly byKind = new Map<string, number>()
  /** `effect` run under a tracer that counts every primitive, then evaluates it as `inner` would. */
  counting<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.flatMap(Tracer.Tracer, (inner) =>
      Effect.withTracer(effect, Tracer.make({
        span: (options) => inner.span(options),
        context: (primitive, fiber) => {
          this.total++
          const op = primitive as unknown as Record<string, unknown>
          const fn = [op.payload, op[ARGS], op[SUCCESS_CONT]].find((slot) => typeof slot === "function")
          const kind = `${String(op[IDENTIFIER])} ${typeof fn === "function" ? fn.toString().replace(/\s+/g, " ").slice(0, 100) : ""}`
          this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + 1)
          return inner.context !== undefined ? inner.context(primitive, fiber) : primitive[EVALUATE](fiber)
        }
      })))
  }
}

try {
  const tool = await runtime.runPromise(EvalTool)
  const registry = await runtime.runPromise(KernelRegistry)
  const paths: Record<string, Effect.Effect<unknown, unknown>> = {
    registry: registry.run({ language: "py", sessionId: "registry", cwd: dir, code: "x = 1 + 1", timeoutSeconds: 30 }, () => Effect.void),
    tool: tool.run({ language: "py", code: "x = 1 + 1" }, { sessionId: "tool", cwd: dir })
  }
  const repeat = (cell: Effect.Effect<unknown, unknown>, cells: number) => cell.pipe(Effect.repeat({ times: cells - 1 }))
  for (const cell of Object.values(paths)) await runtime.runPromise(repeat(cell, 3000))
  const counted = process.env.HOSTPARTS_OPS
  if (counted !== undefined) {
    const cell = paths[counted]
    if (cell === undefined) throw new Error(`HOSTPARTS_OPS must be one of ${Object.keys(paths).join(", ")}`)
    const counter = new OperationCounter()
    const cells = 1000
    await runtime.runPromise(
      counter.counting(repeat(cell, cells))
    )
    console.log(`${counted}: ${(counter.total / cells).toFixed(1)} Effect operations per cell`)
    for (const [kind, count] of [...counter.byKind].sort((a, b) => b[1] - a[1]).slice(0, 40)) {
      console.log(`${(count / cells).toFixed(2).padStart(7)}  ${kind}`)
    }
  } else {
    const rounds = Number(process.argv[2] ?? 5)
    const cells = Number(process.argv[3] ?? 10_000)
    const perCell: Record<string, Array<number>> = {}
    for (let round = 0; round < rounds; round++) {
      for (const [name, cell] of Object.entries(paths)) {
        const start = process.cpuUsage()
        await runtime.runPromise(repeat(cell, cells))
        const used = process.cpuUsage(start)
        ;(perCell[name] ??= []).push((used.user + used.system) / cells)
      }
    }
    for (const [name, samples] of Object.entries(perCell)) {
      console.log(`${name.padEnd(9)} host CPU per cell: median ${median(samples).toFixed(1)} us (rounds: ${samples.map((s) => s.toFixed(1)).join(", ")})`)
    }
  }
} finally {
  await runtime.dispose()
  fs.rmSync(dir, { recursive: true, force: true })
}
