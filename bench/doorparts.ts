/**
 * The stdio door's own CPU per `tools/call`, with no Python and no pipes: the eval tool
 * over the in-process instant runner (`instant.ts`), called through `EvalTool.run`,
 * through the door (`McpDoor.receive` of the parsed frame, the answer stringified), and
 * through the stdio door (`serveStdio` reading the request's bytes from a queue and
 * writing its line to a function). Prints this process's CPU per call for each, rounds
 * alternated; `DOORPARTS_PROFILE=file.cpuprofile` profiles the calls alone,
 * `DOORPARTS_ONLY=door,stdio` runs only those paths. Measures the
 * built package: `npm run build` first.
 * `node --import tsx bench/doorparts.ts [rounds] [calls]`
 */
import { Deferred, Effect, Fiber, ManagedRuntime, Queue, Stream } from "effect"
import * as fs from "node:fs"
import * as inspector from "node:inspector/promises"
import * as os from "node:os"
import * as path from "node:path"
import { serveMcp } from "../dist/mcp/EvalMcpServer.js"
import { parseFrame } from "../dist/mcp/JsonRpc.js"
import type { McpDoor } from "../dist/mcp/McpDoor.js"
import { serveStdio } from "../dist/mcp/StdioDoor.js"
import { EvalTool } from "../dist/services/tool/EvalTool.js"
import { instantLayer } from "./instant.ts"
import { median } from "./stats.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-doorparts-"))
const runtime = ManagedRuntime.make(instantLayer(dir))
const ARGUMENTS = { language: "py", code: "x = 1 + 1" }
const INITIALIZE = { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "doorparts", version: "0" } }

let nextId = 1
const request = (method: string, params: unknown) => JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params })

try {
  const tool = await runtime.runPromise(EvalTool)
  let door: McpDoor | undefined
  const stdin = await runtime.runPromise(Queue.unbounded<Uint8Array>())
  let answered: ((line: string) => void) | undefined
  const server = runtime.runFork(
    serveMcp({ version: "0", progressIntervalMs: 4000 }, (given) =>
      Effect.suspend(() => {
        door = given
        return serveStdio(given, Stream.fromQueue(stdin), (line) => Effect.sync(() => answered?.(line)))
      }))
  )
  while (door === undefined) await new Promise((resolve) => setTimeout(resolve, 10))
  const through = (clientId: number, line: string) =>
    Effect.gen(function*() {
      const done = yield* Deferred.make<string>()
      yield* door!.receive(clientId, parseFrame(line), {
        send: () => Effect.void,
        end: (message) => Deferred.succeed(done, message === undefined ? "" : JSON.stringify(message))
      })
      return yield* Deferred.await(done)
    })
  const stdio = (line: string) =>
    new Promise<string>((resolve) => {
      answered = resolve
      Queue.offerUnsafe(stdin, Buffer.from(`${line}\n`))
    })
  await runtime.runPromise(through(1, request("initialize", INITIALIZE)))
  await stdio(request("initialize", INITIALIZE))
  const all: Record<string, () => Promise<unknown>> = {
    tool: () => runtime.runPromise(tool.run(ARGUMENTS, { sessionId: "doorparts-tool", cwd: dir })),
    door: () => runtime.runPromise(through(1, request("tools/call", { name: "eval", arguments: ARGUMENTS }))),
    stdio: () => stdio(request("tools/call", { name: "eval", arguments: ARGUMENTS }))
  }
  const only = process.env.DOORPARTS_ONLY?.split(",")
  const paths = Object.fromEntries(Object.entries(all).filter(([name]) => only === undefined || only.includes(name)))
  const repeat = async (once: () => Promise<unknown>, calls: number) => {
    for (let i = 0; i < calls; i++) await once()
  }
  for (const once of Object.values(paths)) await repeat(once, 3000)
  const rounds = Number(process.argv[2] ?? 5)
  const calls = Number(process.argv[3] ?? 5000)
  const profile = process.env.DOORPARTS_PROFILE
  const session = profile === undefined ? undefined : new inspector.Session()
  if (session !== undefined) {
    session.connect()
    await session.post("Profiler.enable")
    await session.post("Profiler.start")
  }
  const perCall: Record<string, Array<number>> = {}
  for (let round = 0; round < rounds; round++) {
    for (const [name, once] of Object.entries(paths)) {
      const start = process.cpuUsage()
      await repeat(once, calls)
      const used = process.cpuUsage(start)
      ;(perCall[name] ??= []).push((used.user + used.system) / calls)
    }
  }
  if (session !== undefined) {
    const { profile: taken } = await session.post("Profiler.stop")
    fs.writeFileSync(profile!, JSON.stringify(taken))
    session.disconnect()
  }
  const toolMedian = perCall.tool === undefined ? Number.NaN : median(perCall.tool)
  for (const [name, samples] of Object.entries(perCall)) {
    const over = name === "tool" ? "" : `, ${(median(samples) - toolMedian).toFixed(1)} us over the tool`
    console.log(`${name.padEnd(6)} CPU per call: median ${median(samples).toFixed(1)} us${over} (rounds: ${samples.map((s) => s.toFixed(1)).join(", ")})`)
  }
  Queue.shutdownUnsafe(stdin)
  await runtime.runPromise(Fiber.await(server))
} finally {
  await runtime.dispose()
  fs.rmSync(dir, { recursive: true, force: true })
}
