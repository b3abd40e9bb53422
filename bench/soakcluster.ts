/**
 * `npm run soak:cluster`: a chaos soak of the cluster. Runners (`veyyon runner`) and MCP
 * doors (`veyyon mcp --http --cluster`) on one private Postgres; simulated agents, each an
 * MCP client with its own session, send Python and JavaScript cells in turn, each
 * appending its call id to the agent's counter file (in a directory the runners allow, so
 * the file follows a moved session) and writing kv. Every 20-40 s a runner is killed
 * (-9), stopped (SIGTERM) or joined by a new one (the first runner is spared, the
 * long-lived one); once, Postgres restarts.
 *
 * Checks: every call answered (a result, or an honest notice); each cell ran at most once,
 * exactly once when its answer says it ran; no acknowledged kv write lost; doors and
 * runners exit 143 on SIGTERM; no kernel or runner left; every ERROR/WARN log line
 * explained by an injected fault; in the long form, RSS of the doors and of the runners
 * that lived through it (the first one at least) bounded after warm-up.
 *
 * The long form (default): 3 runners, 2 doors, 20 agents, 20 minutes; it writes its
 * figures into `bench/results.md`. `--short` (or `VEYYON_SOAK_SHORT=1`), for CI: 2
 * runners, 6 agents, a 170 s mix (about 3 minutes in all), no RSS check. `VEYYON_SOAK_SEED` replays a fault schedule,
 * `VEYYON_SOAK_SECONDS` changes the mix's length, `VEYYON_SOAK_LOG_DIR` keeps every runner's
 * and door's log there. Needs PostgreSQL and `dist/`.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { startCluster, type TestCluster, type TestRunner } from "../test/cluster/support.ts"
import { postgresSkipReason } from "../test/support/postgres.ts"
import { commandOf, descendants, killAll, rssOf, withCwdUnder, withEnvironment } from "./procs.ts"
import { random } from "./soak.ts"
import { connectAgent, type RunningAgent } from "./soakcluster/agent.ts"
import { type Door, startDoor } from "./soakcluster/doors.ts"
import { type Fault, type FaultKind, runnerFaultKind, schedule } from "./soakcluster/faults.ts"
import { type Cause, unexplained } from "./soakcluster/logs.ts"
import { resultsSection, type SoakFigures, writeSection } from "./soakcluster/report.ts"
import { callProblems, failover, type Failover, kvProblems, outcomes } from "./soakcluster/verdict.ts"

/** A size of the soak. */
interface Form {
  readonly name: "short" | "long"
  readonly runners: number
  readonly mostRunners: number
  readonly doors: number
  readonly agents: number
  readonly mixMs: number
  /** The end of the mix left without faults, so the last one's fail-over is seen. */
  readonly quietMs: number
  /** When RSS is read as the warmed-up base (long form only). */
  readonly warmupMs: number | undefined
}

const SHORT: Form = { name: "short", runners: 2, mostRunners: 3, doors: 2, agents: 6, mixMs: 170_000, quietMs: 15_000, warmupMs: undefined }
const LONG: Form = { name: "long", runners: 3, mostRunners: 5, doors: 2, agents: 20, mixMs: 1_200_000, quietMs: 30_000, warmupMs: 300_000 }

/** How much a long-lived process's RSS may grow from its warmed-up reading to its highest after. */
const RSS_GROWTH_BOUND = 64 * 1024 * 1024
const RSS_EVERY_MS = 10_000
/** How long teardown waits for a process stopped by SIGTERM, and for the killed runners' kernels to end. */
const EXIT_WAIT_MS = 20_000
/** What a setup step and the checks after the mix may take on top of the mix, in all. */
const OVERHEAD_MS = 150_000

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const alive = (runner: TestRunner) => runner.child.exitCode === null && runner.child.signalCode === null

const within = async <A>(promise: Promise<A>, ms: number): Promise<A | "timeout"> => {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), ms)))
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** The processes of the soak still alive: anything below this one but Postgres, anything in the cluster's directory or the shared one. */
const leftovers = (clusterDir: string, shared: string, before: ReadonlySet<number>): Array<number> =>
  [...new Set([...descendants(), ...withEnvironment(clusterDir), ...withCwdUnder(shared)])]
    .filter((pid) => !before.has(pid) && !/^postgres[: ]|\/postgresql\/\d+\/bin\/postgres/.test(commandOf(pid)))

/** Kills what the soak started and removes its directories, at once (a signal, the deadline). */
let emergency = (): void => void killAll(descendants())

interface RssSample {
  readonly name: string
  readonly at: number
  readonly rss: number
}

const run = async (form: Form, seed: number, mixMs: number, logDir: string | undefined): Promise<number> => {
  const shared = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-soak-shared-")))
  const logs = new Map<string, string>()
  const doors: Array<Door> = []
  const agents: Array<RunningAgent> = []
  const problems: Array<string> = []
  let cluster: TestCluster | undefined
  const startedAt = Date.now()
  /** What ran below this process before the soak started anything (the TypeScript loader's service). */
  const before = new Set(descendants())
  emergency = () => {
    killAll(descendants())
    if (cluster !== undefined) {
      killAll(leftovers(cluster.dir, shared, before))
      for (const dir of [cluster.dir, cluster.pg.dir]) fs.rmSync(dir, { recursive: true, force: true })
    }
    fs.rmSync(shared, { recursive: true, force: true })
  }
  try {
    cluster = await startCluster(form.runners, {
      runnerEnv: { VEYYON_RUNNER_ALLOWED_ROOTS: shared },
      onRunnerLog: (address, chunk) => logs.set(address, (logs.get(address) ?? "") + chunk)
    })
    const token = randomBytes(32).toString("hex")
    doors.push(...await Promise.all(Array.from({ length: form.doors }, () => startDoor({ ...cluster!.env, VEYYON_MCP_TOKEN: token }, shared))))
    for (let i = 0; i < form.agents; i++) agents.push(await connectAgent(i, doors[i % doors.length]!.url, token))
    console.log(`soak:cluster: started in ${((Date.now() - startedAt) / 1000).toFixed(1)} s; the mix runs ${mixMs / 1000} s`)

    const start = Date.now()
    const stopAt = start + mixMs
    const pauses = random(seed + 1)
    const mix = Promise.all(agents.map((agent) => agent.run(() => Date.now() < stopAt, () => 100 + Math.floor(pauses() * 400))))

    const rss: Array<RssSample> = []
    const sampler = setInterval(() => {
      const at = Date.now() - start
      doors.forEach((door, i) => rss.push({ name: `door ${i}`, at, rss: rssOf(door.child.pid!) ?? 0 }))
      for (const runner of cluster!.runners.filter(alive)) rss.push({ name: `runner ${runner.address}`, at, rss: rssOf(runner.child.pid!) ?? 0 })
    }, RSS_EVERY_MS)

    const plan = schedule(seed, mixMs, form.quietMs)
    const pick = random(seed + 2)
    const faults: Array<Fault> = []
    const owners: Array<Map<number, string | undefined>> = []
    const inject = async (kind: FaultKind): Promise<Fault> => {
      const at = Date.now() - start
      const t0 = performance.now()
      const took = () => Math.round(performance.now() - t0)
      if (kind === "postgres") {
        await cluster!.pg.down()
        await sleep(2000)
        await cluster!.pg.up()
        return { kind, at, tookMs: took() }
      }
      if (kind === "join") {
        const added = await cluster!.addRunner()
        return { kind, at, runner: added.address, tookMs: took() }
      }
      const hittable = cluster!.runners.slice(1).filter(alive)
      const victim = hittable[Math.floor(pick() * hittable.length)]!
      victim.child.kill(kind === "kill" ? "SIGKILL" : "SIGTERM")
      const exit = await victim.exited
      if (kind === "stop" && exit !== 143) problems.push(`runner ${victim.address} stopped by SIGTERM exited ${exit}, not 143`)
      return { kind, at, runner: victim.address, tookMs: took(), exit }
    }
    for (const [index, at] of plan.at.entries()) {
      await sleep(start + at - Date.now())
      const kind = index === plan.postgresIndex
        ? "postgres"
        : runnerFaultKind(pick, cluster.runners.filter(alive).length, cluster.runners.slice(1).filter(alive).length, form.mostRunners)
      owners.push(new Map(agents.map(({ agent }) => [agent.index, agent.lastRunner])))
      const fault = await inject(kind)
      faults.push(fault)
      console.log(`  +${(fault.at / 1000).toFixed(0)} s: ${fault.kind}${fault.runner === undefined ? "" : ` ${fault.runner}`} (${fault.tookMs} ms)`)
    }
    await mix
    clearInterval(sampler)
    const mixEnded = Date.now()

    const endsAt = new Map([...logs.entries()].map(([address, log]) => [address, log.length]))
    const doorEndsAt = doors.map((door) => door.log().length)
    for (const running of agents) problems.push(...kvProblems(running.agent, await running.readKv()))
    await Promise.all(agents.map((running) => running.close().catch(() => undefined)))
    for (const door of doors) door.child.kill("SIGTERM")
    for (const [i, door] of doors.entries()) {
      const code = await within(door.exited, EXIT_WAIT_MS)
      if (code !== 143) problems.push(`door ${i} stopped by SIGTERM ended with ${code}, not 143`)
    }
    const last = cluster.runners.filter(alive)
    for (const runner of last) runner.child.kill("SIGTERM")
    for (const runner of last) {
      const code = await within(runner.exited, EXIT_WAIT_MS)
      if (code !== 143) problems.push(`runner ${runner.address} stopped by SIGTERM at the end ended with ${code}, not 143`)
    }
    let left = leftovers(cluster.dir, shared, before)
    for (const deadline = Date.now() + EXIT_WAIT_MS; left.length > 0 && Date.now() < deadline; left = leftovers(cluster.dir, shared, before)) await sleep(250)
    if (left.length > 0) problems.push(`${left.length} process(es) left: ${left.map((pid) => `${pid} ${commandOf(pid).slice(0, 120)}`).join("; ")}`)
    killAll(left)

    for (const running of agents) problems.push(...callProblems(running.agent, shared))
    const injected = new Set<Cause>(faults.map((fault) => fault.kind))
    const atEnd = new Set<Cause>([...injected, "end"])
    const scan = (name: string, log: string, endAt: number) => {
      for (const line of [...unexplained(log.slice(0, endAt), injected), ...unexplained(log.slice(endAt), atEnd)]) problems.push(`${name} logged: ${line.slice(0, 600)}`)
    }
    for (const [address, log] of logs) scan(`runner ${address}`, log, endsAt.get(address) ?? 0)
    for (const [i, door] of doors.entries()) scan(`door ${i}`, door.log(), doorEndsAt[i]!)
    if (logDir !== undefined) {
      fs.mkdirSync(logDir, { recursive: true })
      for (const [address, log] of logs) fs.writeFileSync(path.join(logDir, `runner-${address.replace(":", "-")}.log`), log)
      for (const [i, door] of doors.entries()) fs.writeFileSync(path.join(logDir, `door-${i}.log`), door.log())
    }

    const failovers: Array<Failover> = faults.flatMap((fault, i) =>
      fault.kind === "join" ? [] : [failover(fault, start, owners[i]!, agents.map((running) => running.agent))])
    const rssBound = form.warmupMs === undefined ? [] : rssGrowth(rss, form.warmupMs, mixEnded - start - 2 * RSS_EVERY_MS)
    for (const entry of rssBound) {
      if (entry.highest - entry.warm > RSS_GROWTH_BOUND) problems.push(`${entry.name}: RSS grew ${((entry.highest - entry.warm) / 2 ** 20).toFixed(1)} MiB after warm-up (from ${(entry.warm / 2 ** 20).toFixed(1)} MiB)`)
    }
    const figures: SoakFigures = {
      form: form.name,
      seed,
      runners: form.runners,
      doors: form.doors,
      agents: form.agents,
      mixMs: mixEnded - start,
      calls: agents.reduce((sum, running) => sum + running.agent.calls.length, 0),
      outcomes: outcomes(agents.map((running) => running.agent)),
      faults,
      failovers,
      rss: rssBound,
      problems,
      wallMs: Date.now() - startedAt
    }
    console.log(resultsSection(figures))
    if (form.name === "long") writeSection(path.join(path.dirname(fileURLToPath(import.meta.url)), "results.md"), resultsSection(figures))
    for (const problem of problems.slice(0, 50)) console.log(`  FAILED ${problem}`)
    console.log(`soak:cluster: ${problems.length === 0 ? "passed" : `failed (${problems.length} problems)`}`)
    return problems.length === 0 ? 0 : 1
  } finally {
    await Promise.all(agents.map((running) => running.close().catch(() => undefined)))
    for (const door of doors) door.child.kill("SIGKILL")
    await Promise.all(doors.map((door) => door.exited))
    await cluster?.stop()
    if (cluster !== undefined) killAll(leftovers(cluster.dir, shared, before))
    fs.rmSync(shared, { recursive: true, force: true })
  }
}

/** For each process read before `warmupMs` and still at `endMs`: its reading at warm-up and its highest after. */
const rssGrowth = (samples: ReadonlyArray<RssSample>, warmupMs: number, endMs: number) => {
  const names = [...new Set(samples.map((sample) => sample.name))]
  return names.flatMap((name) => {
    const own = samples.filter((sample) => sample.name === name && sample.rss > 0)
    const warm = own.find((sample) => sample.at >= warmupMs)
    if (warm === undefined || !own.some((sample) => sample.at < warmupMs) || !own.some((sample) => sample.at >= endMs)) return []
    const after = own.filter((sample) => sample.at >= warm.at)
    return [{ name, warm: warm.rss, highest: Math.max(...after.map((sample) => sample.rss)), last: after[after.length - 1]!.rss }]
  })
}

const main = async () => {
  const skip = postgresSkipReason()
  if (skip !== undefined) throw new Error(`the cluster soak needs PostgreSQL: ${skip}`)
  const form = process.argv.includes("--short") || process.env.VEYYON_SOAK_SHORT === "1" ? SHORT : LONG
  const seed = Number(process.env.VEYYON_SOAK_SEED ?? Date.now() % 2 ** 31)
  const mixMs = process.env.VEYYON_SOAK_SECONDS === undefined ? form.mixMs : Number(process.env.VEYYON_SOAK_SECONDS) * 1000
  console.log(`soak:cluster (${form.name}): ${form.runners} runners, ${form.doors} doors, ${form.agents} agents, ${mixMs / 1000} s, seed ${seed} (VEYYON_SOAK_SEED=${seed} replays its faults)`)
  const deadline = setTimeout(() => {
    console.log(`soak:cluster: failed (did not finish within ${(mixMs + OVERHEAD_MS) / 1000} s)`)
    emergency()
    process.exit(1)
  }, mixMs + OVERHEAD_MS)
  deadline.unref()
  process.exitCode = await run(form, seed, mixMs, process.env.VEYYON_SOAK_LOG_DIR)
  clearTimeout(deadline)
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      emergency()
      console.log("soak:cluster: failed (stopped by a signal)")
      process.exit(130)
    })
  }
  main().catch((error) => {
    console.error(error)
    console.log("soak:cluster: failed")
    process.exitCode = 1
  })
}
