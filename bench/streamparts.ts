/**
 * `node --import tsx bench/streamparts.ts [rounds] [pipe,runner,kernel,tool]`: figure 3's
 * 100 MiB cell through each layer, alternated in one process so the ratios share the
 * machine's load: the raw pipe (Python printing into a pipe), the runner alone (Node
 * counting its frame bytes, no decoding), the bare kernel, and the tool. Prints MB/s and
 * this process's CPU per cell for each round, and the medians. With
 * `STREAMPARTS_PROFILE=file.cpuprofile` it profiles the cells alone (not the start-up).
 */
import { spawn } from "node:child_process"
import { Effect } from "effect"
import { rawPipe } from "./floor.ts"
import { cpuMsSince, medianLines, profileCells, roundLine, scratchWorkspace } from "./layerRounds.ts"
import { benchInterpreter } from "./python.ts"
import { makeVeyyon, rawKernel, runCell, runnerBoot } from "./veyyon.ts"

const LINES = 102_400
const code = `line = "x" * 1023\nfor _ in range(${LINES}):\n    print(line)`

const runnerAlone = (python: string, boot: string, cwd: string): Promise<{ bytes: number; ms: number }> =>
  new Promise((resolve, reject) => {
    const child = spawn(python, ["-u", boot], { cwd, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env } })
    let bytes = 0
    let start = 0
    let phase = 0
    let tail = ""
    child.stderr!.resume()
    child.once("error", reject)
    child.stdout!.on("data", (chunk: Buffer) => {
      bytes += chunk.length
      const text = tail + chunk.toString("latin1", Math.max(0, chunk.length - 200))
      tail = text.slice(-200)
      if (phase === 0 && text.includes('"done"')) {
        phase = 1
        bytes = 0
        tail = ""
        start = performance.now()
        child.stdin!.write(JSON.stringify({ id: "c", code, silent: false, storeHistory: true }) + "\n")
      } else if (phase === 1 && /"type":"done","id":"c"/.test(text)) {
        phase = 2
        const ms = performance.now() - start
        child.kill("SIGKILL")
        resolve({ bytes, ms })
      }
    })
    child.stdin!.write(JSON.stringify({ id: "i", code: "", silent: true, storeHistory: false, cwd }) + "\n")
  })

const main = async () => {
  const rounds = Number(process.argv[2] ?? 3)
  const only = process.argv[3]?.split(",")
  const want = (layer: string) => only === undefined || only.includes(layer)
  const python = benchInterpreter()!
  const { workDir, artifactsDir, cleanUp } = scratchWorkspace("veyyon-streamparts-")
  const veyyon = makeVeyyon(python.executable, artifactsDir)
  const rate = (r: { bytes: number; ms: number }) => r.bytes / 1e6 / (r.ms / 1000)
  const rows: Record<string, Array<number>> = { pipe: [], runner: [], kernel: [], tool: [] }
  const cpu: Record<string, Array<number>> = { kernel: [], tool: [] }
  try {
    const boot = await Effect.runPromise(runnerBoot(python.executable, artifactsDir))
    const ctx = { sessionId: "sp", cwd: workDir }
    await veyyon.runPromise(runCell({ code: "pass" }, ctx))
    const profiling = await profileCells(process.env.STREAMPARTS_PROFILE)
    for (let round = 0; round < rounds; round++) {
      if (want("pipe")) rows.pipe!.push(rate(await rawPipe(python.executable, LINES)))
      if (want("runner")) rows.runner!.push(rate(await runnerAlone(python.executable, boot, workDir)))
      if (want("kernel")) {
      const kernelCpu = process.cpuUsage()
      const kernel = await veyyon.runPromise(Effect.scoped(Effect.gen(function*() {
        const k = yield* rawKernel(python.executable, artifactsDir, workDir, "sp-raw")
        let bytes = 0
        const start = performance.now()
        yield* k.run({ code }, (o) => Effect.sync(() => { if (o._tag === "Stdout") bytes += o.text.length }))
        return { bytes, ms: performance.now() - start }
      })))
      rows.kernel!.push(rate(kernel))
      cpu.kernel!.push(cpuMsSince(kernelCpu))
      }
      if (want("tool")) {
      let bytes = 0
      const toolCpu = process.cpuUsage()
      const start = performance.now()
      await veyyon.runPromise(runCell({ code, timeout: 600 }, { ...ctx, onEvent: (o) => { if (o._tag === "Stdout") bytes += o.text.length } }))
      rows.tool!.push(rate({ bytes, ms: performance.now() - start }))
      cpu.tool!.push(cpuMsSince(toolCpu))
      }
      console.log(roundLine(round, rows, cpu))
    }
    await profiling.stop()
    for (const line of medianLines(rows, cpu, "pipe", "the raw pipe")) console.log(line)
  } finally {
    await veyyon.dispose().catch(() => undefined)
    cleanUp()
  }
}
main()
