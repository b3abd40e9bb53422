/**
 * `node --import tsx bench/streamparts.ts [rounds] [pipe,runner,kernel,tool]`: figure 3's
 * 100 MiB cell through each layer, alternated in one process so the ratios share the
 * machine's load: the raw pipe (Python printing into a pipe), the runner alone (Node
 * counting its frame bytes, no decoding), the bare kernel, and the tool. Prints MB/s and
 * this process's CPU per cell for each round, and the medians. With
 * `STREAMPARTS_PROFILE=file.cpuprofile` it profiles the cells alone (not the start-up).
 */
import { spawn } from "node:child_process"
import { Session } from "node:inspector/promises"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect } from "effect"
import { rawPipe } from "./floor.ts"
import { benchInterpreter } from "./python.ts"
import { killAll, withEnvironment } from "./procs.ts"
import { RUN_MARKER_VARIABLE } from "./jupyter.ts"
import { makeVeyyon, rawKernel, runCell, runnerBoot } from "./veyyon.ts"

const LINES = 102_400
const code = `line = "x" * 1023\nfor _ in range(${LINES}):\n    print(line)`
const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

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
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-streamparts-"))
  process.env[RUN_MARKER_VARIABLE] = path.basename(scratch)
  const workDir = path.join(scratch, "work")
  const artifactsDir = path.join(scratch, "artifacts")
  fs.mkdirSync(workDir)
  fs.mkdirSync(artifactsDir)
  const veyyon = makeVeyyon(python.executable, artifactsDir)
  const rate = (r: { bytes: number; ms: number }) => r.bytes / 1e6 / (r.ms / 1000)
  const rows: Record<string, Array<number>> = { pipe: [], runner: [], kernel: [], tool: [] }
  const cpu: Record<string, Array<number>> = { kernel: [], tool: [] }
  const cpuMs = (since: NodeJS.CpuUsage) => {
    const used = process.cpuUsage(since)
    return (used.user + used.system) / 1000
  }
  try {
    const boot = await Effect.runPromise(runnerBoot(python.executable, artifactsDir))
    const ctx = { sessionId: "sp", cwd: workDir }
    await veyyon.runPromise(runCell({ code: "pass" }, ctx))
    const profile = process.env.STREAMPARTS_PROFILE
    const session = profile === undefined ? undefined : new Session()
    if (session !== undefined) {
      session.connect()
      await session.post("Profiler.enable")
      await session.post("Profiler.start")
    }
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
      cpu.kernel!.push(cpuMs(kernelCpu))
      }
      if (want("tool")) {
      let bytes = 0
      const toolCpu = process.cpuUsage()
      const start = performance.now()
      await veyyon.runPromise(runCell({ code, timeout: 600 }, { ...ctx, onEvent: (o) => { if (o._tag === "Stdout") bytes += o.text.length } }))
      rows.tool!.push(rate({ bytes, ms: performance.now() - start }))
      cpu.tool!.push(cpuMs(toolCpu))
      }
      console.log(`round ${round}: ` + Object.entries(rows).filter(([, v]) => v.length > 0).map(([k, v]) => `${k} ${v.at(-1)!.toFixed(1)}`).join("  ") +
        "  host CPU ms: " + Object.entries(cpu).filter(([, v]) => v.length > 0).map(([k, v]) => `${k} ${v.at(-1)!.toFixed(0)}`).join("  "))
    }
    if (session !== undefined) {
      const { profile: taken } = await session.post("Profiler.stop")
      fs.writeFileSync(profile!, JSON.stringify(taken))
    }
    const pipe = rows.pipe!.length > 0 ? median(rows.pipe!) : NaN
    console.log("median MB/s (ratio to the raw pipe's median): " +
      Object.entries(rows).filter(([, v]) => v.length > 0).map(([k, v]) => `${k} ${median(v).toFixed(1)} (${(median(v) / pipe).toFixed(2)}) [${Math.min(...v).toFixed(0)}-${Math.max(...v).toFixed(0)}]`).join("  "))
    console.log("median host CPU ms per cell: " + Object.entries(cpu).filter(([, v]) => v.length > 0).map(([k, v]) => `${k} ${median(v).toFixed(0)}`).join("  "))
  } finally {
    await veyyon.dispose().catch(() => undefined)
    killAll(withEnvironment(`${RUN_MARKER_VARIABLE}=${path.basename(scratch)}`))
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}
main()
