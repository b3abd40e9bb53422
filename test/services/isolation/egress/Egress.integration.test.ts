/**
 * `sandbox.network: allowlist` end to end: the eval layer with real bubblewrap and real
 * Python, JavaScript and Ruby kernels, whose only way out is their kernel's egress proxy.
 * Destinations are local servers on a veth address the test creates and removes (loopback is
 * refused by design); names resolve through a test resolver given to the layer, which also
 * maps one name to 127.0.0.1. The origin's self-signed certificate is trusted through the
 * variables a kernel inherits (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS) and a read-only path.
 */
import { execFileSync, spawnSync } from "node:child_process"
import * as NodeFs from "node:fs"
import * as NodeHttp from "node:http"
import type * as NodeNet from "node:net"
import * as NodePath from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Exit, ManagedRuntime } from "effect"
import { TracingLive } from "../../../../src/layers/Tracing.ts"
import { evalLayer } from "../../../../src/layers/EvalLive.ts"
import { EgressResolver } from "../../../../src/services/isolation/egress/EgressResolver.ts"
import { EvalTool, type EvalResult } from "../../../../src/services/tool/EvalTool.ts"
import { SessionRecord } from "../../../../src/services/output/SessionRecord.ts"
import type { SettingsInput } from "../../../../src/services/config/Settings.ts"
import { type OriginCert, type OriginNetwork, type Origins, startOriginNetwork, type TestLink, testLinkUnavailable } from "../../../support/egressNet.ts"
import { findPython, integrationEnabled } from "../../../support/python.ts"
import { tempDir } from "../../../support/tempDirs.ts"

const python = findPython()
const bwrapProblem = (): string | undefined => {
  const probe = spawnSync("bwrap", ["--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"], { encoding: "utf8" })
  if (probe.error !== undefined) return `bwrap is not installed (${probe.error.message})`
  return probe.status === 0 ? undefined : `bwrap cannot create namespaces here: ${probe.stderr.trim()}`
}
const rubyMissing = spawnSync("ruby", ["-e", "exit 0"]).status === 0 ? undefined : "ruby is not installed"
const pipMissing = python !== undefined && spawnSync(python, ["-m", "pip", "--version"]).status === 0 ? undefined : "pip is not installed for python3"
const skipReason = !integrationEnabled()
  ? "set VEYYON_PYTHON_INTEGRATION=1"
  : python === undefined
  ? "no python3 on PATH"
  : bwrapProblem() ?? testLinkUnavailable()

const scratch = tempDir("veyyon-egress-e2e-")
const saved = { SSL_CERT_FILE: process.env.SSL_CERT_FILE, NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS, XDG_STATE_HOME: process.env.XDG_STATE_HOME }
let network: OriginNetwork | undefined
let link: TestLink | undefined
let cert: OriginCert | undefined
let origins: Origins | undefined
let index: { readonly server: NodeHttp.Server; readonly port: number } | undefined

/** A PEP 503 index with one tiny pure-Python wheel, `veyyontiny`, built by the test. */
const startIndex = async (address: string): Promise<{ readonly server: NodeHttp.Server; readonly port: number }> => {
  const wheelName = "veyyontiny-0.1-py3-none-any.whl"
  const wheel = NodePath.join(scratch, wheelName)
  execFileSync(python!, ["-c", [
    "import sys, zipfile",
    "files = {",
    "  'veyyontiny/__init__.py': 'GREETING = \"hello from the index\"\\n',",
    "  'veyyontiny-0.1.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: veyyontiny\\nVersion: 0.1\\n',",
    "  'veyyontiny-0.1.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',",
    "}",
    "with zipfile.ZipFile(sys.argv[1], 'w') as z:",
    "  for name, text in files.items(): z.writestr(name, text)",
    "  z.writestr('veyyontiny-0.1.dist-info/RECORD', ''.join(n + ',,\\n' for n in files) + 'veyyontiny-0.1.dist-info/RECORD,,\\n')"
  ].join("\n"), wheel])
  const bytes = NodeFs.readFileSync(wheel)
  const server = NodeHttp.createServer((req, res) => {
    if (req.url === "/simple/veyyontiny/") {
      res.writeHead(200, { "content-type": "text/html" })
      return void res.end(`<html><body><a href="/files/${wheelName}">${wheelName}</a></body></html>`)
    }
    if (req.url === `/files/${wheelName}`) {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": bytes.length })
      return void res.end(bytes)
    }
    res.writeHead(404)
    res.end()
  })
  const port = await new Promise<number>((resolve) => server.listen(0, address, () => resolve((server.address() as NodeNet.AddressInfo).port)))
  return { server, port }
}

beforeAll(async () => {
  if (skipReason !== undefined) return
  network = await startOriginNetwork()
  ;({ link, cert, origins } = network)
  index = await startIndex(link.address)
  process.env.SSL_CERT_FILE = cert.certFile
  process.env.NODE_EXTRA_CA_CERTS = cert.certFile
  process.env.XDG_STATE_HOME = NodePath.join(scratch, "state")
})

afterAll(async () => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
  if (index !== undefined) await new Promise<void>((resolve) => index!.server.close(() => resolve()))
  await network?.close()
  NodeFs.rmSync(scratch, { recursive: true, force: true })
})

const ALLOW = ["origin.test", "loop.test", "index.test"]

const runtimeWith = (sandbox: NonNullable<SettingsInput["sandbox"]>) =>
  ManagedRuntime.make(evalLayer({
    env: false,
    settings: {
      artifactsDir: NodePath.join(scratch, "artifacts"),
      python: { interpreter: python! },
      eval: { rb: rubyMissing === undefined },
      sandbox: { ...sandbox, readPaths: [cert!.dir] }
    },
    egressResolver: EgressResolver.layerTest({ "origin.test": [link!.address], "index.test": [link!.address], "loop.test": ["127.0.0.1"] })
  }))

type Runtime = ReturnType<typeof runtimeWith>

const runIn = (runtime: Runtime, cwd: string, language: string, code: string, sessionId = "egress"): Promise<EvalResult> =>
  runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run({ language, code, timeout: 120 }, { sessionId, cwd })))

const egressOf = (result: EvalResult) =>
  result.outputs.flatMap((output) => output._tag === "Status" && output.op === "egress" ? [output.fields] : [])

const stderrOf = (result: EvalResult) => result.outputs.flatMap((output) => output._tag === "Stderr" ? [output.text] : []).join("")

const cells = (http: string, https: string): Record<string, string> => ({
  py: [
    "import urllib.request, urllib.error",
    `print(urllib.request.urlopen("${http}/py").read().decode())`,
    `print(urllib.request.urlopen("${https}/pys").read().decode())`
  ].join("\n"),
  js: [
    `console.log(await (await fetch("${http}/js")).text())`,
    `console.log(await (await fetch("${https}/jss")).text())`
  ].join("\n"),
  rb: [
    `require "net/http"`,
    `puts Net::HTTP.get(URI("${http}/rb"))`,
    `puts Net::HTTP.get(URI("${https}/rbs"))`
  ].join("\n")
})

describe.skipIf(skipReason !== undefined)(`sandbox.network allowlist${skipReason === undefined ? "" : ` (skipped: ${skipReason})`}`, () => {
  let runtime: Runtime
  let cwd: string
  beforeAll(() => {
    runtime = runtimeWith({ mode: "required", network: "allowlist", allowHosts: ALLOW })
    cwd = NodeFs.mkdtempSync(NodePath.join(scratch, "cwd-"))
  })
  afterAll(() => runtime?.dispose())

  for (const language of ["py", "js", "rb"]) {
    it.skipIf(language === "rb" && rubyMissing !== undefined)(`a ${language} cell reaches an allowed host over HTTP and HTTPS${language === "rb" && rubyMissing ? ` (skipped: ${rubyMissing})` : ""}`, async () => {
      const http = `http://origin.test:${origins!.httpPort}`
      const https = `https://origin.test:${origins!.httpsPort}`
      const result = await runIn(runtime, cwd, language, cells(http, https)[language]!)
      expect(result.status, result.text).toBe("ok")
      expect(result.text).toContain(`http GET /${language} host=origin.test:${origins!.httpPort}`)
      expect(result.text).toContain(`https GET /${language}s host=origin.test:${origins!.httpsPort}`)
      expect(egressOf(result)).toContainEqual(expect.objectContaining({ outcome: "allowed", host: "origin.test", port: origins!.httpsPort, via: "connect" }))
    })
  }

  it("refuses an unlisted host, an IP literal and a name resolving to loopback, with a line naming the host and the setting", async () => {
    const port = origins!.httpPort
    const result = await runIn(runtime, cwd, "py", [
      "import urllib.request, urllib.error",
      `for url in ["http://evil.test/", "http://${link!.address}:${port}/", "http://loop.test:${port}/", "https://evil.test/"]:`,
      "    try:",
      "        urllib.request.urlopen(url)",
      "        print('GOT', url)",
      "    except urllib.error.HTTPError as e:",
      "        print(e.code, url)",
      "    except urllib.error.URLError as e:",
      "        print('refused', url, e.reason)"
    ].join("\n"))
    expect(result.text).not.toContain("GOT")
    expect(result.text).toContain("403 http://evil.test/")
    const stderr = stderrOf(result)
    expect(stderr).toContain("refused the HTTP request to evil.test:80: evil.test is not in sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS).\nTo allow it, add evil.test to sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS).")
    expect(stderr).toContain(`refused the HTTP request to ${link!.address}:${port}`)
    expect(stderr).toContain("IP addresses are never allowed")
    expect(stderr).toContain("loop.test resolves to 127.0.0.1, a loopback address")
    expect(stderr).toContain("refused the CONNECT to evil.test:443")
    expect(egressOf(result).map((event) => `${event.outcome} ${event.host} ${event.reason}`)).toEqual([
      "refused evil.test not-listed",
      `refused ${link!.address} ip-literal`,
      "refused loop.test forbidden-address",
      "refused evil.test not-listed"
    ])
    expect(origins!.seen.filter((seen) => seen.startsWith("http GET / "))).toEqual([])
  })

  it("keeps every allowed and refused destination in the session record, the exported notebook and the cell's span", async () => {
    const session = "egress-record"
    const exporter = new InMemorySpanExporter()
    const code = [
      "import urllib.request, urllib.error",
      `urllib.request.urlopen("http://origin.test:${origins!.httpPort}/rec").read()`,
      "try:\n    urllib.request.urlopen('http://evil.test/')\nexcept urllib.error.HTTPError:\n    pass"
    ].join("\n")
    const spans = await runtime.runPromise(
      Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code, timeout: 120 }, { sessionId: session, cwd })).pipe(
        Effect.map(() => exporter.getFinishedSpans()),
        Effect.provide(TracingLive({ spanProcessor: new SimpleSpanProcessor(exporter) }))
      )
    )
    const span = spans.find((finished) => finished.name === "eval.run")
    expect(span?.attributes["eval.egress.allowed"]).toEqual([`origin.test:${origins!.httpPort}`])
    expect(span?.attributes["eval.egress.refused"]).toEqual(["evil.test:80"])
    expect(span?.attributes).not.toHaveProperty("eval.egress.failed")
    const cells = await runtime.runPromise(Effect.flatMap(SessionRecord, (record) => record.cells(session)))
    expect(cells.at(-1)?.egress).toEqual([
      { outcome: "allowed", host: "origin.test", port: origins!.httpPort, via: "http" },
      { outcome: "refused", host: "evil.test", port: 80, via: "http", reason: "not-listed" }
    ])
    const notebook = await runtime.runPromise(Effect.flatMap(SessionRecord, (record) => record.notebook(session)))
    const last = (notebook.cells as Array<{ metadata: { veyyon?: { egress?: unknown } } }>).at(-1)
    expect(last?.metadata.veyyon?.egress).toEqual(cells.at(-1)?.egress)
  })

  it.skipIf(pipMissing !== undefined)(`pip installs a package from an allowed local index inside the sandbox${pipMissing ? ` (skipped: ${pipMissing})` : ""}`, async () => {
    const result = await runIn(runtime, cwd, "py", [
      "import subprocess, sys",
      `r = subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir", "--target", "./pkgs", "--index-url", "http://index.test:${index!.port}/simple/", "--trusted-host", "index.test", "veyyontiny"], capture_output=True, text=True)`,
      "print(r.returncode, r.stdout[-400:], r.stderr[-800:])",
      "sys.path.insert(0, './pkgs')",
      "import veyyontiny",
      "print(veyyontiny.GREETING)"
    ].join("\n"))
    expect(result.status, result.text).toBe("ok")
    expect(result.text).toContain("hello from the index")
    expect(egressOf(result)).toContainEqual(expect.objectContaining({ outcome: "allowed", host: "index.test", port: index!.port }))
  })

  it("ends each kernel's proxy with the kernel: its socket directory is gone after the runtime is disposed", async () => {
    const dirs = () => NodeFs.readdirSync(NodePath.join(scratch, "state", "veyyon", "egress"))
    const local = runtimeWith({ mode: "required", network: "allowlist", allowHosts: ALLOW })
    const before = new Set(dirs())
    await runIn(local, cwd, "py", "print(1)", "egress-lifetime")
    const during = dirs().filter((name) => !before.has(name))
    expect(during).toHaveLength(1)
    expect(NodeFs.statSync(NodePath.join(scratch, "state", "veyyon", "egress", during[0]!)).mode & 0o777).toBe(0o700)
    await local.dispose()
    expect(dirs().filter((name) => !before.has(name))).toEqual([])
  })
})

describe.skipIf(skipReason !== undefined)(`sandbox.network none and allowlist without a sandbox${skipReason === undefined ? "" : ` (skipped: ${skipReason})`}`, () => {
  it("with network none nothing gets out: no proxy variables, no forwarder, no route", async () => {
    const runtime = runtimeWith({ mode: "required", network: "none" })
    try {
      const cwd = NodeFs.mkdtempSync(NodePath.join(scratch, "none-"))
      const result = await runIn(runtime, cwd, "py", [
        "import os, socket",
        "print('proxy', os.environ.get('HTTPS_PROXY'), os.environ.get('VEYYON_EGRESS_SOCKET'))",
        `for host, port in [("${link!.address}", ${origins!.httpPort}), ("127.0.0.1", 3128)]:`,
        "    try:",
        "        socket.create_connection((host, port), timeout=5)",
        "        print('connected', host)",
        "    except OSError as e:",
        "        print('no way out', host, type(e).__name__)"
      ].join("\n"))
      expect(result.text).toContain("proxy None None")
      expect(result.text).toContain(`no way out ${link!.address}`)
      expect(result.text).toContain("no way out 127.0.0.1")
      expect(result.text).not.toContain("connected")
    } finally {
      await runtime.dispose()
    }
  })

  it("allowlist refuses to start a kernel when the sandbox cannot run, in auto mode too", async () => {
    const runtime = runtimeWith({ mode: "auto", network: "allowlist", allowHosts: ALLOW })
    const path = process.env.PATH
    process.env.PATH = "/nonexistent" // the sandbox looks for bwrap on the PATH it is built with
    try {
      const cwd = NodeFs.mkdtempSync(NodePath.join(scratch, "nobwrap-"))
      const exit = await runtime.runPromiseExit(Effect.flatMap(EvalTool, (tool) => tool.run({ language: "py", code: "print('ran open')" }, { sessionId: "open", cwd })))
      expect(Exit.isFailure(exit)).toBe(true)
      const failure = String(Exit.isFailure(exit) ? exit.cause : "")
      expect(failure).toContain("sandbox.network is allowlist (VEYYON_SANDBOX_NETWORK=allowlist), which needs the sandbox")
      expect(failure).toContain("bwrap (bubblewrap) is not installed")
    } finally {
      process.env.PATH = path
      await runtime.dispose()
    }
  })
})
