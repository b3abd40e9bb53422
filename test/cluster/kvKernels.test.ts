/**
 * kv in cluster mode through real kernels: two "runners" (each its own eval layer with its
 * own private artifacts directory, standing for two hosts) share one session's kv through
 * Postgres. The Python, JavaScript and Ruby preludes read through the host
 * (`VEYYON_KV_READS=host`), so what one runtime on one runner writes, every runtime on the
 * other reads, no kv file is written on either disk, and the values outlive the runner that
 * wrote them.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { PgClient } from "@effect/sql-pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect, Exit, Layer, ManagedRuntime, Redacted } from "effect"
import { findRubyCandidate } from "../../src/backends/ruby.ts"
import { PgKvStoreLive } from "../../src/cluster/PgKvStore.ts"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import { EvalTool, type EvalResult } from "../../src/services/tool/EvalTool.ts"
import { postgresSkipReason, startPostgres, type TestPostgres } from "../support/postgres.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { titled } from "../support/skip.ts"

const python = findPython()
const rubyFound = !(findRubyCandidate(undefined, process.cwd(), process.env.PATH) instanceof Error)
const skip = postgresSkipReason() ??
  (!integrationEnabled() ? "VEYYON_PYTHON_INTEGRATION is not 1" : python === undefined ? "no python3 on PATH" : undefined)

/** One runner: the eval layer on its own artifacts directory, kv in the shared database. */
const makeRunner = (url: string, artifactsDir: string) => {
  const layer = evalLayer({ env: false, settings: { artifactsDir, eval: { rb: true }, python: { interpreter: python! } } }).pipe(
    Layer.provide(PgKvStoreLive),
    Layer.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 4 }))
  )
  const runtime = ManagedRuntime.make(layer)
  const run = async (language: "py" | "js" | "rb", code: string, sessionId = "shared"): Promise<EvalResult> => {
    const exit = await runtime.runPromiseExit(Effect.flatMap(EvalTool, (tool) => tool.run({ language, code, timeout: 120 }, { sessionId, cwd: process.cwd() })))
    if (Exit.isFailure(exit)) throw new Error(String(exit.cause))
    return exit.value
  }
  return { runtime, run }
}

type Runner = ReturnType<typeof makeRunner>

/** Files below `dir` whose name is a kv entry's. */
const kvFiles = (dir: string): Array<string> =>
  (fs.readdirSync(dir, { recursive: true, encoding: "utf8" })).filter((name) => /[0-9a-f]{64}\.json$/.test(name))

describe.skipIf(skip !== undefined)(titled(rubyFound ? "kv in cluster mode through Python, JavaScript and Ruby kernels" : "kv in cluster mode through Python and JavaScript kernels (Ruby cells skipped: no ruby on PATH)", skip), () => {
  let pg: TestPostgres | undefined
  const dirs: Array<string> = []
  const runners: Array<Runner> = []
  let a: Runner
  let b: Runner

  const newRunner = () => {
    const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-cluster-kv-")))
    dirs.push(dir)
    const runner = makeRunner(pg!.url, dir)
    runners.push(runner)
    return runner
  }

  beforeAll(async () => {
    pg = await startPostgres()
    a = newRunner()
    b = newRunner()
  }, 180_000)

  afterAll(async () => {
    for (const runner of runners) await runner.runtime.dispose()
    await pg?.stop()
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
  }, 60_000)

  it("what Python writes on one runner, Python, JavaScript and Ruby read on the other", async () => {
    const set = await a.run("py", "kv.set('big', 123456789012345678901234567890)\nkv.set('doc', {'ü': [1, None, True]})\nkv.set('b', 1)")
    expect(set.status).toBe("ok")
    const py = await b.run("py", "print(kv.get('big'), kv.get('doc'), kv.get('nope', 'dflt'), 'b' in kv, 'zz' in kv, kv.list())")
    expect(py.text).toContain("123456789012345678901234567890 {'ü': [1, None, True]} dflt True False ['b', 'big', 'doc']")
    const js = await b.run("js", [
      "console.log(JSON.stringify([await kv.get('doc'), await kv.get('nope', 'dflt'), await kv.has('b'), await kv.has('zz'), await kv.list()]))"
    ].join("\n"))
    expect(js.status).toBe("ok")
    expect(js.text).toContain(`[{"ü":[1,null,true]},"dflt",true,false,["b","big","doc"]]`)
    if (rubyFound) {
      const rb = await b.run("rb", "puts JSON.generate([kv.get('doc'), kv.get('nope', 'dflt'), kv.key?('b'), kv.key?('zz'), kv.list, kv['big'].to_s])")
      expect(rb.status).toBe("ok")
      expect(rb.text).toContain(`[{"ü":[1,null,true]},"dflt",true,false,["b","big","doc"],"123456789012345678901234567890"]`)
    }
    for (const dir of dirs) expect(kvFiles(dir)).toEqual([])
  }, 180_000)

  it("writes from JavaScript and Ruby on one runner are read by Python on the other; deletes too", async () => {
    const js = await a.run("js", "await kv.set('from-js', [1, 'two'])\nawait kv.set('b', 0)\nconsole.log(await kv.delete('b'), await kv.delete('b'))", "writers")
    expect(js.text).toContain("true false")
    if (rubyFound) {
      const rb = await a.run("rb", "kv.set('from-rb', { 'x' => nil })\nputs kv.delete('nope')", "writers")
      expect(rb.text).toContain("false")
    }
    const py = await b.run("py", "print(kv.list(), kv.get('from-js'), kv.get('from-rb'))", "writers")
    expect(py.text).toContain(rubyFound ? "['from-js', 'from-rb'] [1, 'two'] {'x': None}" : "['from-js'] [1, 'two'] None")
  }, 180_000)

  it("refuses over-limit writes in every runtime with its own error, the host's reason intact", async () => {
    const py = await a.run("py", [
      "for key, value in (('a/b', 1), ('k', 'x' * 300000)):",
      "    try:",
      "        kv.set(key, value)",
      "    except ValueError as exc:",
      "        print(exc)",
      "try:",
      "    kv.get('a/b')",
      "except ValueError as exc:",
      "    print(exc)"
    ].join("\n"), "limits")
    expect(py.text).toContain(`kv keys may not contain "/": 'a/b'`)
    expect(py.text).toContain("one value may have at most 262144 (256 KiB)")
    const fill = await a.run("py", [
      "import json",
      "stored, full = 0, []",
      "for i in range(20):",
      "    try:",
      "        kv.set('k%d' % i, 'v' * 250000)",
      "        stored += 1",
      "    except ValueError as exc:",
      "        full.append(str(exc))",
      "print(stored, len(full), full[0][:17])"
    ].join("\n"), "limits")
    expect(fill.text).toContain("16 4 kv store is full")
    const js = await b.run("js", "try { await kv.set('more', 'v'.repeat(250000)) } catch (error) { console.log(error.name, error.message.slice(0, 17)) }", "limits")
    expect(js.text).toContain("RangeError kv store is full")
    if (rubyFound) {
      const rb = await b.run("rb", "begin\n  kv.set('more', 'v' * 250000)\nrescue ArgumentError => e\n  puts e.message[0, 17]\nend", "limits")
      expect(rb.text).toContain("kv store is full")
    }
  }, 180_000)

  it("keeps kv when the runner that wrote it is gone: a new runner's kernels read it", async () => {
    await a.run("py", "kv.set('survivor', {'cursor': 17})", "failover")
    await a.runtime.dispose()
    const c = newRunner()
    const py = await c.run("py", "print(kv.get('survivor'))", "failover")
    expect(py.text).toContain("{'cursor': 17}")
    const js = await c.run("js", "console.log(JSON.stringify(await kv.get('survivor')))", "failover")
    expect(js.text).toContain(`{"cursor":17}`)
  }, 180_000)
})
