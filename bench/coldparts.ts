/**
 * `node --import tsx bench/coldparts.ts [runs]`: where a new session's first cell goes,
 * side by side in one run, each sample alternated with the others so all see the same
 * load: `python -c pass` and `python -S -c pass` (no `site`); the runner alone, spawned by
 * plain Node with the kernel's environment, the prelude, init and `1 + 1` written at once
 * and read until `done` (also with `-S`); and `EvalTool.run` in a new session, with and
 * without a spare kernel ready. Prints each median and its distance from `python -c pass`.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Duration, Effect, Schedule } from "effect"
import { KernelRegistry } from "../dist/services/registry/KernelRegistry.js"
import { PythonRuntime } from "../dist/backends/python/PythonRuntime.js"
import { RunnerCache, cachedPath } from "../dist/services/storage/RunnerCache.js"
import { benchInterpreter } from "./python.ts"
import { pythonPass } from "./spawn.ts"
import { median } from "./stats.ts"
import { kernelLayer, makeVeyyon, resetSession, runCell } from "./veyyon.ts"

/** Milliseconds from spawn to the `done` of `1 + 1` for the runner driven by plain Node. */
const runnerAlone = (python: string, args: ReadonlyArray<string>, boot: string, prelude: string, cwd: string, env: Record<string, string>): Promise<number> =>
  new Promise((resolve, reject) => {
    const start = performance.now()
    const child = spawn(python, [...args, "-u", boot], { cwd, detached: true, stdio: ["pipe", "pipe", "pipe"], env })
    const line = (id: string, code: string, extra: object) => JSON.stringify({ id, code, silent: id !== "c", storeHistory: id === "c", ...extra }) + "\n"
    child.stdin.write(line("p", prelude, {}) + line("i", "", { cwd, env: { PWD: cwd } }) + line("c", "1 + 1", {}))
    let buffered = ""
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      if (/"id":\s*"c"[^\n]*"type":\s*"done"|"type":\s*"done"[^\n]*"id":\s*"c"/.test(buffered)) {
        const elapsed = performance.now() - start
        child.stdin.end()
        child.once("exit", () => resolve(elapsed))
      }
    })
    child.once("error", reject)
  })

const main = async () => {
  const runs = Number(process.argv[2] ?? 15)
  const python = benchInterpreter()?.executable
  if (python === undefined) throw new Error("no Python interpreter for the bench")
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-coldparts-"))
  const work = path.join(scratch, "work")
  fs.mkdirSync(work)
  const plain = makeVeyyon(python, path.join(scratch, "artifacts"))
  const pooled = makeVeyyon(python, path.join(scratch, "artifacts"), { kernel: { spares: 1 } })
  try {
    const below = kernelLayer(python, path.join(scratch, "artifacts"))
    const files = await Effect.runPromise(Effect.orDie(RunnerCache.use((cache) => cache.ensure("python"))).pipe(Effect.provide(below)))
    const boot = cachedPath(files, "boot.py")
    const prelude = files.sources.get("prelude.py") ?? ""
    const env = await Effect.runPromise(PythonRuntime.useSync((runtime) => runtime.kernelEnv({}, {})).pipe(Effect.provide(below)))
    const cell = (runtime: typeof plain, sessionId: string) =>
      runtime.runPromise(Effect.gen(function*() {
        const start = performance.now()
        const result = yield* runCell({ code: "1 + 1" }, { sessionId, cwd: work })
        const elapsed = performance.now() - start
        if (result.text !== "2") return yield* Effect.die(new Error(`answered ${JSON.stringify(result.text)}`))
        yield* resetSession(sessionId)
        return elapsed
      }))
    const spareReady = () =>
      pooled.runPromise(KernelRegistry.use((registry) =>
        registry.sparePids.pipe(Effect.repeat({ until: (pids) => pids.length > 0, schedule: Schedule.spaced(Duration.millis(5)) }))))
    await cell(plain, "warm")
    await cell(pooled, "warm")
    const samples: Record<string, Array<number>> = { "python -c pass": [], "python -S -c pass": [], "runner alone": [], "runner alone, -S": [], "EvalTool.run, new session": [], "EvalTool.run, spare ready": [] }
    for (let i = 0; i < runs; i++) {
      samples["python -c pass"]!.push(await pythonPass(python))
      samples["python -S -c pass"]!.push(await new Promise<number>((resolve) => {
        const start = performance.now()
        spawn(python, ["-S", "-c", "pass"], { detached: true, stdio: ["pipe", "pipe", "pipe"], env }).once("exit", () => resolve(performance.now() - start))
      }))
      samples["runner alone"]!.push(await runnerAlone(python, [], boot, prelude, work, env))
      samples["runner alone, -S"]!.push(await runnerAlone(python, ["-S"], boot, prelude, work, env))
      samples["EvalTool.run, new session"]!.push(await cell(plain, `cold-${i}`))
      await spareReady()
      await new Promise((resolve) => setTimeout(resolve, 300))
      samples["EvalTool.run, spare ready"]!.push(await cell(pooled, `spare-${i}`))
    }
    const pass = median(samples["python -c pass"]!)
    console.log(`load ${os.loadavg().map((n) => n.toFixed(1)).join(" ")}, ${runs} runs each, alternated`)
    for (const [name, values] of Object.entries(samples)) {
      const m = median(values)
      console.log(`${name.padEnd(28)} median ${m.toFixed(1).padStart(6)} ms   vs python -c pass ${(m - pass >= 0 ? "+" : "") + (m - pass).toFixed(1)} ms`)
    }
  } finally {
    await plain.dispose()
    await pooled.dispose()
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

await main()
