/**
 * runner.mjs on the wire without the kernel actor: the exit request, end of input,
 * malformed lines, the stdin/stdout fallback, and the pure helpers it exports.
 */
import { spawn } from "node:child_process"
import type { Duplex } from "node:stream"
import { afterEach, describe, expect, it } from "vitest"
import { decodeFrameLine, type Frame } from "../runner/harness.ts"
import { isLive, isRunning, waitUntil } from "../support/process.ts"
import { jsRunnerPath, loadRunner } from "./support.ts"

const children: Array<ReturnType<typeof spawn>> = []
/** Lines a runner sent that the protocol schema does not decode, with why. */
const rejected: Array<string> = []
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  expect(rejected.splice(0)).toEqual([])
})

/** Decodes one line with the protocol schema; a line it rejects is recorded and fails the test. */
const decodeLine = (line: string): Frame | undefined => {
  const decoded = decodeFrameLine(line)
  if (decoded._tag === "Frame") return decoded.frame
  rejected.push(`${line.slice(0, 300)}\n${decoded._tag === "NotJson" ? "not JSON" : decoded.problem}`)
  return undefined
}

/** Starts the runner with the protocol on fd 3 (or on stdin/stdout), collecting frames and the exit. */
const startRunner = (channel: "fd3" | "stdio" = "fd3") => {
  const child = spawn(process.execPath, [jsRunnerPath], {
    stdio: channel === "fd3" ? ["ignore", "pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe"],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }
  })
  children.push(child)
  const socket = (channel === "fd3" ? child.stdio[3] : child.stdin) as Duplex
  const output = (channel === "fd3" ? child.stdio[3] : child.stdout) as Duplex
  const frames: Array<Frame> = []
  const waiters: Array<() => void> = []
  let pending = ""
  output.setEncoding("utf8").on("data", (chunk: string) => {
    pending += chunk
    const lines = pending.split("\n")
    pending = lines.pop()!
    for (const line of lines) {
      const frame = line.trim() === "" ? undefined : decodeLine(line)
      if (frame !== undefined) frames.push(frame)
    }
    for (const waiter of waiters.splice(0)) waiter()
  })
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const until = async (check: (frames: ReadonlyArray<Frame>) => boolean) => {
    while (!check(frames)) await new Promise<void>((resolve) => waiters.push(resolve))
    return frames
  }
  const send = (line: unknown) => socket.write((typeof line === "string" ? line : JSON.stringify(line)) + "\n")
  return { child, socket, frames, exited, until, send }
}

const request = (id: string, code: string) => ({ id, code, silent: false, storeHistory: true })
const isDone = (id: string) => (frames: ReadonlyArray<Frame>) => frames.some((f) => f.type === "done" && f.id === id)

describe("runner.mjs protocol", () => {
  it("answers malformed lines with ProtocolError frames and keeps serving", async () => {
    const runner = startRunner()
    runner.send("not json")
    runner.send("[1]")
    runner.send({ id: "bad", code: 5 })
    runner.send({ type: "nonsense", id: "odd" })
    runner.send(request("ok", "40 + 2"))
    const frames = await runner.until(isDone("ok"))
    const errors = frames.filter((f) => f.type === "error")
    expect(errors.map((f) => [f.id, f.ename])).toEqual([[null, "ProtocolError"], [null, "ProtocolError"], ["bad", "ProtocolError"], ["odd", "ProtocolError"]])
    expect(String(errors[0]!.evalue)).toContain("not JSON")
    expect(frames.find((f) => f.type === "done" && f.id === "bad")).toMatchObject({ status: "error" })
    expect(frames.find((f) => f.type === "result")).toMatchObject({ id: "ok", bundle: { "text/plain": "42" } })
    expect(frames.find((f) => f.type === "done" && f.id === "ok")).toMatchObject({ status: "ok", executionCount: 1, cancelled: false })
    runner.send({ type: "exit" })
    expect(await runner.exited).toBe(0)
  })

  it("at the end of input finishes the requests already sent, then exits", async () => {
    const runner = startRunner()
    runner.send(request("a", "await new Promise((resolve) => setTimeout(resolve, 100)); 'a'"))
    runner.send(request("b", "'b'"))
    runner.socket.end()
    expect(await runner.exited).toBe(0)
    expect(runner.frames.filter((f) => f.type === "result").map((f) => f.id)).toEqual(["a", "b"])
  })

  it("serves stdin and stdout when started without fd 3", async () => {
    const runner = startRunner("stdio")
    runner.send(request("s", "console.log('hi'); 7 * 6"))
    runner.socket.end()
    expect(await runner.exited).toBe(0)
    expect(runner.frames.map((f) => f.type)).toEqual(["started", "stdout", "result", "done"])
  })
})

describe("runner.mjs and its host", () => {
  it("ends when its host dies, even while a cell is busy", async () => {
    const host = `
      const { spawn } = require("node:child_process")
      const runner = spawn(process.execPath, [${JSON.stringify(jsRunnerPath)}], { stdio: ["ignore", "ignore", "ignore", "pipe"], detached: true })
      runner.stdio[3].write(JSON.stringify({ id: "busy", code: "while (true) {}", silent: false, storeHistory: true }) + "\\n")
      runner.stdio[3].on("data", (chunk) => { if (String(chunk).includes("started")) console.log(runner.pid) })
    `
    const parent = spawn(process.execPath, ["-e", host], { stdio: ["ignore", "pipe", "inherit"] })
    children.push(parent)
    const pid = await new Promise<number>((resolve) => parent.stdout!.once("data", (chunk) => resolve(Number(String(chunk).trim()))))
    expect(isRunning(pid)).toBe(true)
    parent.kill("SIGKILL")
    const gone = await waitUntil(() => !isLive(pid), 4000)
    if (!gone) process.kill(pid, "SIGKILL")
    expect(gone).toBe(true)
  })
})

describe("transformCell", () => {
  const load = async () => (await loadRunner()).transformCell as (source: string) => string

  it("rewrites import statements and import() calls, keeping every line where it was", async () => {
    const transform = await load()
    const source = "import a, { b as c, default as d } from 'x'\nimport * as ns from \"y\" with { type: 'json' }\nimport 'z'\nconst m = await import('w')\nm"
    const out = transform(source)
    expect(out.split("\n")).toEqual([
      "const { default: a, b: c, default: d } = await __veyyonImport('x');",
      "const ns = await __veyyonImport(\"y\", { with: { type: 'json' } });",
      "await __veyyonImport('z');",
      "const m = await __veyyonImport('w')",
      "m"
    ])
  })

  it("leaves strings, comments, templates, regular expressions, members and nested statements alone", async () => {
    const transform = await load()
    const untouched = [
      "const s = 'import x from \"y\"' + \"import('z')\"",
      "// import x from 'y'\n/* import('z') */",
      "const t = `import(${'x'}) ${ { a: 1 }.a } import y from 'z'`",
      "const r = /import\\(x\\)/g.test(s)",
      "loader.import('x'); obj?.import('y')",
      "if (ok) { import x from 'y' }",
      "const d = a / b; const e = (c) / 2 / import.meta"
    ]
    for (const source of untouched) expect(transform(source)).toBe(source)
    expect(transform("`${`import('inner')`}`; import('outer')")).toBe("`${`import('inner')`}`; __veyyonImport('outer')")
  })
})

describe("redirectStdio", () => {
  it("pipes exactly the stdio a child would share with the runner", async () => {
    const redirect = (await loadRunner()).redirectStdio as (stdio: unknown) => { stdio: Array<unknown>; targets: Map<number, string> } | undefined
    expect(redirect(undefined)).toBeUndefined()
    expect(redirect("pipe")).toBeUndefined()
    expect(redirect(["pipe", "ignore", "pipe"])).toBeUndefined()
    expect(redirect("inherit")).toEqual({ stdio: [0, "pipe", "pipe"], targets: new Map([[1, "stdout"], [2, "stderr"]]) })
    expect(redirect([0, 2, 1, "ipc"])).toEqual({ stdio: [0, "pipe", "pipe", "ipc"], targets: new Map([[1, "stderr"], [2, "stdout"]]) })
  })
})
