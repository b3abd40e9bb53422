/**
 * `node --import tsx bench/startup.ts [runs] PACKAGE_DIR [PACKAGE_DIR …]`: the start-up of
 * installed copies of the package side by side, each sample taken in turn for every
 * directory so all see the same load. A PACKAGE_DIR holds a veyyon-eval package.json with
 * its dependencies reachable (the repository after `npm run build`, or an app's
 * `node_modules/veyyon-eval` installed from a tarball). Per directory it prints the median
 * (and min-max) wall milliseconds, spawn to exit, of `node -e "await import('effect')"` (the
 * floor any embedder pays), of `node -e "await import('veyyon-eval')"` (run in the package
 * directory, so the name resolves to the package itself) and of
 * `veyyon --version`, and from spawn to the answer of an MCP `initialize` sent to
 * `veyyon mcp` on stdin; then the modules each resolved, and how many of them
 * are cluster or Postgres code.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { median, round, since } from "./stats.ts"

const census = path.resolve(import.meta.dirname, "..", "test", "fixtures", "module-census.mjs")
const clusterModule = /\/node_modules\/(effect\/dist\/(cluster|workflow)|@effect\/sql-pg)\//

const args = process.argv.slice(2)
const runs = /^\d+$/.test(args[0] ?? "") ? Number(args.shift()) : 10
const dirs = args.map((dir) => path.resolve(dir))
if (dirs.length === 0 || dirs.some((dir) => !fs.existsSync(path.join(dir, "bin", "veyyon.mjs")))) {
  process.stderr.write("usage: node --import tsx bench/startup.ts [runs] PACKAGE_DIR [PACKAGE_DIR …] (each holding bin/veyyon.mjs and dist/)\n")
  process.exit(2)
}

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-startup-"))
process.once("exit", () => fs.rmSync(scratch, { recursive: true, force: true }))
const env = {
  ...process.env,
  XDG_CACHE_HOME: path.join(scratch, "cache"),
  XDG_STATE_HOME: path.join(scratch, "state"),
  VEYYON_ARTIFACTS_DIR: path.join(scratch, "artifacts"),
  NO_COLOR: "1"
}

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "startup-bench", version: "0" } }
}) + "\n"

/** Spawns `node argv` in `cwd`; resolves with the milliseconds to `ready` (by default the exit) once the process has exited. */
const timed = (cwd: string, argv: ReadonlyArray<string>, extraEnv: Record<string, string> = {}, mcp = false): Promise<number> =>
  new Promise((resolve, reject) => {
    const start = performance.now()
    let answeredAt: number | undefined
    const child = spawn(process.execPath, argv, { cwd, env: { ...env, ...extraEnv }, stdio: ["pipe", "pipe", "pipe"] })
    const guard = setTimeout(() => child.kill("SIGKILL"), 60_000)
    let out = ""
    let err = ""
    child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString("utf8")))
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString("utf8")
      if (mcp && answeredAt === undefined && out.includes("\n")) {
        answeredAt = since(start)
        child.stdin.end()
      }
    })
    if (mcp) child.stdin.write(INITIALIZE)
    else child.stdin.end()
    child.once("error", reject)
    child.once("close", (code) => {
      clearTimeout(guard)
      const ok = mcp ? out.includes("\"protocolVersion\"") : code === 0
      if (ok) resolve(mcp ? answeredAt! : since(start))
      else reject(new Error(`node ${argv.join(" ")} in ${cwd} exited ${code}: ${(out + err).slice(0, 500)}`))
    })
  })

const probes: ReadonlyArray<{ readonly name: string; readonly argv: (dir: string) => ReadonlyArray<string>; readonly mcp?: boolean }> = [
  { name: "import('effect') (the yardstick)", argv: () => ["--input-type=module", "-e", "await import('effect')"] },
  { name: "import('veyyon-eval')", argv: () => ["--input-type=module", "-e", "await import('veyyon-eval')"] },
  { name: "veyyon --version", argv: (dir) => [path.join(dir, "bin", "veyyon.mjs"), "--version"] },
  { name: "veyyon mcp: initialize answered", argv: (dir) => [path.join(dir, "bin", "veyyon.mjs"), "mcp"], mcp: true }
]

const samples = new Map<string, Array<number>>()
const key = (dir: string, probe: string) => `${dir}\u0000${probe}`

for (const probe of probes) {
  for (const dir of dirs) await timed(dir, probe.argv(dir), {}, probe.mcp)
}
for (let run = 0; run < runs; run++) {
  for (const probe of probes) {
    for (const dir of dirs) {
      const ms = await timed(dir, probe.argv(dir), {}, probe.mcp)
      samples.set(key(dir, probe.name), [...(samples.get(key(dir, probe.name)) ?? []), ms])
    }
  }
}

console.log(`start-up, ${runs} runs each, alternated; load average ${os.loadavg().map((load) => load.toFixed(2)).join(" ")}`)
for (const probe of probes) {
  console.log(`\n${probe.name}: median ms (min-max), modules resolved (cluster/Postgres among them)`)
  for (const dir of dirs) {
    const ms = samples.get(key(dir, probe.name))!
    const file = path.join(scratch, "census.txt")
    await timed(dir, ["--import", census, ...probe.argv(dir)], { MODULE_CENSUS_FILE: file }, probe.mcp)
    const urls = fs.readFileSync(file, "utf8").split("\n").filter((url) => url.startsWith("file:"))
    console.log(
      `  ${round(median(ms))} (${round(Math.min(...ms))}-${round(Math.max(...ms))})  ${urls.length} (${urls.filter((url) => clusterModule.test(url)).length})  ${dir}`
    )
  }
}
