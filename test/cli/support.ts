/**
 * Spawning `veyyon` as built (`node bin/veyyon.mjs …`; `test/globalSetup.ts` builds `dist/`
 * first, so no child compiles the sources) for end-to-end tests, with the test interpreter, a temporary artifacts directory, and every child
 * tracked so a test run never leaves one behind.
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { findPython } from "../support/python.ts"

/** The package root. */
export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

/** The command and leading arguments that run the CLI as users do: `bin/veyyon.mjs` over `dist/`, which the tests' global setup builds. */
export const cliEntry: { readonly command: string; readonly args: ReadonlyArray<string> } = {
  command: process.execPath,
  args: [path.join(repoRoot, "bin", "veyyon.mjs")]
}

/** A fresh temporary directory, removed when the test process exits. */
export { tempDir } from "../support/tempDirs.ts"

/** The environment children run with: the test interpreter (no shim start-up), artifacts in `artifactsDir`, no colour. */
export const childEnv = (artifactsDir: string, extra: Readonly<Record<string, string>> = {}): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value
  const python = findPython()
  return {
    ...env,
    ...(python === undefined ? {} : { VEYYON_PYTHON_INTERPRETER: python }),
    VEYYON_ARTIFACTS_DIR: artifactsDir,
    NO_COLOR: "1",
    ...extra
  }
}

/** What a finished child did. */
export interface CliRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** How to run one child. */
export interface CliRunOptions {
  readonly env: Record<string, string>
  readonly input?: string
  readonly cwd?: string
  readonly timeoutMs?: number
  /** The executable and leading arguments (default: the built CLI). */
  readonly entry?: { readonly command: string; readonly args: ReadonlyArray<string> }
}

const children = new Set<ChildProcess>()

/** How many children run at once: each is mostly CPU-bound start-up, and the machine may have two cores. */
export const MAX_CONCURRENT_CHILDREN = 3

let running = 0
const waiting: Array<() => void> = []

const withSlot = async <A>(task: () => Promise<A>): Promise<A> => {
  if (running >= MAX_CONCURRENT_CHILDREN) await new Promise<void>((resolve) => waiting.push(resolve))
  running++
  try {
    return await task()
  } finally {
    running--
    waiting.shift()?.()
  }
}

/** Runs `veyyon <args>` to completion; killed (SIGTERM, then SIGKILL) if it outlives `timeoutMs` once started. */
export const runCli = (args: ReadonlyArray<string>, options: CliRunOptions): Promise<CliRun> =>
  withSlot(() => spawnCli(args, options))

const spawnCli = (args: ReadonlyArray<string>, options: CliRunOptions): Promise<CliRun> =>
  new Promise((resolve, reject) => {
    const entry = options.entry ?? cliEntry
    const child = spawn(entry.command, [...entry.args, ...args], {
      cwd: options.cwd ?? repoRoot,
      env: options.env,
      stdio: ["pipe", "pipe", "pipe"]
    })
    children.add(child)
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    const timer = setTimeout(() => stop(child), options.timeoutMs ?? 240_000)
    child.once("error", (error) => {
      clearTimeout(timer)
      children.delete(child)
      reject(error)
    })
    child.once("close", (code, signal) => {
      clearTimeout(timer)
      children.delete(child)
      resolve({ code, signal, stdout, stderr })
    })
    child.stdin.on("error", () => {})
    child.stdin.end(options.input ?? "")
  })

/** Stops a child: SIGTERM (it shuts its kernels down), then SIGKILL if it lingers. */
export const stop = (child: ChildProcess): void => {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill("SIGTERM")
  setTimeout(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }, 3_000).unref()
}

/** Stops every child still running (for afterAll). */
export const stopAll = (): void => {
  for (const child of children) stop(child)
}

/** Whether a process with this pid is still alive. */
export const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** Waits until the process is gone, up to `timeoutMs`; answers whether it is. */
export const waitForExit = async (pid: number, timeoutMs = 5_000): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return true
}

/** Python that builds a small RGB PNG with zlib and struct and displays it (no image libraries). */
export const PNG_CELL = [
  "import base64, struct, zlib",
  "def _chunk(kind, data):",
  "    body = kind + data",
  "    return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body) & 0xFFFFFFFF)",
  "_rows = b''.join(b'\\x00' + b''.join(bytes([x * 60, y * 60, 128]) for x in range(4)) for y in range(4))",
  "_png = b'\\x89PNG\\r\\n\\x1a\\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', 4, 4, 8, 2, 0, 0, 0)) + _chunk(b'IDAT', zlib.compress(_rows)) + _chunk(b'IEND', b'')",
  "display({'image/png': base64.b64encode(_png).decode('ascii')}, raw=True)"
].join("\n")

/** The first bytes of every PNG file. */
export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
