/**
 * The MCP doors' own cost: the official SDK client calling `eval` with `x = 1 + 1` on
 * our stdio door (`veyyon mcp`), our streamable HTTP door (`veyyon mcp --http`), and the
 * SDK's own low-level `Server` over stdio and over streamable HTTP replaying our tool
 * definition (from our `tools/list`) and a result captured from a real call, with no work
 * behind it; beside them the same cell through `EvalTool.run` in this process. Rounds
 * alternate among all of them; stdio with snapshots on and HTTP with the viewer page on
 * are rows of their own. Prints p50/p99 per door (of all its calls) and the budget: stdio within its SDK
 * baseline plus the tool's p50 plus 0.3 ms, HTTP within its baseline plus the tool plus
 * 0.5 ms. Measures the built package: `npm run build` first.
 * `node --import tsx bench/mcpdoors.ts [rounds] [calls]`; `MCPDOORS_PROFILE=dir` makes
 * our servers write CPU profiles there.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { RUN_MARKER_VARIABLE } from "./jupyter.ts"
import { killAll, withEnvironment } from "./procs.ts"
import { benchInterpreter } from "./python.ts"
import { quantile } from "./stats.ts"
import { makeVeyyon, runCell, type VeyyonRuntime } from "./veyyon.ts"

const CODE = "x = 1 + 1"
const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)))
const CLI = path.join(ROOT, "bin", "veyyon.mjs")
const SDK_SERVER = path.join(ROOT, "bench", "mcpsdkserver.ts")

/** A door the client calls, as the rows name it. */
export type DoorName = "stdio" | "http" | "sdk-stdio" | "sdk-http" | "stdio+snapshots" | "http+viewer"

/** What one door's rounds measured, in milliseconds per call. */
export interface DoorSamples {
  /** The p50 and p99 of every call of every round together (a load spike in one round moves them least). */
  readonly p50: number
  readonly p99: number
  /** The p50 of each round, in order. */
  readonly p50s: ReadonlyArray<number>
  /** The p99 of each round, in order. */
  readonly p99s: ReadonlyArray<number>
}

/** What a run measured: every door's rounds, the in-process tool's, and the budget checks. */
export interface McpDoorsResult {
  readonly rounds: number
  readonly calls: number
  readonly doors: Readonly<Record<DoorName | "tool", DoorSamples>>
  readonly budgets: ReadonlyArray<Budget>
}

/** One door held to its SDK baseline plus the tool plus a margin (p50s of all their calls). */
export interface Budget {
  readonly door: DoorName
  readonly baseline: DoorName
  readonly marginMs: number
  readonly doorMs: number
  readonly limitMs: number
  /** The door minus its baseline minus the tool: what the door itself adds. */
  readonly extraMs: number
  readonly met: boolean
}

/** How a run goes. */
export interface McpDoorsOptions {
  readonly python: string
  readonly rounds: number
  readonly calls: number
  readonly warmup: number
  /** The in-process tool (a runtime over `evalLayer`); one is made when absent. */
  readonly veyyon?: VeyyonRuntime
  /** Where our servers write CPU profiles, when given. */
  readonly profileDir?: string
  readonly log?: (line: string) => void
}

interface Door {
  readonly name: DoorName
  readonly client: Client
  readonly child: ChildProcess
}

const stderrOf = (child: ChildProcess): (() => string) => {
  let text = ""
  child.stderr?.on("data", (chunk: Buffer) => (text = (text + chunk.toString("utf8")).slice(-20_000)))
  return () => text
}

const waitFor = (child: ChildProcess, stream: "stdout" | "stderr", pattern: RegExp, what: string): Promise<RegExpExecArray> =>
  new Promise((resolve, reject) => {
    let text = ""
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}: ${text.slice(-500)}`)), 60_000)
    child[stream]!.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8")
      const match = pattern.exec(text)
      if (match !== null) {
        clearTimeout(timer)
        resolve(match)
      }
    })
    child.once("exit", (code) => reject(new Error(`${what}: the server exited (${code}): ${text.slice(-500)}`)))
  })

const newClient = () => new Client({ name: "veyyon-bench", version: "0.0.0" })

/** Spawns a stdio server and connects the SDK client to it (the transport owns the child). */
const stdioDoor = async (name: DoorName, command: string, args: ReadonlyArray<string>, env: Record<string, string>, cwd: string): Promise<Door> => {
  const transport = new StdioClientTransport({ command, args: [...args], env, cwd, stderr: "pipe" })
  const client = newClient()
  await client.connect(transport)
  const pid = transport.pid
  if (pid === null) throw new Error(`${name}: no child`)
  const child = (transport as unknown as { _process: ChildProcess })._process
  stderrOf(child)
  return { name, client, child }
}

/** Spawns an HTTP server, reads its port, and connects the SDK client with `token`. */
const httpDoor = async (
  name: DoorName,
  command: string,
  args: ReadonlyArray<string>,
  env: Record<string, string>,
  cwd: string,
  ready: { readonly stream: "stdout" | "stderr"; readonly pattern: RegExp },
  token?: string
): Promise<Door> => {
  const child = spawn(command, [...args], { env, cwd, stdio: ["ignore", "pipe", "pipe"] })
  const port = Number((await waitFor(child, ready.stream, ready.pattern, `${name} listening`))[1])
  const client = newClient()
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` }
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { requestInit: { headers } }))
  return { name, client, child }
}

const call = (client: Client) => client.callTool({ name: "eval", arguments: { language: "py", code: CODE } })

const timed = async (once: () => Promise<unknown>, calls: number): Promise<Array<number>> => {
  const samples: Array<number> = []
  for (let i = 0; i < calls; i++) {
    const start = performance.now()
    await once()
    samples.push(performance.now() - start)
  }
  return samples
}

const stop = async (child: ChildProcess): Promise<void> => {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
  await exited
  clearTimeout(timer)
}

/** Runs every door's rounds, alternated, and shuts everything it started down. */
export const measureMcpDoors = async (options: McpDoorsOptions): Promise<McpDoorsResult> => {
  const log = options.log ?? (() => {})
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-mcpdoors-"))
  const marker = `${RUN_MARKER_VARIABLE}=mcpdoors-${path.basename(scratch)}`
  const token = randomBytes(24).toString("base64url")
  const work = path.join(scratch, "work")
  fs.mkdirSync(work)
  const baseEnv = (label: string, extra: Record<string, string> = {}): Record<string, string> => {
    const env: Record<string, string> = {}
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value
    return {
      ...env,
      [RUN_MARKER_VARIABLE]: `mcpdoors-${path.basename(scratch)}`,
      VEYYON_PYTHON_INTERPRETER: options.python,
      VEYYON_ARTIFACTS_DIR: path.join(scratch, label, "artifacts"),
      XDG_STATE_HOME: path.join(scratch, label, "state"),
      VEYYON_MCP_WORKSPACE: path.join(scratch, label, "workspaces"),
      VEYYON_SESSION_SNAPSHOTS: "off",
      VEYYON_MCP_TOKEN: token,
      NO_COLOR: "1",
      ...extra
    }
  }
  const nodeArgs = (label: string) =>
    options.profileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${path.join(options.profileDir, label)}`]
  const ownVeyyon = options.veyyon === undefined ? makeVeyyon(options.python, path.join(scratch, "tool-artifacts"), { session: { snapshots: "off" } }) : undefined
  const veyyon = options.veyyon ?? ownVeyyon!
  const doors: Array<Door> = []
  try {
    const serving = /serving MCP \(streamable HTTP\) at http:\/\/[^:]+:(\d+)\/mcp/
    doors.push(await stdioDoor("stdio", process.execPath, [...nodeArgs("stdio"), CLI, "mcp"], baseEnv("stdio"), work))
    const ours = doors[0]!.client
    const tools = (await ours.listTools()).tools
    const captured = await call(ours)
    if ((captured as { isError?: boolean }).isError === true) throw new Error(`the cell failed: ${JSON.stringify(captured).slice(0, 500)}`)
    const fixture = path.join(scratch, "fixture.json")
    fs.writeFileSync(fixture, JSON.stringify({ tools, result: captured }))
    doors.push(await httpDoor("http", process.execPath, [...nodeArgs("http"), CLI, "mcp", "--http", "--port", "0"], baseEnv("http"), work, { stream: "stderr", pattern: serving }, token))
    doors.push(await stdioDoor("sdk-stdio", process.execPath, ["--import", "tsx", SDK_SERVER, "stdio", fixture], baseEnv("sdk-stdio"), ROOT))
    doors.push(await httpDoor("sdk-http", process.execPath, ["--import", "tsx", SDK_SERVER, "http", fixture], baseEnv("sdk-http"), ROOT, { stream: "stdout", pattern: /listening (\d+)/ }))
    doors.push(await stdioDoor("stdio+snapshots", process.execPath, [CLI, "mcp"], baseEnv("stdio-snapshots", { VEYYON_SESSION_SNAPSHOTS: "every-cell" }), work))
    doors.push(await httpDoor("http+viewer", process.execPath, [CLI, "mcp", "--http", "--port", "0", "--viewer"], baseEnv("http-viewer"), work, { stream: "stderr", pattern: serving }, token))
    for (const door of doors) {
      // The client validates `structuredContent` against the output schema it learnt from `tools/list`.
      if (door.name !== "stdio") await door.client.listTools()
      const answer = await call(door.client)
      if ((answer as { isError?: boolean }).isError === true) throw new Error(`${door.name}: the cell failed: ${JSON.stringify(answer).slice(0, 500)}`)
    }
    const toolCell = () => veyyon.runPromise(runCell({ code: CODE }, { sessionId: "mcpdoors-tool", cwd: work }))
    const paths: Array<readonly [DoorName | "tool", () => Promise<unknown>]> = [
      ...doors.map((door) => [door.name, () => call(door.client)] as const),
      ["tool", toolCell]
    ]
    for (const [name, once] of paths) {
      await timed(once, options.warmup)
      log(`mcpdoors: ${name} warm`)
    }
    const samples: Record<string, { all: Array<number>; p50s: Array<number>; p99s: Array<number> }> = {}
    for (let round = 0; round < options.rounds; round++) {
      // Each round starts with the next path, so no path always follows the same one.
      for (let i = 0; i < paths.length; i++) {
        const [name, once] = paths[(i + round) % paths.length]!
        const taken = await timed(once, options.calls)
        const entry = (samples[name] ??= { all: [], p50s: [], p99s: [] })
        entry.all.push(...taken)
        entry.p50s.push(quantile(taken, 0.5))
        entry.p99s.push(quantile(taken, 0.99))
      }
      log(`mcpdoors: round ${round + 1} of ${options.rounds}`)
    }
    const doorSamples = Object.fromEntries(Object.entries(samples).map(([name, { all, p50s, p99s }]) =>
      [name, { p50: quantile(all, 0.5), p99: quantile(all, 0.99), p50s, p99s }]
    )) as unknown as McpDoorsResult["doors"]
    const p50 = (name: DoorName | "tool") => doorSamples[name].p50
    const budget = (door: DoorName, baseline: DoorName, marginMs: number): Budget => {
      const limitMs = p50(baseline) + p50("tool") + marginMs
      return { door, baseline, marginMs, doorMs: p50(door), limitMs, extraMs: p50(door) - p50(baseline) - p50("tool"), met: p50(door) <= limitMs }
    }
    return {
      rounds: options.rounds,
      calls: options.calls,
      doors: doorSamples,
      budgets: [
        budget("stdio", "sdk-stdio", 0.3),
        budget("http", "sdk-http", 0.5),
        budget("stdio+snapshots", "sdk-stdio", 0.3),
        budget("http+viewer", "sdk-http", 0.5)
      ]
    }
  } finally {
    await Promise.all(doors.map(async (door) => {
      await door.client.close().catch(() => undefined)
      await stop(door.child)
    }))
    await ownVeyyon?.dispose().catch(() => undefined)
    killAll(withEnvironment(marker))
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

/** The result as lines of text. */
export const mcpDoorsText = (result: McpDoorsResult): Array<string> => {
  const ms = (value: number) => value.toFixed(3)
  const lines = [`${result.rounds} alternated rounds of ${result.calls} warm calls of \`${CODE}\` (load ${os.loadavg().map((n) => n.toFixed(1)).join(" ")}):`]
  for (const [name, door] of Object.entries(result.doors)) {
    lines.push(`  ${name.padEnd(16)} p50 ${ms(door.p50)} ms (rounds ${door.p50s.map(ms).join(" / ")}), p99 ${ms(door.p99)} ms`)
  }
  for (const b of result.budgets) {
    lines.push(
      `  ${b.door.padEnd(16)} ${ms(b.doorMs)} ms vs ${b.baseline} + tool + ${b.marginMs} ms = ${ms(b.limitMs)} ms: adds ${ms(b.extraMs)} ms, ${b.met ? "met" : "MISSED"}`
    )
  }
  return lines
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const python = benchInterpreter()
  if (python === undefined) throw new Error("no python3 on PATH runs; set VEYYON_BENCH_PYTHON")
  const result = await measureMcpDoors({
    python: python.executable,
    rounds: Number(process.argv[2] ?? 4),
    calls: Number(process.argv[3] ?? 300),
    warmup: Number(process.env.MCPDOORS_WARMUP ?? 300),
    ...(process.env.MCPDOORS_PROFILE === undefined ? {} : { profileDir: path.resolve(process.env.MCPDOORS_PROFILE) }),
    log: (line) => console.error(line)
  })
  for (const line of mcpDoorsText(result)) console.log(line)
}
