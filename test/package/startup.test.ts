/**
 * What starting the package loads, counted by a resolve hook in a child Node
 * (`test/fixtures/module-census.mjs`) over the built package: the main entry and
 * `veyyon mcp` load no cluster or Postgres code (modules of `effect/cluster` or
 * `@effect/sql-pg`: that is `veyyon-eval/cluster`'s), stdio MCP loads no HTTP server,
 * and `veyyon --version` loads nothing of the CLI.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { tempDir } from "../support/tempDirs.ts"

const root = path.resolve(import.meta.dirname, "..", "..")
const census = path.join(root, "test", "fixtures", "module-census.mjs")
const scratch = tempDir("veyyon-startup-census-")

/** A liveness bound for one child: under a second when quiet, many times that on a loaded machine. */
const LIVENESS_MS = 120_000

/** The packages (`@scope/name` or `name`) of the modules `node args` resolved, run in the package root with `input` on stdin. */
const packagesLoaded = (args: ReadonlyArray<string>, input = ""): ReadonlySet<string> => {
  const file = path.join(scratch, `census-${Math.random().toString(36).slice(2)}.txt`)
  execFileSync(process.execPath, ["--import", census, ...args], {
    cwd: root,
    input,
    env: {
      ...process.env,
      MODULE_CENSUS_FILE: file,
      VEYYON_KERNEL_SPARES: "0",
      XDG_CACHE_HOME: path.join(scratch, "cache"),
      XDG_STATE_HOME: path.join(scratch, "state"),
      VEYYON_ARTIFACTS_DIR: path.join(scratch, "artifacts")
    },
    stdio: ["pipe", "pipe", "pipe"],
    timeout: LIVENESS_MS
  })
  const urls = fs.readFileSync(file, "utf8").split("\n").filter((url) => url.startsWith("file:"))
  return new Set(urls.flatMap((url) => {
    const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\/(?:dist\/([a-z-]+)\/)?/.exec(url)
    if (match === null) return [url.startsWith(`file://${root}/`) ? "veyyon-eval" : url]
    return match[1] === "effect" && match[2] !== undefined ? ["effect", `effect/${match[2]}`] : [match[1]!]
  }))
}

/**
 * The packages, and the modules of `effect` (`effect/<folder>`), that hold cluster and
 * Postgres code. (`effect/sql`'s client tag and errors are not among them: `effect` itself
 * loads them, through its request resolvers' persistence, whatever imports it.)
 */
const clusterPackages = ["effect/cluster", "@effect/sql-pg"]

/** The names among `loaded` that are in `names`. */
const among = (loaded: ReadonlySet<string>, names: ReadonlyArray<string>) => names.filter((name) => loaded.has(name))

describe("start-up", { timeout: LIVENESS_MS * 2 }, () => {
  it("import('veyyon-eval') loads no cluster or Postgres module", () => {
    const loaded = packagesLoaded(["--input-type=module", "-e", "await import('veyyon-eval')"])
    expect(loaded.has("effect")).toBe(true)
    expect(among(loaded, clusterPackages)).toEqual([])
  })

  it("require('veyyon-eval') loads none either", () => {
    const loaded = packagesLoaded(["-e", "require('veyyon-eval')"])
    expect(loaded.has("effect")).toBe(true)
    expect(among(loaded, clusterPackages)).toEqual([])
  })

  it("veyyon-eval/cluster is where they are loaded", () => {
    const loaded = packagesLoaded(["--input-type=module", "-e", "await import('veyyon-eval/cluster')"])
    expect(among(loaded, clusterPackages)).toEqual(clusterPackages)
  })

  it("veyyon mcp on stdio loads neither the cluster nor an HTTP server", () => {
    const loaded = packagesLoaded([path.join(root, "bin", "veyyon.mjs"), "mcp"])
    expect(loaded.has("effect/cli")).toBe(true)
    expect(among(loaded, [...clusterPackages, "undici", "ws"])).toEqual([])
  })

  it("veyyon --version answers from package.json, loading no module of the CLI or its dependencies", () => {
    const out = execFileSync(process.execPath, [path.join(root, "bin", "veyyon.mjs"), "--version"], { encoding: "utf8", timeout: LIVENESS_MS })
    const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }
    expect(out).toBe(`${manifest.version}\n`)
    expect([...packagesLoaded([path.join(root, "bin", "veyyon.mjs"), "--version"])]).toEqual(["veyyon-eval"])
  })
})
