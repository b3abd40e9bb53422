/**
 * `node --import tsx bench/richparts.ts [rounds] [count] [floor,runner,kernel,tool]`: figure 4's
 * cell (`count` displays of a 1 MiB PNG, 100 by default) through each layer, alternated in
 * one process so the ratios share the machine's load: the floor (`floor.py`'s
 * `display_png`), the runner alone (Node counting its bytes, no decoding), the bare kernel,
 * and the tool. The runner, kernel and tool run the figure's `display(Png())` through
 * `_repr_png_`. Prints MB/s of PNG bytes and this process's CPU per cell for each round, and
 * the medians. With `RICHPARTS_PROFILE=file.cpuprofile` it profiles the cells alone (not the
 * start-up).
 */
import { spawn } from "node:child_process"
import { Effect } from "effect"
import { PNG_SETUP } from "./figures/rich.ts"
import { startFloor } from "./floor.ts"
import { cpuMsSince, medianLines, profileCells, roundLine, scratchWorkspace } from "./layerRounds.ts"
import { benchInterpreter } from "./python.ts"
import { makeVeyyon, rawKernel, runCell, runnerBoot } from "./veyyon.ts"

const SETUP = `${PNG_SETUP}\nclass Png:\n    def _repr_png_(self):\n        return PNG`

/** The runner spawned by plain Node: init, the setup cell, then `code` timed from its request to its `done`. */
const runnerAlone = (python: string, boot: string, cwd: string, code: string): Promise<{ displays: number; ms: number }> =>
  new Promise((resolve, reject) => {
    const child = spawn(python, ["-u", boot], { cwd, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env } })
    let displays = 0
    let start = 0
    let phase = 0
    let tail = ""
    const send = (id: string, text: string) =>
      child.stdin!.write(JSON.stringify({ id, code: text, silent: false, storeHistory: true }) + "\n")
    child.stderr!.resume()
    child.once("error", reject)
    child.stdout!.on("data", (chunk: Buffer) => {
      const text = tail + chunk.toString("latin1", Math.max(0, chunk.length - 200))
      tail = text.slice(-200)
      if (phase === 2) {
        for (let at = chunk.indexOf('{"type":"display"'); at !== -1; at = chunk.indexOf('{"type":"display"', at + 1)) displays++
      }
      if (phase === 0 && /"type":"done","id":"i"/.test(text)) {
        phase = 1
        tail = ""
        send("s", SETUP)
      } else if (phase === 1 && /"type":"done","id":"s"/.test(text)) {
        phase = 2
        tail = ""
        start = performance.now()
        send("c", code)
      } else if (phase === 2 && /"type":"done","id":"c"/.test(text)) {
        phase = 3
        const ms = performance.now() - start
        child.kill("SIGKILL")
        resolve({ displays, ms })
      }
    })
    child.stdin!.write(JSON.stringify({ id: "i", code: "", silent: true, storeHistory: false, cwd }) + "\n")
  })

const main = async () => {
  const rounds = Number(process.argv[2] ?? 5)
  const count = Number(process.argv[3] ?? 100)
  const only = process.argv[4]?.split(",")
  const want = (layer: string) => only === undefined || only.includes(layer)
  const python = benchInterpreter()!
  const { workDir, artifactsDir, cleanUp } = scratchWorkspace("veyyon-richparts-")
  const veyyon = makeVeyyon(python.executable, artifactsDir)
  const code = `for _ in range(${count}):\n    display(Png())`
  const rows: Record<string, Array<number>> = { floor: [], runner: [], kernel: [], tool: [] }
  const cpu: Record<string, Array<number>> = { floor: [], kernel: [], tool: [] }
  const floor = await startFloor(python.executable)
  try {
    let pngBytes = 0
    await floor.run(PNG_SETUP)
    await floor.run("print(len(PNG))", (frame) => {
      if (frame.type === "stdout" && /\d/.test(frame.data ?? "")) pngBytes = Number(frame.data)
    })
    const rate = (ms: number) => (count * pngBytes) / 1e6 / (ms / 1000)
    const check = (layer: string, delivered: number) => {
      if (delivered !== count) throw new Error(`${layer} delivered ${delivered} of ${count} displays`)
    }
    const boot = await Effect.runPromise(runnerBoot(python.executable, artifactsDir))
    const ctx = { sessionId: "rp", cwd: workDir }
    await veyyon.runPromise(runCell({ code: SETUP }, ctx))
    const profiling = await profileCells(process.env.RICHPARTS_PROFILE)
    for (let round = 0; round < rounds; round++) {
      if (want("floor")) {
        let delivered = 0
        const floorCpu = process.cpuUsage()
        const start = performance.now()
        await floor.run(`for _ in range(${count}):\n    display_png(PNG)`, (frame) => {
          if (frame.type === "display") delivered++
        })
        rows.floor!.push(rate(performance.now() - start))
        cpu.floor!.push(cpuMsSince(floorCpu))
        check("floor", delivered)
      }
      if (want("runner")) {
        const alone = await runnerAlone(python.executable, boot, workDir, code)
        check("runner", alone.displays)
        rows.runner!.push(rate(alone.ms))
      }
      if (want("kernel")) {
        const kernelCpu = process.cpuUsage()
        const kernel = await veyyon.runPromise(Effect.scoped(Effect.gen(function*() {
          const k = yield* rawKernel(python.executable, artifactsDir, workDir, "rp-raw")
          yield* k.run({ code: SETUP }, () => Effect.void)
          let delivered = 0
          const start = performance.now()
          yield* k.run({ code }, (o) => Effect.sync(() => { if (o._tag === "Display") delivered++ }))
          return { delivered, ms: performance.now() - start }
        })))
        cpu.kernel!.push(cpuMsSince(kernelCpu))
        check("kernel", kernel.delivered)
        rows.kernel!.push(rate(kernel.ms))
      }
      if (want("tool")) {
        let delivered = 0
        const toolCpu = process.cpuUsage()
        const start = performance.now()
        await veyyon.runPromise(runCell({ code, timeout: 600 }, {
          ...ctx,
          onEvent: (o) => {
            if (o._tag === "Display" && typeof o.bundle["image/png"] === "string") delivered++
          }
        }))
        rows.tool!.push(rate(performance.now() - start))
        // Work the tool leaves for after its result (the session record's line) counts as its CPU, not the next layer's.
        await new Promise((resolve) => setImmediate(resolve))
        cpu.tool!.push(cpuMsSince(toolCpu))
        check("tool", delivered)
      }
      console.log(roundLine(round, rows, cpu))
    }
    await profiling.stop()
    for (const line of medianLines(rows, cpu, "floor", "the floor")) console.log(line)
  } finally {
    await floor.close()
    await veyyon.dispose().catch(() => undefined)
    cleanUp()
  }
}
main()
