/**
 * Drives runner/runner.py standalone for the integration suites: spawns it, writes NDJSON
 * requests, parses every frame it prints (flagging any line that is not valid UTF-8 JSON),
 * and collects one cell's frames until its `done`.
 */
import { spawn, type ChildProcess } from "node:child_process"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { findPython } from "../support/python.ts"

export const RUNNER_PATH = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../runner/runner.py")

export type Bundle = Record<string, unknown>

export interface Frame {
  readonly type: string
  readonly id?: string | null
  readonly [key: string]: unknown
}

export interface Cell {
  readonly id: string
  readonly frames: ReadonlyArray<Frame>
  readonly stdout: string
  readonly stderr: string
  readonly results: ReadonlyArray<Bundle>
  readonly displays: ReadonlyArray<Bundle>
  readonly statuses: ReadonlyArray<Record<string, unknown>>
  readonly error: Frame | undefined
  readonly done: Frame
}

export interface ExecuteOptions {
  readonly id?: string
  readonly silent?: boolean
  readonly storeHistory?: boolean
  readonly cwd?: string
  readonly env?: Record<string, string | null>
  readonly timeoutMs?: number
}

export interface SpawnOptions {
  readonly python?: string
  readonly cwd?: string
  readonly env?: Record<string, string>
}

export const STATUS_MIME = "application/x-veyyon-status"

const live = new Set<Kernel>()
let requestSeq = 0

/** A running runner process and every frame it has printed so far. */
export class Kernel {
  readonly frames: Array<Frame> = []
  readonly badLines: Array<string> = []
  rawStderr = ""
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  private pending = Buffer.alloc(0)
  private listeners = new Set<() => void>()
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined

  private constructor(readonly proc: ChildProcess) {
    const decoder = new TextDecoder("utf-8", { fatal: true })
    proc.stdout!.on("data", (chunk: Buffer) => {
      this.pending = Buffer.concat([this.pending, chunk])
      let newline = this.pending.indexOf(0x0a)
      while (newline !== -1) {
        const line = this.pending.subarray(0, newline)
        this.pending = this.pending.subarray(newline + 1)
        try {
          this.frames.push(JSON.parse(decoder.decode(line)) as Frame)
        } catch {
          this.badLines.push(line.toString("latin1").slice(0, 500))
        }
        newline = this.pending.indexOf(0x0a)
      }
      this.notify()
    })
    proc.stderr!.on("data", (chunk: Buffer) => {
      this.rawStderr += chunk.toString("utf8")
    })
    proc.stdin!.on("error", () => undefined)
    this.exited = new Promise((resolve) => {
      proc.on("exit", (code, signal) => {
        this.exitInfo = { code, signal }
        live.delete(this)
        this.notify()
        resolve({ code, signal })
      })
    })
  }

  /** Spawn the runner as the host does: `<python> -u runner.py`, in its own process group. */
  static spawn(options: SpawnOptions = {}): Kernel {
    const python = options.python ?? findPython()
    if (python === undefined) throw new Error("no Python interpreter found")
    const proc = spawn(python, ["-u", RUNNER_PATH], {
      cwd: options.cwd ?? process.cwd(),
      env: { ...process.env, PYTHONIOENCODING: "utf-8", PYTHONUNBUFFERED: "1", ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
      detached: true
    })
    const kernel = new Kernel(proc)
    live.add(kernel)
    return kernel
  }

  get pid(): number {
    return this.proc.pid!
  }

  get hasExited(): boolean {
    return this.exitInfo !== undefined
  }

  /** Write one JSON message as a line. */
  send(message: unknown): void {
    this.sendRaw(JSON.stringify(message) + "\n")
  }

  /** Write raw bytes to the runner's stdin. */
  sendRaw(data: string | Buffer): void {
    this.proc.stdin!.write(data)
  }

  /** Send an execute request without waiting; returns its id. */
  request(code: string, options: ExecuteOptions = {}): string {
    const id = options.id ?? `r${++requestSeq}`
    const message: Record<string, unknown> = {
      id,
      code,
      silent: options.silent ?? false,
      storeHistory: options.storeHistory ?? true
    }
    if (options.cwd !== undefined) message.cwd = options.cwd
    if (options.env !== undefined) message.env = options.env
    this.send(message)
    return id
  }

  /** Run one cell and collect its frames up to and including `done`. */
  async execute(code: string, options: ExecuteOptions = {}): Promise<Cell> {
    const id = this.request(code, options)
    return this.collect(id, options.timeoutMs)
  }

  /** Wait for the `done` of request id and summarize its frames. */
  async collect(id: string, timeoutMs = 20_000): Promise<Cell> {
    const done = await this.waitFor((f) => f.type === "done" && f.id === id, timeoutMs)
    return summarize(id, this.framesOf(id), done)
  }

  /** Every frame received so far for request id. */
  framesOf(id: string): Array<Frame> {
    return this.frames.filter((f) => f.id === id)
  }

  /** Resolve with the first frame (from index `from` on) that satisfies predicate. */
  waitFor(predicate: (frame: Frame) => boolean, timeoutMs = 20_000, from = 0): Promise<Frame> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = this.frames.slice(from).find(predicate)
        if (found !== undefined) {
          resolve(found)
          return true
        }
        if (this.exitInfo !== undefined) {
          reject(new Error(`runner exited (${JSON.stringify(this.exitInfo)}) before the frame arrived; stderr: ${this.rawStderr}`))
          return true
        }
        return false
      }
      if (check()) return
      const listener = (): void => {
        if (check()) cleanup()
      }
      const timer = setTimeout(() => {
        cleanup()
        reject(new Error(`timed out after ${timeoutMs} ms; last frames: ${JSON.stringify(this.frames.slice(-5))}`))
      }, timeoutMs)
      const cleanup = (): void => {
        clearTimeout(timer)
        this.listeners.delete(listener)
      }
      this.listeners.add(listener)
    })
  }

  /** Resolve once the runner printed a stdout frame containing text (for request id, if given). */
  waitForStdout(text: string, id?: string, timeoutMs = 20_000): Promise<Frame> {
    return this.waitFor(
      (f) => f.type === "stdout" && (id === undefined || f.id === id) && String(f.data).includes(text),
      timeoutMs
    )
  }

  /** Send SIGINT to the runner process only, as the host does. */
  interrupt(): void {
    process.kill(this.pid, "SIGINT")
  }

  /** Kill the runner and everything it started. */
  kill(): void {
    if (this.hasExited) return
    try {
      process.kill(-this.pid, "SIGKILL")
    } catch {
      try {
        this.proc.kill("SIGKILL")
      } catch {
        // already gone
      }
    }
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener()
  }
}

const summarize = (id: string, frames: Array<Frame>, done: Frame): Cell => {
  const text = (type: string): string =>
    frames.filter((f) => f.type === type).map((f) => String(f.data)).join("")
  const bundles = (type: string): Array<Bundle> =>
    frames.filter((f) => f.type === type).map((f) => f.bundle as Bundle)
  const displays = bundles("display")
  return {
    id,
    frames,
    stdout: text("stdout"),
    stderr: text("stderr"),
    results: bundles("result"),
    displays: displays.filter((b) => !(STATUS_MIME in b)),
    statuses: displays.filter((b) => STATUS_MIME in b).map((b) => b[STATUS_MIME] as Record<string, unknown>),
    error: frames.find((f) => f.type === "error"),
    done
  }
}

/** Kill every runner the harness started that is still alive. */
export const killAll = (): void => {
  for (const kernel of [...live]) kernel.kill()
}

/** Spawn a runner and send the host's init request (empty code, silent) before returning it. */
export const startKernel = async (options: SpawnOptions & { readonly initCwd?: string } = {}): Promise<Kernel> => {
  const kernel = Kernel.spawn(options)
  const cwd = options.initCwd ?? options.cwd
  await kernel.execute("", { silent: true, storeHistory: false, ...(cwd !== undefined ? { cwd } : {}) })
  return kernel
}

/** The text/plain of a cell's single result. */
export const plainResult = (cell: Cell): string | undefined => cell.results[0]?.["text/plain"] as string | undefined

/** Sleep for ms milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
