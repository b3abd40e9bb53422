/**
 * The cluster soak's figures as a section of `bench/results.md`: the run, calls by
 * outcome, each fault with its fail-over, RSS after warm-up, and the verdict.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import type { Fault } from "./faults.ts"
import type { Failover } from "./verdict.ts"
import { quantile } from "../stats.ts"

/** The heading that starts the soak's section; `bench/run.ts` keeps the section when it rewrites the page. */
export const SOAK_HEADING = "## Cluster chaos soak"

/** What a soak run measured. */
export interface SoakFigures {
  readonly form: "short" | "long"
  readonly seed: number
  readonly runners: number
  readonly doors: number
  readonly agents: number
  readonly mixMs: number
  readonly calls: number
  readonly outcomes: Readonly<Record<string, number>>
  readonly faults: ReadonlyArray<Fault>
  readonly failovers: ReadonlyArray<Failover>
  readonly rss: ReadonlyArray<{ readonly name: string; readonly warm: number; readonly highest: number; readonly last: number }>
  readonly problems: ReadonlyArray<string>
  readonly wallMs: number
}

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1)
const seconds = (ms: number) => (ms / 1000).toFixed(1)

const spread = (ms: ReadonlyArray<number>) =>
  ms.length === 0 ? "-" : `${seconds(quantile(ms, 0.5))} / ${seconds(Math.max(...ms))}`

const OUTCOMES: Record<string, string> = {
  "ok": "ran, answered",
  "rehomed": "ran in a fresh kernel (the moved-session or restored-snapshot notice)",
  "lost": "lost with its runner (the lost-cell notice; not run again)",
  "already-ran": "already ran, its answer lost (the already-ran notice)",
  "database-did-not-run": "refused: the database was unreachable, did not run",
  "database-may-have-run": "given up: the database was unreachable, may have run",
  "failed": "failed otherwise",
  "unanswered": "unanswered"
}

/** The section's markdown. */
export const resultsSection = (figures: SoakFigures): string => {
  const count = (kind: string) => figures.faults.filter((fault) => fault.kind === kind).length
  const lines = [
    `${SOAK_HEADING} (\`npm run soak:cluster\`${figures.form === "short" ? " -- --short" : ""})`,
    "",
    `Measured ${new Date().toISOString().slice(0, 10)} on ${os.cpus().length} cores, Node ${process.version}, load average ${os.loadavg().map((value) => value.toFixed(2)).join(" ")} at the end; seed ${figures.seed}.`,
    `${figures.runners} runners at the start, ${figures.doors} MCP doors, ${figures.agents} agents, a ${seconds(figures.mixMs)} s mix (${seconds(figures.wallMs)} s in all); shard lock expiry 9 s.`,
    `Faults: ${count("kill")} kill -9, ${count("stop")} SIGTERM, ${count("join")} joins, ${count("postgres")} Postgres restart (down 2 s).`,
    "",
    "| calls | count |",
    "|---|---:|",
    ...Object.entries(figures.outcomes).map(([outcome, n]) => `| ${OUTCOMES[outcome] ?? outcome} | ${n} |`),
    `| all | ${figures.calls} |`,
    "",
    "Each fault, and for the sessions it hit (a kill or stop: those last answered by its runner; a restart: all) the time from the fault to each one's first answer from elsewhere, median / max:",
    "",
    "| at | fault | runner | fault took | sessions hit | fail-over, s |",
    "|---:|---|---|---:|---:|---:|",
    ...figures.faults.map((fault) => {
      const over = figures.failovers.find((entry) => entry.fault === fault)
      return `| ${seconds(fault.at)} s | ${fault.kind} | ${fault.runner ?? "-"} | ${fault.tookMs} ms | ${over?.agents ?? "-"} | ${over === undefined ? "-" : spread(over.ms)} |`
    }),
    ""
  ]
  for (const kind of ["kill", "stop", "postgres"]) {
    const ms = figures.failovers.filter((entry) => entry.fault.kind === kind).flatMap((entry) => entry.ms)
    if (ms.length > 0) lines.push(`- ${kind}: fail-over over every session hit, median ${seconds(quantile(ms, 0.5))} s, max ${seconds(Math.max(...ms))} s (${ms.length} sessions)`)
  }
  if (figures.rss.length > 0) {
    lines.push("", "RSS of the long-lived processes (the doors, and the runners that lived through the run), MiB:", "", "| process | after warm-up | highest after | at the end |", "|---|---:|---:|---:|")
    for (const entry of figures.rss) lines.push(`| ${entry.name} | ${mib(entry.warm)} | ${mib(entry.highest)} | ${mib(entry.last)} |`)
  }
  lines.push("", figures.problems.length === 0 ? "Verdict: passed, every check." : `Verdict: failed, ${figures.problems.length} problems:`)
  for (const problem of figures.problems.slice(0, 20)) lines.push(`- ${problem.replaceAll("|", "\\|")}`)
  return lines.join("\n") + "\n"
}

/** Replaces the soak's section of `file` (or adds it at the end). */
export const writeSection = (file: string, section: string): void => {
  const page = fs.readFileSync(file, "utf8")
  const at = page.indexOf(SOAK_HEADING)
  fs.writeFileSync(file, `${(at < 0 ? page : page.slice(0, at)).trimEnd()}\n\n${section}`)
}

/** The soak's section of a page, or "" (for a writer of the page that must keep it). */
export const sectionOf = (page: string): string => {
  const at = page.indexOf(SOAK_HEADING)
  return at < 0 ? "" : page.slice(at)
}
