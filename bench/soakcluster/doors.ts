/**
 * The soak's MCP doors: `veyyon mcp --http --cluster` processes as users start them, each
 * with its whole stderr kept (for the log scan) and its URL read from its start line.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { cliEntry } from "../../test/cli/support.ts"

/** One running door. */
export interface Door {
  readonly url: URL
  readonly child: ChildProcess
  /** Everything the door wrote to stderr so far. */
  readonly log: () => string
  /** Resolves with the exit code or signal once the door has exited. */
  readonly exited: Promise<number | string>
}

/** Starts a door on a free port with `env`, its cells running in `cwd` on the runners; resolves once it serves. */
export const startDoor = (env: Readonly<Record<string, string>>, cwd: string): Promise<Door> =>
  new Promise((resolve, reject) => {
    const child = spawn(cliEntry.command, [...cliEntry.args, "mcp", "--http", "--cluster", "--port", "0"], {
      env: { ...env, VEYYON_CLUSTER_CWD: "caller" },
      cwd,
      stdio: ["ignore", "ignore", "pipe"]
    })
    let log = ""
    let served = false
    const exited = new Promise<number | string>((done) => child.once("exit", (code, signal) => done(code ?? signal ?? "?")))
    child.stderr?.on("data", (chunk: Buffer) => {
      log += chunk.toString("utf8")
      const match = !served && log.match(/serving MCP \(streamable HTTP\) at (http:\S+)/)
      if (match) {
        served = true
        resolve({ url: new URL(match[1]!), child, log: () => log, exited })
      }
    })
    void exited.then((code) => {
      if (!served) reject(new Error(`the door exited (${code}) before serving:\n${log}`))
    })
  })
