/**
 * Drives a runner standalone for the integration suites: spawns it the way the host does
 * (runner/python/runner.py on stdin/stdout, runner/js/runner.mjs and runner/ruby/runner.rb with the
 * protocol on fd 3), writes NDJSON requests, parses every frame it sends (flagging any line
 * that is not valid UTF-8 JSON, and any frame the protocol schema of src/kernel/Frame.ts does
 * not decode), answers bridge calls when told how, and collects one cell's frames until its
 * `done`.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import path from "node:path"
import type { Readable, Writable } from "node:stream"
import { fileURLToPath } from "node:url"
import { Result, Schema } from "effect"
import { RunnerFrame } from "../../src/kernel/Frame.ts"
import { findPython } from "../support/python.ts"

const RUNNER_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../runner")
export const RUNNER_PATH = path.join(RUNNER_DIR, "python", "runner.py")
export const NODE_RUNNER_PATH = path.join(RUNNER_DIR, "js", "runner.mjs")
export const RUBY_RUNNER_PATH = path.join(RUNNER_DIR, "ruby", "runner.rb")

/** How to start one kind of runner standalone, as the host does. */
export interface RunnerSpec {
  /** The language as the tool names it: "py", "js", "rb". */
  readonly language: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  /** "stdio": requests on stdin, frames on stdout; "fd3": both on a socket at fd 3, stdin ignored. */
  readonly channel: "stdio" | "fd3"
  readonly env: Record<string, string>
  /** The prelude the host sends as one silent request after init; undefined when the runner loads its own. */
  readonly preludePath: string | undefined
}

/** The Python runner: `<python> -u runner.py`, the protocol on stdin/stdout; undefined without Python. */
export const pythonRunner = (python: string | undefined = findPython()): RunnerSpec | undefined =>
  python === undefined ? undefined : {
    language: "py",
    command: python,
    args: ["-u", RUNNER_PATH],
    channel: "stdio",
    env: { PYTHONIOENCODING: "utf-8", PYTHONUNBUFFERED: "1" },
    preludePath: path.join(RUNNER_DIR, "python", "prelude.py")
  }

/** The Node runner: `node runner.mjs` with the protocol on fd 3; it imports its prelude itself. */
export const nodeRunner = (): RunnerSpec => ({
  language: "js",
  command: process.execPath,
  args: [NODE_RUNNER_PATH],
  channel: "fd3",
  env: {},
  preludePath: undefined
})

let rubyCache: string | undefined | null = null

/** The `ruby` on PATH (or `VEYYON_TEST_RUBY`) when it runs, else undefined. */
export const findRuby = (): string | undefined => {
  if (rubyCache === null) {
    rubyCache = undefined
    for (const candidate of [process.env.VEYYON_TEST_RUBY, "ruby"]) {
      if (candidate === undefined || candidate === "") continue
      try {
        execFileSync(candidate, ["-e", "exit 0"], { stdio: "ignore", timeout: 60_000 })
        rubyCache = candidate
        break
      } catch {
        // not this one
      }
    }
  }
  return rubyCache
}

/** The Ruby runner: `ruby runner.rb` with the protocol on fd 3, prelude.rb sent after init; undefined without Ruby. */
export const rubyRunner = (ruby: string | undefined = findRuby()): RunnerSpec | undefined =>
  ruby === undefined ? undefined : {
    language: "rb",
    command: ruby,
    args: [RUBY_RUNNER_PATH],
    channel: "fd3",
    env: {},
    preludePath: path.join(RUNNER_DIR, "ruby", "prelude.rb")
  }

const parseJsonLine = Schema.decodeUnknownResult(Schema.fromJsonString(Schema.Unknown))
/** Runner frames as they travel: the schema's encoded side, so a frame decodes to the plain object sent, defaults not filled in. */
const decodeWireFrame = Schema.decodeUnknownResult(Schema.toEncoded(RunnerFrame), { onExcessProperty: "error" })

/** One line from a runner: a frame the protocol schema decodes, JSON it rejects (with why), or not JSON at all. */
export type DecodedLine =
  | { readonly _tag: "Frame"; readonly frame: Frame }
  | { readonly _tag: "NotAFrame"; readonly value: unknown; readonly problem: string }
  | { readonly _tag: "NotJson" }

/** Decodes one line with the protocol schema of src/kernel/Frame.ts, extra fields refused. */
export const decodeFrameLine = (line: string): DecodedLine => {
  const json = parseJsonLine(line)
  if (Result.isFailure(json)) return { _tag: "NotJson" }
  const frame = decodeWireFrame(json.success)
  return Result.isSuccess(frame)
    ? { _tag: "Frame", frame: frame.success as Frame }
    : { _tag: "NotAFrame", value: json.success, problem: frame.failure.message }
}

/** Why line is not a runner frame by the protocol schema, or undefined when it is one. */
export const frameSchemaProblem = (line: string): string | undefined => {
  const decoded = decodeFrameLine(line)
  return decoded._tag === "Frame" ? undefined : decoded._tag === "NotJson" ? "not JSON" : decoded.problem
}

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
  /** The runner to start; the Python runner (with `python`, when given) by default. */
  readonly runner?: RunnerSpec
  readonly python?: string
  readonly cwd?: string
  readonly env?: Record<string, string>
}

/** The answer to one bridge call: a value, or an error the runner raises in the cell. */
export type BridgeAnswer =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly error: { readonly name: string; readonly message: string } }

export const STATUS_MIME = "application/x-veyyon-status"

const live = new Set<Kernel>()
let requestSeq = 0

/** A running runner process and every frame it has sent so far. */
export class Kernel {
  readonly frames: Array<Frame> = []
  /** Every line that is not a frame by the protocol schema: not UTF-8, not JSON, or JSON the schema rejects. */
  readonly badLines: Array<string> = []
  /** Each JSON line the protocol schema rejects, with the schema's complaint (kept in frames as sent, too). */
  readonly schemaErrors: Array<string> = []
  /** The id of every request sent with send() or request(). */
  readonly sentIds = new Set<string>()
  rawStderr = ""
  /** What reached the process's fd 1 when frames travel on fd 3 (nothing should). */
  rawStdout = ""
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  private pending = Buffer.alloc(0)
  private listeners = new Set<() => void>()
  private exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined
  private bridgeHandler: ((frame: Frame) => BridgeAnswer | undefined) | undefined

  private constructor(readonly proc: ChildProcess, readonly runner: RunnerSpec, private readonly input: Writable) {
    const decoder = new TextDecoder("utf-8", { fatal: true })
    const channel = (runner.channel === "fd3" ? proc.stdio[3] : proc.stdout) as Readable
    channel.on("data", (chunk: Buffer) => {
      this.pending = Buffer.concat([this.pending, chunk])
      let newline = this.pending.indexOf(0x0a)
      while (newline !== -1) {
        const line = this.pending.subarray(0, newline)
        this.pending = this.pending.subarray(newline + 1)
        this.receive(line, decoder)
        newline = this.pending.indexOf(0x0a)
      }
      this.notify()
    })
    channel.on("error", () => undefined)
    if (runner.channel === "fd3") {
      proc.stdout!.on("data", (chunk: Buffer) => {
        this.rawStdout += chunk.toString("utf8")
      })
    }
    proc.stderr!.on("data", (chunk: Buffer) => {
      this.rawStderr += chunk.toString("utf8")
    })
    input.on("error", () => undefined)
    this.exited = new Promise((resolve) => {
      proc.on("exit", (code, signal) => {
        this.exitInfo = { code, signal }
        live.delete(this)
        this.notify()
        resolve({ code, signal })
      })
    })
  }

  private receive(line: Buffer, decoder: { decode: (input: Uint8Array) => string }): void {
    let text: string
    try {
      text = decoder.decode(line)
    } catch {
      this.badLines.push(line.toString("latin1").slice(0, 500))
      return
    }
    const decoded = decodeFrameLine(text)
    if (decoded._tag === "NotJson") {
      this.badLines.push(text.slice(0, 500))
      return
    }
    // A line the schema rejects is still kept as sent, so the test gets on and then fails on schemaErrors.
    const frame = decoded._tag === "Frame" ? decoded.frame : decoded.value as Frame
    if (decoded._tag === "NotAFrame") {
      this.schemaErrors.push(`${text.slice(0, 300)}\n${decoded.problem}`)
      this.badLines.push(text.slice(0, 500))
    }
    this.frames.push(frame)
    if (frame.type === "bridge" && this.bridgeHandler !== undefined) {
      const answer = this.bridgeHandler(frame)
      if (answer !== undefined) this.send({ type: "bridge_result", callId: frame.callId, ...answer })
    }
  }

  /** Answer every bridge call from now on with handler's answer (undefined: leave it unanswered). */
  answerBridge(handler: ((frame: Frame) => BridgeAnswer | undefined) | undefined): void {
    this.bridgeHandler = handler
  }

  /** Spawn the runner as the host does, in its own process group. */
  static spawn(options: SpawnOptions = {}): Kernel {
    const runner = options.runner ?? pythonRunner(options.python)
    if (runner === undefined) throw new Error("no Python interpreter found")
    const proc = spawn(runner.command, [...runner.args], {
      cwd: options.cwd ?? process.cwd(),
      env: { ...process.env, ...runner.env, ...options.env },
      stdio: runner.channel === "fd3" ? ["ignore", "pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe"],
      detached: true
    })
    const input = (runner.channel === "fd3" ? proc.stdio[3] : proc.stdin) as Writable
    const kernel = new Kernel(proc, runner, input)
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
    const id = (message as { id?: unknown } | null)?.id
    if (typeof id === "string") this.sentIds.add(id)
    this.sendRaw(JSON.stringify(message) + "\n")
  }

  /** Write raw bytes to the runner's stdin. */
  sendRaw(data: string | Buffer): void {
    this.input.write(data)
  }

  /** Close the runner's input (its end of input), as a host that goes away does. */
  endInput(): void {
    this.input.end()
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
  async collect(id: string, timeoutMs = 60_000): Promise<Cell> {
    const done = await this.waitFor((f) => f.type === "done" && f.id === id, timeoutMs)
    return summarize(id, this.framesOf(id), done)
  }

  /** Every frame received so far for request id. */
  framesOf(id: string): Array<Frame> {
    return this.frames.filter((f) => f.id === id)
  }

  /** Resolve with the first frame (from index `from` on) that satisfies predicate. */
  waitFor(predicate: (frame: Frame) => boolean, timeoutMs = 60_000, from = 0): Promise<Frame> {
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
  waitForStdout(text: string, id?: string, timeoutMs = 60_000): Promise<Frame> {
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

/** The runner's prelude source, sent by the host as one silent request after init (undefined: built in). */
export const preludeSource = (runner: RunnerSpec): string | undefined =>
  runner.preludePath === undefined ? undefined : NodeFs.readFileSync(runner.preludePath, "utf8")

/** Start a runner as the host does: the init request, then its prelude as one silent request. */
export const startWithPrelude = async (runner: RunnerSpec, options: Omit<SpawnOptions, "runner"> = {}): Promise<Kernel> => {
  const kernel = await startKernel({ ...options, runner })
  const prelude = preludeSource(runner)
  if (prelude !== undefined) {
    const cell = await kernel.execute(prelude, { silent: true, storeHistory: false })
    if (cell.done.status !== "ok") throw new Error(`the ${runner.language} prelude failed: ${JSON.stringify(cell.error)}`)
  }
  return kernel
}

/**
 * Answers `kv` bridge calls as the host's store does, on the kv directory `dir`: a set writes
 * `<hex SHA-256 of the key>.json` holding `{"key": key, "value": <the value's JSON text>}`
 * through a temporary file renamed into place; a delete answers whether the key was stored.
 */
export const kvHost = (dir: string) => (frame: Frame): BridgeAnswer | undefined => {
  if (frame.method !== "kv") return undefined
  const params = frame.params as { op: string; key: string; value?: string }
  const file = path.join(dir, NodeCrypto.createHash("sha256").update(params.key, "utf8").digest("hex") + ".json")
  if (params.op === "delete") {
    const existed = NodeFs.existsSync(file)
    NodeFs.rmSync(file, { force: true })
    return { ok: true, value: existed }
  }
  NodeFs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const temp = path.join(dir, `.${path.basename(file)}.${process.pid}-${NodeCrypto.randomBytes(4).toString("hex")}.tmp`)
  NodeFs.writeFileSync(temp, `{"key":${JSON.stringify(params.key)},"value":${params.value}}`, { flag: "wx", mode: 0o600 })
  NodeFs.renameSync(temp, file)
  return { ok: true, value: null }
}

/** The text/plain of a cell's single result. */
export const plainResult = (cell: Cell): string | undefined => cell.results[0]?.["text/plain"] as string | undefined

/** Sleep for ms milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))
