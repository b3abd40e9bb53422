/**
 * The package as users install it: `npm pack` of this checkout, installed with its peers
 * from the registry into a fresh app (a private HOME and npm cache, so nothing of the
 * machine's own is read or written but its npm settings), then used through each door:
 * `veyyon eval` cells in every language, kv shared by two processes of one session, the
 * README's embedding example type-checked by strict TypeScript against the installed
 * types and run, a CommonJS app, and `veyyon mcp` driven by the official MCP client.
 * One app serves every test of the file; it is removed, and every process it started
 * killed, when the file ends, passed or not.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { listRunnerFiles } from "../../src/services/storage/RunnerCache.ts"
import { type CliRun, runCli, stopAll } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { tempDir } from "../support/tempDirs.ts"
import { findRuby } from "../runner/harness.ts"

const root = path.resolve(import.meta.dirname, "..", "..")
const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { name: string; version: string }

/** A liveness bound for one step (an install from the registry takes about 10 s when quiet). */
const LIVENESS_MS = 300_000

const scratch = tempDir("veyyon-tarball-")
const home = path.join(scratch, "home")
const app = path.join(scratch, "app")
const installed = path.join(app, "node_modules", manifest.name)
const veyyonBin = path.join(app, "node_modules", ".bin", "veyyon")

/** The npm settings file of the user running the tests (the registry and its auth), read but never written. */
const userNpmrc = process.env.npm_config_userconfig ?? path.join(os.homedir(), ".npmrc")

/**
 * The environment of everything the test runs: this process's, without npm's variables (an
 * `npm test` run exports its prefix and cache) or the project's settings (`VEYYON_*`,
 * `XDG_*`), with a private HOME and npm cache, and this Node first on PATH.
 */
const env: Record<string, string> = (() => {
  const kept = Object.entries(process.env).filter(([key, value]) =>
    value !== undefined && !/^(npm_|VEYYON_|XDG_)/i.test(key)
  ) as Array<[string, string]>
  return {
    ...Object.fromEntries(kept),
    HOME: home,
    PATH: [path.dirname(process.execPath), process.env.PATH ?? ""].join(path.delimiter),
    NO_COLOR: "1",
    npm_config_cache: path.join(scratch, "npm-cache"),
    npm_config_update_notifier: "false",
    npm_config_audit: "false",
    npm_config_fund: "false",
    ...(fs.existsSync(userNpmrc) ? { npm_config_userconfig: userNpmrc } : {})
  }
})()

/** npm as the run's own (`npm test` names its CLI), or the one on PATH. */
const npmEntry = (): { readonly command: string; readonly args: ReadonlyArray<string> } => {
  const execPath = process.env.npm_execpath
  return execPath !== undefined && /\.c?js$/.test(execPath)
    ? { command: process.execPath, args: [execPath] }
    : { command: "npm", args: [] }
}

/** Runs a command to completion in `cwd`, failing with its output unless it exits 0. */
const run = async (entry: { readonly command: string; readonly args: ReadonlyArray<string> }, args: ReadonlyArray<string>, cwd: string): Promise<CliRun> => {
  const result = await runCli(args, { entry, cwd, env, timeoutMs: LIVENESS_MS })
  if (result.code !== 0) throw new Error(`${[entry.command, ...entry.args, ...args].join(" ")} exited ${result.code ?? result.signal}:\n${result.stdout}\n${result.stderr}`)
  return result
}

const node = { command: process.execPath, args: [] }
const npm = (args: ReadonlyArray<string>, cwd: string) => run(npmEntry(), args, cwd)
const veyyon = (args: ReadonlyArray<string>) => runCli(args, { entry: { command: veyyonBin, args: [] }, cwd: app, env, timeoutMs: LIVENESS_MS })

/** The pids of processes whose command line names the app's directory (the test's own children and their kernels). */
const appProcesses = (): Array<number> =>
  fs.readdirSync("/proc").filter((name) => /^\d+$/.test(name)).flatMap((name) => {
    try {
      return fs.readFileSync(`/proc/${name}/cmdline`, "utf8").includes(scratch) ? [Number(name)] : []
    } catch {
      return []
    }
  })

/** A strictly typed app's TypeScript settings, as `tsc --init` users with Node ESM have them. */
const TSCONFIG = {
  compilerOptions: { module: "nodenext", target: "es2022", strict: true, types: ["node"], outDir: "out" },
  files: ["embed.ts", "toolkit.ts", "require.cts", "types.ts"]
}

/** The same cells as the example, from a CommonJS module: `require` of the package (Node's require of ES modules). */
const REQUIRE_APP = `import effect = require("effect")
import veyyon = require("veyyon-eval")

const { Effect } = effect
const program = Effect.gen(function*() {
  const tool = yield* veyyon.EvalTool
  const result = yield* tool.run({ language: "js", code: "6 * 7" }, { sessionId: "cjs", cwd: process.cwd() })
  console.log(result.text)
})
Effect.runPromise(program.pipe(Effect.provide(veyyon.EvalLive)))
`

/** Fails to compile if the package's types are missing or \`any\`: each line must be a type error. */
const TYPES_PROBE = `import { EvalLive, EvalTool } from "veyyon-eval"
import { evalClusterLayer } from "veyyon-eval/cluster"

// @ts-expect-error EvalLive is a Layer
export const layer: number = EvalLive
// @ts-expect-error EvalTool is a service tag
export const tag: string = EvalTool
// @ts-expect-error evalClusterLayer takes options
export const cluster: string = evalClusterLayer
`

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(titled("the package installed from its tarball", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: LIVENESS_MS }, () => {
  beforeAll(async () => {
    fs.mkdirSync(home, { mode: 0o700 })
    fs.mkdirSync(app)
    const packed = JSON.parse((await npm(["pack", "--ignore-scripts", "--json", "--pack-destination", scratch], root)).stdout) as Array<{ filename: string }>
    fs.writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "veyyon-tarball-app", private: true, type: "module" }, null, 2))
    await npm(["install", path.join(scratch, packed[0]!.filename), "effect@^4", "@types/node@22"], app)
  }, LIVENESS_MS * 2)

  afterAll(async () => {
    stopAll()
    for (const pid of appProcesses()) process.kill(pid, "SIGKILL")
  })

  it("holds every file of each runner that the checkout has", () => {
    for (const folder of ["python", "js", "ruby"]) {
      expect({ folder, files: listRunnerFiles(path.join(installed, "runner", folder)) })
        .toEqual({ folder, files: listRunnerFiles(path.join(root, "runner", folder)) })
    }
  })

  it("has one copy of effect and of each Effect package its types use: the app's", () => {
    const copies = (name: string): Array<string> => {
      const found: Array<string> = []
      const walk = (dir: string) => {
        if (!fs.existsSync(dir)) return
        if (fs.existsSync(path.join(dir, name, "package.json"))) found.push(path.relative(app, path.join(dir, name)))
        for (const entry of fs.readdirSync(dir)) {
          const nested = entry.startsWith("@")
            ? fs.readdirSync(path.join(dir, entry)).map((child) => path.join(dir, entry, child))
            : [path.join(dir, entry)]
          for (const pkg of nested) walk(path.join(pkg, "node_modules"))
        }
      }
      walk(path.join(app, "node_modules"))
      return found
    }
    for (const name of ["effect", "@effect/platform-node", "@effect/platform-node-shared", "@effect/sql-pg"]) {
      expect({ name, copies: copies(name) }).toEqual({ name, copies: [path.join("node_modules", name)] })
    }
  })

  it("npm ls effect shows the app's effect 4 and every package using it deduped onto that copy", async () => {
    const versions: Array<string> = []
    const walk = (dependencies: Record<string, { version?: string; dependencies?: Record<string, unknown> }> | undefined) => {
      for (const [name, entry] of Object.entries(dependencies ?? {})) {
        if (name === "effect" && entry.version !== undefined) versions.push(entry.version)
        walk(entry.dependencies as typeof dependencies)
      }
    }
    walk(JSON.parse((await npm(["ls", "effect", "--all", "--json"], app)).stdout).dependencies)
    expect(versions.length).toBeGreaterThan(1)
    expect(new Set(versions).size).toBe(1)
    expect(versions[0]).toMatch(/^4\./)
  })

  it("veyyon --version says the package's version", async () => {
    const result = await veyyon(["--version"])
    expect(result).toMatchObject({ code: 0, stdout: `${manifest.version}\n` })
  })

  it.each([
    { language: "py", code: "import sys\nprint(sys.version_info[0])\n6 * 7", output: "3\n42" },
    { language: "js", code: "console.log(process.version.startsWith('v'))\n6 * 7", output: "true\n42" }
  ])("veyyon eval runs a $language cell", async ({ language, code, output }) => {
    const result = await veyyon(["eval", "--language", language, code])
    expect({ code: result.code, stdout: result.stdout.trim(), stderr: result.stderr }).toEqual({ code: 0, stdout: output, stderr: "" })
  })

  it.skipIf(findRuby() === undefined)("veyyon eval runs a rb cell (skipped where no ruby is on PATH)", async () => {
    const result = await veyyon(["eval", "--language", "rb", "puts RUBY_ENGINE\n6 * 7"])
    expect({ code: result.code, stdout: result.stdout.trim(), stderr: result.stderr }).toEqual({ code: 0, stdout: "ruby\n42", stderr: "" })
  })

  it("kv set by one veyyon eval --session is read by the next, and not by another session", async () => {
    const set = await veyyon(["eval", "--session", "shared", "--language", "py", "kv.set('answer', {'n': 42})"])
    expect({ code: set.code, stderr: set.stderr }).toEqual({ code: 0, stderr: "" })
    const read = await veyyon(["eval", "--session", "shared", "--language", "js", "kv.get('answer').n + 1"])
    expect({ code: read.code, stdout: read.stdout.trim(), stderr: read.stderr }).toEqual({ code: 0, stdout: "43", stderr: "" })
    const other = await veyyon(["eval", "--session", "other", "--language", "py", "print(kv.get('answer'))"])
    expect({ code: other.code, stdout: other.stdout.trim() }).toEqual({ code: 0, stdout: "None" })
  })

  it("the README's examples, a CommonJS require and the types type-check under strict nodenext TypeScript, and run", async () => {
    fs.copyFileSync(path.join(root, "examples", "embed.ts"), path.join(app, "embed.ts"))
    fs.copyFileSync(path.join(root, "examples", "toolkit.ts"), path.join(app, "toolkit.ts"))
    fs.writeFileSync(path.join(app, "require.cts"), REQUIRE_APP)
    fs.writeFileSync(path.join(app, "types.ts"), TYPES_PROBE)
    fs.writeFileSync(path.join(app, "tsconfig.json"), JSON.stringify(TSCONFIG, null, 2))
    await run(node, [path.join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], app)
    expect((await run(node, [path.join(app, "out", "embed.js")], app)).stdout).toBe("12.566370614359172\n")
    expect((await run(node, [path.join(app, "out", "require.cjs")], app)).stdout).toBe("42\n")
  })

  it("a plain CommonJS require('veyyon-eval') gets the library", async () => {
    const script = "const veyyon = require('veyyon-eval'); console.log(typeof veyyon.EvalLive, typeof veyyon.evalLayer, 'evalClusterLayer' in veyyon)"
    expect((await run(node, ["-e", script], app)).stdout).toBe("object function false\n")
  })

  describe("veyyon mcp through the official MCP client", () => {
    let client: Client | undefined
    let transport: StdioClientTransport | undefined

    beforeAll(async () => {
      transport = new StdioClientTransport({ command: veyyonBin, args: ["mcp"], cwd: app, env, stderr: "pipe" })
      client = new Client({ name: "veyyon-tarball-test", version: "0.0.0" })
      await client.connect(transport, { timeout: LIVENESS_MS })
    }, LIVENESS_MS)

    afterAll(async () => {
      await client?.close().catch(() => {})
    })

    it("lists the eval tool", async () => {
      expect(client!.getServerVersion()).toMatchObject({ name: "veyyon", version: manifest.version })
      expect((await client!.listTools()).tools.map((tool) => tool.name)).toEqual(["eval"])
    })

    it("runs a Python cell and serves the artifact of its cut output as a resource", async () => {
      const result = await client!.callTool(
        { name: "eval", arguments: { language: "py", code: "for i in range(20000): print(f'line-{i}')" } },
        undefined,
        { timeout: LIVENESS_MS }
      ) as { isError?: boolean; structuredContent?: { truncation?: { artifactUri: string } } }
      expect(result.isError).toBe(false)
      const uri = result.structuredContent!.truncation!.artifactUri
      expect(uri).toMatch(/^artifact:\/\//)
      const { contents } = await client!.readResource({ uri })
      expect(contents[0]).toMatchObject({ uri, mimeType: "text/plain" })
      expect((contents[0] as { text: string }).text.trimEnd().split("\n").at(-1)).toBe("line-19999")
    })
  })

  it("leaves no process of the app running once its clients are done", async () => {
    const deadline = Date.now() + 30_000
    while (appProcesses().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
    expect(appProcesses()).toEqual([])
  })
})
