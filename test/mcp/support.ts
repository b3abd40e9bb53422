/**
 * `veyyon mcp` children for raw-byte tests: stdout read as JSON lines, stderr kept, and
 * every child killed when the test file ends (see `stop`); an SDK client transport over a
 * child a test spawned; the kernel processes below a server.
 */
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js"
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import { childEnv, cliEntry, repoRoot, tempDir } from "../cli/support.ts"

/** A running `veyyon mcp …` child. */
export interface McpChild {
  readonly child: ChildProcess
  /** Every JSON message it wrote to stdout, in order. */
  readonly messages: Array<Record<string, unknown>>
  /** Everything it wrote to stderr so far. */
  readonly stderr: () => string
  /** Writes raw text to its stdin. */
  readonly write: (text: string) => void
  /** The first message (from index `from`) matching `match`, waiting up to `timeoutMs`. */
  readonly next: (match: (message: Record<string, unknown>) => boolean, timeoutMs?: number, from?: number) => Promise<Record<string, unknown>>
  /** Waits until stderr matches `pattern`. */
  readonly stderrMatch: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpExecArray>
  /** Stops it: SIGTERM (so it shuts its kernels down), then SIGKILL if it is still there after 15 s. */
  readonly kill: () => Promise<void>
}

/** What `find` returns once it returns something, checked every 25 ms; fails naming `what` after `timeoutMs`. */
export const poll = async <A>(find: () => A | undefined, timeoutMs: number, what: string): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = find()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** Starts `veyyon <args>` from source with a fresh artifacts directory. */
export const startMcp = (args: ReadonlyArray<string>, extraEnv: Readonly<Record<string, string>> = {}): McpChild => {
  const child = spawn(cliEntry.command, [...cliEntry.args, ...args], {
    cwd: repoRoot,
    env: childEnv(tempDir("veyyon-mcp-raw-"), extraEnv),
    stdio: ["pipe", "pipe", "pipe"]
  })
  const messages: Array<Record<string, unknown>> = []
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8")
    let newline = stdout.indexOf("\n")
    while (newline !== -1) {
      const line = stdout.slice(0, newline)
      stdout = stdout.slice(newline + 1)
      if (line.trim() !== "") messages.push(JSON.parse(line) as Record<string, unknown>)
      newline = stdout.indexOf("\n")
    }
  })
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  child.stdin!.on("error", () => {})
  return {
    child,
    messages,
    stderr: () => stderr,
    write: (text) => void child.stdin!.write(text),
    next: (match, timeoutMs = 60_000, from = 0) =>
      poll(() => messages.slice(from).find(match), timeoutMs, `a matching message (stderr: ${stderr.slice(-500)})`),
    stderrMatch: (pattern, timeoutMs = 60_000) =>
      poll(() => pattern.exec(stderr) ?? undefined, timeoutMs, `stderr matching ${pattern} (stderr: ${stderr.slice(-500)})`),
    kill: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
      child.kill("SIGTERM")
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
      await exited
      clearTimeout(timer)
    }
  }
}

/** The `initialize` request of a test client. */
export const initializeRequest = (id: number | string) => ({
  jsonrpc: "2.0",
  id,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw-test", version: "0" } }
})

/**
 * An MCP client transport over a child this test spawned itself (so the test keeps the
 * process: its pid, its signals, its exit code): newline-delimited JSON-RPC on its stdio,
 * framed by the SDK's own reader.
 */
export const childTransport = (child: ChildProcess): Transport => {
  const buffer = new ReadBuffer()
  const transport: Transport = {
    start: async () => {
      child.stdout!.on("data", (chunk: Buffer) => {
        buffer.append(chunk)
        for (let message = buffer.readMessage(); message !== null; message = buffer.readMessage()) transport.onmessage?.(message)
      })
      child.once("close", () => transport.onclose?.())
      child.stdin!.on("error", (error) => transport.onerror?.(error))
    },
    send: (message) =>
      new Promise<void>((resolve) => {
        if (child.stdin!.writable) child.stdin!.write(serializeMessage(message), () => resolve())
        else resolve()
      }),
    close: async () => {
      child.stdin!.end()
    }
  }
  return transport
}

/** The live descendants of `root` outside the host's containment watcher (which lives as long as the host), read from /proc. */
export const kernelProcesses = (root: number): Array<number> => {
  const parents = new Map<number, number>()
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, "utf8")
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]))
    } catch {
      // gone meanwhile
    }
  }
  const isTreeWatcher = (pid: number) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("veyyon-tree-watch")
    } catch {
      return false
    }
  }
  const found: Array<number> = []
  const walk = (pid: number) => {
    for (const [child, parent] of parents) {
      if (parent !== pid || isTreeWatcher(child)) continue
      found.push(child)
      walk(child)
    }
  }
  walk(root)
  return found
}
