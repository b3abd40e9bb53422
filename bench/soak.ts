/**
 * `npm run soak`: a bounded random mix over 8 sessions through `EvalTool.run` (normal
 * cells, errors, interrupts, timeouts, SIGINT-swallowing cells, `os._exit`, output
 * floods, resets, kv writes), then checks that every call returned exactly one result
 * or typed error, no Python process is left, host RSS came back, and kv kept every key.
 *
 * `VEYYON_SOAK_SECONDS` (default 100) sets the mix's length, `VEYYON_SOAK_SEED` its seed.
 * The whole run stops by itself within 3 minutes. Prints `soak: N passed, M failed`.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, Result } from "effect"
import type { EvalError, EvalResult } from "../dist/services/tool/EvalTool.js"
import { commandOf, descendants, hostRss, isPython, killAll, ourPythons } from "./procs.ts"
import { benchInterpreter } from "./python.ts"
import { mib } from "./stats.ts"
import { makeVeyyon, runCell, type VeyyonRuntime } from "./veyyon.ts"

/** The hard bound of a whole soak run. */
export const SOAK_DEADLINE_MS = 180_000

const SESSIONS = 8
const CALL_GUARD_MS = 45_000
const RSS_SLACK_BYTES = 20 * 1024 * 1024

/** A seeded PRNG (mulberry32), so a failing mix can be replayed. */
export const random = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

type Outcome = Result.Result<EvalResult, EvalError>

interface Op {
  readonly name: string
  readonly weight: number
  readonly params: (n: number) => { readonly code: string; readonly timeout?: number; readonly reset?: boolean }
  /** Abort after the cell printed `go`, this many ms later. */
  readonly abortAfterGo?: (rand: () => number) => number
  /** Why the outcome is wrong, or undefined when it is right. */
  readonly check: (outcome: Outcome, n: number) => string | undefined
  readonly needsKv?: boolean
}

const result = (outcome: Outcome): EvalResult | string =>
  Result.isSuccess(outcome) ? outcome.success : `failed with ${outcome.failure._tag}: ${outcome.failure.message}`

const expect = (outcome: Outcome, test: (r: EvalResult) => string | undefined): string | undefined => {
  const r = result(outcome)
  return typeof r === "string" ? r : test(r)
}

const flags = (r: EvalResult) => `status=${r.status} cancelled=${r.cancelled} timedOut=${r.timedOut} killed=${r.killed}`

/** The mix. Shares are weights; the SIGINT-swallowing cell costs the 5 s escalation, so it stays rare. */
export const OPS: ReadonlyArray<Op> = [
  {
    name: "normal",
    weight: 32,
    params: (n) => ({ code: `soak_${n} = ${n}\nprint(soak_${n})` }),
    check: (o, n) => expect(o, (r) => (r.status === "ok" && r.text.trim() === String(n) ? undefined : `expected ${n}, got ${flags(r)} text=${JSON.stringify(r.text.slice(0, 200))}`))
  },
  {
    name: "error",
    weight: 10,
    params: (n) => ({ code: `raise ValueError("soak ${n}")` }),
    check: (o, n) => expect(o, (r) => (r.status === "error" && r.error?.ename === "ValueError" && r.error.evalue === `soak ${n}` ? undefined : `expected ValueError, got ${flags(r)} error=${JSON.stringify(r.error)}`))
  },
  {
    name: "interrupt",
    weight: 8,
    params: () => ({ code: "import time\nprint('go', flush=True)\ntime.sleep(20)" }),
    abortAfterGo: (rand) => Math.floor(rand() * 300),
    check: (o) => expect(o, (r) => (r.cancelled && !r.timedOut && !r.killed && r.status === "error" ? undefined : `expected a cancelled cell, got ${flags(r)}`))
  },
  {
    name: "timeout",
    weight: 5,
    params: () => ({ code: "import time\ntime.sleep(20)", timeout: 1 }),
    check: (o) => expect(o, (r) => (r.timedOut && r.cancelled && !r.killed ? undefined : `expected a timed-out cell, got ${flags(r)}`))
  },
  {
    name: "swallow-sigint",
    weight: 1,
    params: (n) => ({
      code: n % 2 === 0
        ? "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(30)"
        : "import time\nwhile True:\n    try:\n        time.sleep(30)\n    except KeyboardInterrupt:\n        pass",
      timeout: 1
    }),
    check: (o) => expect(o, (r) => (r.killed && r.timedOut ? undefined : `expected the kernel killed after escalation, got ${flags(r)}`))
  },
  {
    name: "os-exit",
    weight: 3,
    params: () => ({ code: "import os\nos._exit(3)" }),
    check: (o) =>
      Result.isFailure(o)
        ? (o.failure._tag === "KernelDied" ? undefined : `expected KernelDied, got ${o.failure._tag}`)
        : (o.success.status === "error" ? undefined : `expected a failed cell or KernelDied, got ${flags(o.success)}`)
  },
  {
    name: "flood",
    weight: 4,
    params: () => ({ code: "for i in range(20000):\n    print('flood', i, 'x' * 90)" }),
    check: (o) => expect(o, (r) => (r.status === "ok" && r.truncation !== undefined ? undefined : `expected truncated output, got ${flags(r)} truncation=${r.truncation === undefined ? "none" : "yes"}`))
  },
  {
    name: "reset",
    weight: 4,
    params: () => ({ code: "len([name for name in dir() if name.startswith('soak_')])", reset: true }),
    check: (o) => expect(o, (r) => (r.status === "ok" && r.text === "0" && r.executionCount === 1 ? undefined : `expected a fresh kernel, got ${flags(r)} text=${JSON.stringify(r.text)} count=${r.executionCount}`))
  },
  {
    name: "kv",
    weight: 8,
    needsKv: true,
    params: (n) => ({ code: `kv.set("soak-${n}", {"n": ${n}})` }),
    check: (o) => expect(o, (r) => (r.status === "ok" ? undefined : `kv.set failed: ${flags(r)} ${r.text.slice(0, 200)}`))
  }
]

interface Tally {
  passed: number
  failed: number
  readonly failures: Array<string>
  readonly byOp: Record<string, { passed: number; failed: number }>
}

const record = (tally: Tally, name: string, problem: string | undefined) => {
  const entry = (tally.byOp[name] ??= { passed: 0, failed: 0 })
  if (problem === undefined) {
    tally.passed++
    entry.passed++
  } else {
    tally.failed++
    entry.failed++
    tally.failures.push(`${name}: ${problem}`)
  }
}

const pick = (ops: ReadonlyArray<Op>, rand: () => number): Op => {
  const total = ops.reduce((sum, op) => sum + op.weight, 0)
  let roll = rand() * total
  for (const op of ops) {
    roll -= op.weight
    if (roll < 0) return op
  }
  return ops[ops.length - 1]!
}

/** Runs one call, checking it settles once, streams nothing after its result, and settles in time. */
const call = async (
  veyyon: VeyyonRuntime,
  op: Op,
  n: number,
  sessionId: string,
  cwd: string,
  rand: () => number
): Promise<string | undefined> => {
  const controller = new AbortController()
  let settled = 0
  let lateEvents = 0
  let sawGo = false
  const abortDelay = op.abortAfterGo?.(rand)
  const outcome = veyyon.runPromise(
    Effect.result(
      runCell(op.params(n), {
        sessionId,
        cwd,
        signal: controller.signal,
        onEvent: (output) => {
          if (settled > 0) lateEvents++
          if (abortDelay !== undefined && !sawGo && output._tag === "Stdout" && output.text.includes("go")) {
            sawGo = true
            setTimeout(() => controller.abort(), abortDelay)
          }
        }
      })
    )
  ).then((o) => {
    settled++
    return o
  })
  let guard: NodeJS.Timeout | undefined
  const timedOut = new Promise<"hung">((resolve) => (guard = setTimeout(() => resolve("hung"), CALL_GUARD_MS)))
  const first = await Promise.race([outcome, timedOut])
  clearTimeout(guard)
  if (first === "hung") return `no result within ${CALL_GUARD_MS / 1000} s`
  await new Promise((resolve) => setTimeout(resolve, 0))
  if (settled !== 1) return `settled ${settled} times`
  if (lateEvents > 0) return `${lateEvents} event(s) after the result`
  return op.check(first, n)
}

const kvAvailable = async (veyyon: VeyyonRuntime, cwd: string): Promise<boolean> => {
  const r = await veyyon.runPromise(runCell({ code: "print(all(callable(getattr(globals().get('kv'), m, None)) for m in ('set', 'get', 'list')))" }, { sessionId: "soak-probe", cwd }))
  return r.text.trim() === "True"
}

const kvCheck = async (veyyon: VeyyonRuntime, sessionId: string, cwd: string, keys: ReadonlyArray<number>): Promise<string | undefined> => {
  if (keys.length === 0) return undefined
  const code = `import json\nprint(json.dumps([kv.get("soak-" + str(n)) for n in ${JSON.stringify(keys)}]))`
  const o = await veyyon.runPromise(Effect.result(runCell({ code }, { sessionId, cwd })))
  if (Result.isFailure(o)) return `reading kv failed: ${o.failure._tag}`
  try {
    const values = JSON.parse(o.success.text) as Array<{ n: number } | null>
    const missing = keys.filter((n, i) => values[i]?.n !== n)
    return missing.length === 0 ? undefined : `${missing.length} of ${keys.length} keys missing or wrong (${missing.slice(0, 5).join(", ")})`
  } catch {
    return `kv read returned ${JSON.stringify(o.success.text.slice(0, 200))}`
  }
}

let activeMarker: string | undefined

/** What a soak run found. */
export interface SoakSummary {
  readonly passed: number
  readonly failed: number
  readonly failures: ReadonlyArray<string>
  readonly byOp: Readonly<Record<string, { passed: number; failed: number }>>
  readonly seed: number
  readonly calls: number
  readonly kv: boolean
  readonly rss: { readonly start: number; readonly afterMix: number; readonly afterShutdown: number }
}

/** Runs the soak for `seconds` of mixed calls plus the checks; always kills what it started. */
export const soak = async (options: { readonly seconds: number; readonly seed: number; readonly log?: (line: string) => void }): Promise<SoakSummary> => {
  const log = options.log ?? ((line: string) => console.log(line))
  const python = benchInterpreter()
  if (python === undefined) throw new Error("no python3 on PATH runs; set VEYYON_BENCH_PYTHON")
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-soak-"))
  const artifactsDir = path.join(scratch, "artifacts")
  const cwd = path.join(scratch, "work")
  fs.mkdirSync(cwd, { recursive: true })
  const marker = `VEYYON_ARTIFACTS_DIR=${artifactsDir}`
  activeMarker = marker
  const rand = random(options.seed)
  const tally: Tally = { passed: 0, failed: 0, failures: [], byOp: {} }
  const veyyon = makeVeyyon(python.executable, artifactsDir)
  const sessions = Array.from({ length: SESSIONS }, (_, i) => `soak-${i}`)
  const keys = new Map<string, Array<number>>(sessions.map((s) => [s, []]))
  let calls = 0
  let rss = { start: 0, afterMix: 0, afterShutdown: 0 }
  let disposed = false
  try {
    const kv = await kvAvailable(veyyon, cwd)
    if (!kv) log("soak: kv is not defined in the kernel yet; kv writes and the kv check are skipped")
    const ops = OPS.filter((op) => kv || op.needsKv !== true)
    await Promise.all(sessions.map((sessionId) => veyyon.runPromise(runCell({ code: "pass" }, { sessionId, cwd }))))
    rss = { ...rss, start: await hostRss() }
    let next = 0
    const stopAt = performance.now() + options.seconds * 1000
    await Promise.all(
      sessions.map(async (sessionId) => {
        while (performance.now() < stopAt) {
          const op = pick(ops, rand)
          const n = ++next
          calls++
          const problem = await call(veyyon, op, n, sessionId, cwd, rand)
          if (op.needsKv === true && problem === undefined) keys.get(sessionId)!.push(n)
          record(tally, op.name, problem === undefined ? undefined : `${sessionId} #${n}: ${problem}`)
        }
      })
    )
    log(`soak: ${calls} calls over ${SESSIONS} sessions; checking`)
    if (kv) {
      for (const sessionId of sessions) record(tally, "kv-check", await kvCheck(veyyon, sessionId, cwd, keys.get(sessionId)!))
    }
    rss = { ...rss, afterMix: await hostRss() }
    record(tally, "rss-after-mix", rss.afterMix - rss.start <= RSS_SLACK_BYTES ? undefined : `host RSS grew ${mib(rss.afterMix - rss.start).toFixed(1)} MiB`)
    await veyyon.dispose()
    disposed = true
    rss = { ...rss, afterShutdown: await hostRss() }
    record(tally, "rss-after-shutdown", rss.afterShutdown - rss.start <= RSS_SLACK_BYTES ? undefined : `host RSS grew ${mib(rss.afterShutdown - rss.start).toFixed(1)} MiB`)
    const left = ourPythons(marker)
    record(tally, "no-python-left", left.length === 0 ? undefined : `${left.length} Python process(es) left: ${left.map(commandOf).join("; ").slice(0, 300)}`)
    killAll(left)
    return { ...tally, seed: options.seed, calls, kv, rss }
  } finally {
    if (!disposed) await veyyon.dispose().catch(() => undefined)
    killAll(ourPythons(marker))
    fs.rmSync(scratch, { recursive: true, force: true })
  }
}

const main = async () => {
  const seconds = Number(process.env.VEYYON_SOAK_SECONDS ?? 100)
  const seed = Number(process.env.VEYYON_SOAK_SEED ?? Date.now() % 2 ** 31)
  console.log(`soak: ${seconds} s of mixed calls over ${SESSIONS} sessions, seed ${seed}`)
  const deadline = setTimeout(() => {
    killAll(descendants().filter(isPython))
    console.log("soak: 0 passed, 1 failed")
    console.log(`soak: did not finish within ${SOAK_DEADLINE_MS / 1000} s`)
    process.exit(1)
  }, SOAK_DEADLINE_MS)
  deadline.unref()
  const summary = await soak({ seconds: Math.min(seconds, 120), seed })
  for (const [name, counts] of Object.entries(summary.byOp)) console.log(`  ${name.padEnd(20)} ${counts.passed} passed, ${counts.failed} failed`)
  for (const failure of summary.failures.slice(0, 30)) console.log(`  FAILED ${failure}`)
  console.log(`  host RSS: start ${mib(summary.rss.start).toFixed(1)} MiB, after the mix ${mib(summary.rss.afterMix).toFixed(1)} MiB, after shutdown ${mib(summary.rss.afterShutdown).toFixed(1)} MiB`)
  console.log(`soak: ${summary.passed} passed, ${summary.failed} failed`)
  clearTimeout(deadline)
  process.exitCode = summary.failed > 0 ? 1 : 0
}

const stopOnSignal = (signal: NodeJS.Signals) =>
  process.once(signal, () => {
    killAll(ourPythons(activeMarker))
    console.log("soak: 0 passed, 1 failed")
    process.exit(130)
  })

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  stopOnSignal("SIGINT")
  stopOnSignal("SIGTERM")
  main().catch((error) => {
    console.error(error)
    console.log("soak: 0 passed, 1 failed")
    process.exitCode = 1
  })
}
