/**
 * The runners' egress forwarder: each runner started standalone, as the host starts it, with
 * VEYYON_EGRESS_SOCKET and VEYYON_EGRESS_PORT naming a real egress proxy and the proxy
 * variables set as the host sets them; cells reach a local HTTP and HTTPS origin (on a veth
 * address the test creates and removes) with the language's ordinary clients, refusals arrive
 * as the proxy's readable 403, curl goes through the forwarder too, and output and SIGINT
 * behave as without it. The output check keeps NODE_USE_ENV_PROXY: on Node 22 undici's
 * experimental-proxy warning is printed with console.error before the runner's first line runs
 * (the host silences it with NODE_OPTIONS; here it is left on), and the console must still
 * write the cells' output as frames afterwards.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeNet from "node:net"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import type { Readable, Writable } from "node:stream"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Result, Scope } from "effect"
import { parseAllowHosts } from "../../src/services/isolation/egress/AllowHosts.ts"
import { type EgressProxy, makeEgressProxy } from "../../src/services/isolation/egress/EgressProxy.ts"
import { EgressResolver } from "../../src/services/isolation/egress/EgressResolver.ts"
import { type OriginCert, type OriginNetwork, type Origins, startOriginNetwork, type TestLink, testLinkUnavailable } from "../support/egressNet.ts"
import { findPython } from "../support/python.ts"
import { skipReason, titled } from "../support/skip.ts"

const RUNNERS = NodePath.resolve(NodePath.dirname(fileURLToPath(import.meta.url)), "../../runner")

const found = (command: string, args: ReadonlyArray<string>): boolean => {
  try {
    execFileSync(command, args, { stdio: "ignore", timeout: 60_000 })
    return true
  } catch {
    return false
  }
}

interface RunnerLaunch {
  readonly language: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly channel: "stdio" | "fd3"
  readonly missing: string | undefined
}

const python = findPython()
const launches: ReadonlyArray<RunnerLaunch> = [
  {
    language: "py",
    command: python ?? "python3",
    args: ["-u", NodePath.join(RUNNERS, "python", "runner.py")],
    channel: "stdio",
    missing: python === undefined ? "no python3 on PATH" : undefined
  },
  { language: "js", command: process.execPath, args: [NodePath.join(RUNNERS, "js", "runner.mjs")], channel: "fd3", missing: undefined },
  {
    language: "rb",
    command: "ruby",
    args: [NodePath.join(RUNNERS, "ruby", "runner.rb")],
    channel: "fd3",
    missing: found("ruby", ["-e", "exit 0"]) ? undefined : "no ruby on PATH (Debian: apt-get install ruby)"
  }
]

const linkMissing = testLinkUnavailable()
const curlMissing = found("curl", ["--version"]) ? undefined : "curl is not installed"

interface Frame {
  readonly type: string
  readonly id?: string
  readonly data?: string
  readonly cancelled?: boolean
  readonly evalue?: string
}

/** A runner process and the frames it sent. */
class Runner {
  readonly frames: Array<Frame> = []
  rawStderr = ""
  private pending = ""
  private waiters = new Set<() => void>()
  private seq = 0

  constructor(readonly proc: ChildProcess, private readonly input: Writable, output: Readable) {
    output.on("data", (chunk: Buffer) => {
      this.pending += chunk.toString("utf8")
      let newline = this.pending.indexOf("\n")
      while (newline !== -1) {
        const line = this.pending.slice(0, newline)
        this.pending = this.pending.slice(newline + 1)
        if (line.trim() !== "") this.frames.push(JSON.parse(line) as Frame)
        newline = this.pending.indexOf("\n")
      }
      for (const wake of this.waiters) wake()
    })
    proc.stderr!.on("data", (chunk: Buffer) => (this.rawStderr += chunk.toString("utf8")))
  }

  static start(launch: RunnerLaunch, env: Record<string, string>): Runner {
    const proc = spawn(launch.command, [...launch.args], {
      env,
      stdio: launch.channel === "fd3" ? ["ignore", "pipe", "pipe", "pipe"] : ["pipe", "pipe", "pipe"]
    })
    const channel = (launch.channel === "fd3" ? proc.stdio[3] : proc.stdout) as Readable & Writable
    if (launch.channel === "fd3") proc.stdout!.resume()
    return new Runner(proc, launch.channel === "fd3" ? channel : proc.stdin!, channel)
  }

  /** Waits until `predicate` holds of the frames (60 s at most). */
  async until(predicate: () => boolean): Promise<void> {
    const deadline = Date.now() + 60_000
    while (!predicate()) {
      if (Date.now() > deadline) throw new Error(`timed out; frames: ${JSON.stringify(this.frames)} stderr: ${this.rawStderr}`)
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake)
          resolve()
        }
        this.waiters.add(wake)
        setTimeout(wake, 200)
      })
    }
  }

  /** Sends one cell; its id. */
  send(code: string): string {
    const id = `egress-${++this.seq}`
    this.input.write(`${JSON.stringify({ type: "execute", id, code, silent: false, storeHistory: true })}\n`)
    return id
  }

  /** Runs one cell to its done; its stdout and stderr text, error value and done frame. */
  async run(code: string): Promise<{ stdout: string; stderr: string; error: string | undefined; done: Frame }> {
    const id = this.send(code)
    await this.until(() => this.frames.some((f) => f.type === "done" && f.id === id))
    const mine = this.frames.filter((f) => f.id === id)
    return {
      stdout: mine.filter((f) => f.type === "stdout").map((f) => f.data).join(""),
      stderr: mine.filter((f) => f.type === "stderr").map((f) => f.data).join(""),
      error: mine.find((f) => f.type === "error")?.evalue,
      done: mine.find((f) => f.type === "done")!
    }
  }

  stop(): void {
    this.proc.kill("SIGKILL")
  }
}

const freePort = (): Promise<number> =>
  new Promise((resolve) => {
    const server = NodeNet.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as NodeNet.AddressInfo
      server.close(() => resolve(port))
    })
  })

/** The environment the host gives a kernel for egress through the forwarder on `port`, trusting the test origin. */
const egressEnv = (socketPath: string, port: number, certFile: string): Record<string, string> => {
  const proxy = `http://127.0.0.1:${port}`
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/root",
    LANG: "C.UTF-8",
    PYTHONIOENCODING: "utf-8",
    VEYYON_EGRESS_SOCKET: socketPath,
    VEYYON_EGRESS_PORT: String(port),
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    ALL_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    all_proxy: proxy,
    NO_PROXY: "localhost,127.0.0.1,::1",
    no_proxy: "localhost,127.0.0.1,::1",
    NODE_USE_ENV_PROXY: "1",
    NODE_EXTRA_CA_CERTS: certFile,
    SSL_CERT_FILE: certFile
  }
}

const cells = (http: string, https: string): Record<string, string> => ({
  py: [
    "import urllib.request, urllib.error",
    `print(urllib.request.urlopen("${http}/py").read().decode())`,
    `print(urllib.request.urlopen("${https}/pys").read().decode())`,
    "try:",
    `    urllib.request.urlopen("http://evil.test/")`,
    "except urllib.error.HTTPError as e:",
    "    print(e.code, e.read().decode())"
  ].join("\n"),
  js: [
    `console.log(await (await fetch("${http}/js")).text())`,
    `console.log(await (await fetch("${https}/jss")).text())`,
    `await new Promise((done) => require("node:http").get("${http}/jsh", (m) => { let t = ""; m.on("data", (d) => (t += d)); m.on("end", () => { console.log(t); done() }) }))`,
    `await new Promise((done) => require("node:http").get("http://evil.test/", (m) => { let t = ""; m.on("data", (d) => (t += d)); m.on("end", () => { console.log(m.statusCode, t); done() }) }))`,
    `console.log("fetch:", await fetch("https://evil.test/").then(() => "answered", (e) => e.cause?.message ?? e.message))`
  ].join("\n"),
  rb: [
    `require "net/http"`,
    `puts Net::HTTP.get(URI("${http}/rb"))`,
    `puts Net::HTTP.get(URI("${https}/rbs"))`,
    `r = Net::HTTP.get_response(URI("http://evil.test/")); puts "#{r.code} #{r.body}"`
  ].join("\n")
})

const spinCells: Record<string, string> = {
  py: `print("spin", flush=True)\nwhile True:\n    pass`,
  js: `console.log("spin"); while (true) {}`,
  rb: `puts "spin"; $stdout.flush; loop {}`
}

let network: OriginNetwork | undefined
let link: TestLink
let cert: OriginCert
let origins: Origins
let proxy: EgressProxy
let scope: Scope.Closeable
const stateDir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "egress-runner-"))

beforeAll(async () => {
  if (linkMissing !== undefined) return
  network = await startOriginNetwork()
  ;({ link, cert, origins } = network)
  const allow = Result.getOrThrow(parseAllowHosts(["origin.test"]))
  scope = await Effect.runPromise(Scope.make())
  proxy = await Effect.runPromise(
    makeEgressProxy({ allow, directory: stateDir }).pipe(
      Effect.provide(EgressResolver.layerTest({ "origin.test": [link.address] })),
      Scope.provide(scope)
    )
  )
})

afterAll(async () => {
  if (scope !== undefined) await Effect.runPromise(Scope.close(scope, Exit.void))
  await network?.close()
  NodeFs.rmSync(stateDir, { recursive: true, force: true })
})

for (const launch of launches) {
  describe.skipIf(linkMissing !== undefined || launch.missing !== undefined)(titled(`${launch.language} runner egress forwarder`, skipReason(linkMissing, launch.missing)), () => {
    let runner: Runner | undefined
    let port = 0

    afterAll(() => runner?.stop())

    it("relays a cell's HTTP and HTTPS requests through the proxy, and its refusal", async () => {
      port = await freePort()
      runner = Runner.start(launch, egressEnv(proxy.socketPath, port, cert.certFile))
      const http = `http://origin.test:${origins.httpPort}`
      const https = `https://origin.test:${origins.httpsPort}`
      const cell = await runner.run(cells(http, https)[launch.language]!)
      expect(cell.error).toBeUndefined()
      const suffix = launch.language
      expect(cell.stdout).toContain(`http GET /${suffix} host=origin.test:${origins.httpPort}`)
      expect(cell.stdout).toContain(`https GET /${suffix}s host=origin.test:${origins.httpsPort}`)
      if (launch.language === "js") expect(cell.stdout).toContain(`http GET /jsh host=origin.test:${origins.httpPort}`)
      expect(cell.stdout).toContain("403 veyyon sandbox egress proxy refused the")
      expect(cell.stdout).toContain("evil.test is not in sandbox.allowHosts")
      if (launch.language === "js") expect(cell.stdout).toMatch(/^fetch: .+$/m)
    })

    it.skipIf(curlMissing !== undefined)(titled("relays curl's CONNECT through the same forwarder", curlMissing), async () => {
      const args = ["-sS", "--max-time", "30", "--proxy", `http://127.0.0.1:${port}`, "--cacert", cert.certFile, `https://origin.test:${origins.httpsPort}/curl`]
      const out = await new Promise<string>((resolve, reject) =>
        execFile("curl", args, { encoding: "utf8" }, (error, stdout, stderr) => (error === null ? resolve(stdout) : reject(new Error(stderr))))
      )
      expect(out).toBe(`https GET /curl host=origin.test:${origins.httpsPort}`)
    })

    it("leaves output, errors and SIGINT as they are, and writes nothing of its own", async () => {
      runner?.stop()
      port = await freePort()
      runner = Runner.start(launch, egressEnv(proxy.socketPath, port, cert.certFile))
      const printed = await runner!.run(launch.language === "py" ? `print("out")\nimport sys; sys.stderr.write("err\\n")` : launch.language === "js" ? `console.log("out"); console.error("err")` : `puts "out"; $stderr.puts "err"`)
      expect(printed.stdout).toBe("out\n")
      expect(printed.stderr).toBe("err\n")
      const id = runner!.send(spinCells[launch.language]!)
      await runner!.until(() => runner!.frames.some((f) => f.id === id && f.type === "stdout"))
      runner!.proc.kill("SIGINT")
      await runner!.until(() => runner!.frames.some((f) => f.id === id && f.type === "done"))
      expect(runner!.frames.find((f) => f.id === id && f.type === "done")?.cancelled).toBe(true)
      const after = await runner!.run(launch.language === "js" ? `console.log(6 * 7)` : launch.language === "py" ? "print(6 * 7)" : "puts 6 * 7")
      expect(after.stdout, JSON.stringify(runner!.frames.slice(-12))).toBe("42\n")
      const startupWarning = /^\(node:\d+\) \[UNDICI-EHPA\] Warning: .*\n\(Use `node --trace-warnings \.\.\.` to show where the warning was created\)\n/
      expect(runner!.rawStderr.replace(startupWarning, "")).toBe("")
    })
  })
}

describe.skipIf(launches[0]!.missing !== undefined)(titled("runner without the egress variables", launches[0]!.missing), () => {
  it("listens on no port", async () => {
    const port = await freePort()
    const runner = Runner.start(launches[0]!, { PATH: process.env.PATH ?? "/usr/bin:/bin", VEYYON_EGRESS_PORT: String(port) })
    try {
      expect((await runner.run("print(1)")).stdout).toBe("1\n")
      const refused = await new Promise<boolean>((resolve) => {
        const socket = NodeNet.connect(port, "127.0.0.1", () => {
          socket.destroy()
          resolve(false)
        })
        socket.on("error", () => resolve(true))
      })
      expect(refused).toBe(true)
    } finally {
      runner.stop()
    }
  })
})
