#!/usr/bin/env node
/**
 * Mutation testing of the pure modules (`npm run test:mutation`): Stryker mutates each
 * TypeScript module of `mutation.config.mjs` in turn and runs that module's own test files
 * against every mutant; `scripts/mutation_python.py` does the same for a Python runner
 * module with its unittest files, reporting in Stryker's shape. A module passes when its score, counting survivors the config lists as
 * equivalent (with a reason) as neither killed nor survived, reaches the threshold. An
 * equivalent entry that no longer matches a survivor fails the run too, so the list
 * cannot go stale. `node scripts/mutation.mjs <module-path>...` runs only those modules.
 *
 * Runs are incremental: each module's last report is kept in `test/mutation/` (committed),
 * and Stryker re-runs only the mutants whose code or covering tests changed since, so CI
 * checks every change without repeating the unchanged work. Stryker reads and rewrites a
 * temporary copy of that baseline, so a run leaves the checkout as it found it; `--update`
 * writes the fresh reports back to `test/mutation/` (without the paths of the machine that
 * ran them). `--force` runs every mutant. A Python module is mutated whole each run (under
 * a minute).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const { default: config } = await import(path.join(root, "mutation.config.mjs"))
const flags = ["--force", "--update"]
const force = process.argv.includes("--force")
const update = process.argv.includes("--update")
const only = process.argv.slice(2).filter((arg) => !flags.includes(arg))
const modules = only.length === 0 ? config.modules : config.modules.filter((entry) => only.includes(entry.module))
if (modules.length === 0) {
  console.error(`mutation: no module of mutation.config.mjs matches ${only.join(", ")}`)
  process.exit(2)
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-mutation-"))
process.on("exit", () => fs.rmSync(work, { recursive: true, force: true }))

/** The source text a mutant replaced. */
const originalOf = (source, { start, end }) => {
  const lines = source.split("\n")
  if (start.line === end.line) return lines[start.line - 1].slice(start.column - 1, end.column - 1)
  return [
    lines[start.line - 1].slice(start.column - 1),
    ...lines.slice(start.line, end.line - 1),
    lines[end.line - 1].slice(0, end.column - 1)
  ].join("\n")
}

/** The committed incremental baseline of a TypeScript module. */
const baselineOf = (entry) => path.join(root, "test", "mutation", `${entry.module.replace(/^src\//, "").replace(/[/.]/g, "-")}.json`)

/**
 * An incremental report as committed: Stryker records the directory it ran in, its options
 * (temporary paths among them) and the stack of each failed assertion, none of which it
 * reads back; they are left out (a failure keeps its message).
 */
const portableReport = (text) => {
  const { projectRoot: _projectRoot, config: _config, ...report } = JSON.parse(text)
  for (const file of Object.values(report.files)) {
    for (const mutant of file.mutants) {
      if (typeof mutant.statusReason === "string") {
        mutant.statusReason = mutant.statusReason.split(/\n\s+at /)[0].replace(/[^\s'"]*veyyon-mutation-\w+\/sandbox\/(sandbox-\w+\/)?/g, "")
      }
    }
  }
  return `${JSON.stringify(report, null, 2)}\n`
}

/** Runs Stryker over a TypeScript module: undefined once its report is written, else why not. */
const strykerRun = (entry, report) => {
  const baseline = baselineOf(entry)
  const incrementalFile = path.join(work, "incremental", path.basename(baseline))
  fs.mkdirSync(path.dirname(incrementalFile), { recursive: true })
  if (fs.existsSync(baseline)) fs.copyFileSync(baseline, incrementalFile)
  const strykerConfig = path.join(work, "stryker.config.json")
  fs.writeFileSync(strykerConfig, JSON.stringify({
    testRunner: "vitest",
    plugins: ["@stryker-mutator/vitest-runner"],
    vitest: { configFile: "vitest.mutation.config.ts", related: false },
    mutate: [entry.module],
    reporters: ["json"],
    jsonReporter: { fileName: report },
    coverageAnalysis: "perTest",
    concurrency: 2,
    timeoutMS: 10_000,
    incremental: true,
    incrementalFile,
    force,
    tempDirName: path.join(work, "sandbox"),
    cleanTempDir: "always",
    // TypeScript 7 has no JavaScript API for Stryker's tsconfig rewriting; the tests run sources through vitest.
    tsconfigFile: "no-tsconfig-to-rewrite.json",
    logLevel: "warn"
  }))
  const run = spawnSync(process.execPath, [path.join(root, "node_modules", "@stryker-mutator", "core", "bin", "stryker.js"), "run", strykerConfig], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, VEYYON_MUTATION_TESTS: entry.tests.join(",") }
  })
  if (run.status !== 0 || !fs.existsSync(report)) return `stryker exited with ${run.status ?? run.signal}`
  if (update) fs.writeFileSync(baseline, portableReport(fs.readFileSync(incrementalFile, "utf8")))
  return undefined
}

/** Runs our Python mutation script over a runner module (Stryker mutates only JavaScript and TypeScript). */
const pythonRun = (entry, report) => {
  const run = spawnSync("python3", [path.join(root, "scripts", "mutation_python.py"), entry.module, report, ...entry.tests], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"]
  })
  return run.status === 0 && fs.existsSync(report) ? undefined : `mutation_python.py exited with ${run.status ?? run.signal}`
}

const runModule = (entry) => {
  const report = path.join(work, `${path.basename(entry.module)}.json`)
  const failure = (entry.module.endsWith(".py") ? pythonRun : strykerRun)(entry, report)
  if (failure !== undefined) return { entry, failure }
  const file = JSON.parse(fs.readFileSync(report, "utf8")).files[entry.module]
  const source = fs.readFileSync(path.join(root, entry.module), "utf8")
  const equivalent = entry.equivalent ?? []
  const used = new Set()
  const survivors = []
  let killed = 0
  let counted = 0
  for (const mutant of file.mutants) {
    if (mutant.status === "Killed" || mutant.status === "Timeout") {
      killed++
      counted++
    } else if (mutant.status === "Survived" || mutant.status === "NoCoverage") {
      const original = originalOf(source, mutant.location)
      const known = equivalent.findIndex((e) =>
        e.mutator === mutant.mutatorName && original.includes(e.original) && (e.replacement === undefined || e.replacement === mutant.replacement)
      )
      if (known >= 0) {
        used.add(known)
        continue
      }
      counted++
      survivors.push({ ...mutant, original })
    } else if (mutant.status !== "Ignored" && mutant.status !== "RuntimeError" && mutant.status !== "CompileError") {
      return { entry, failure: `mutant ${mutant.id} ended ${mutant.status}: ${mutant.statusReason ?? ""}` }
    }
  }
  const stale = equivalent.filter((_, index) => !used.has(index))
  const score = counted === 0 ? 100 : (100 * killed) / counted
  return { entry, score, killed, counted, survivors, stale, equivalents: used.size }
}

let failed = false
const rows = []
for (const entry of modules) {
  console.log(`mutation: ${entry.module} against ${entry.tests.join(", ")}`)
  const result = runModule(entry)
  if (result.failure !== undefined) {
    failed = true
    rows.push(`${entry.module}: FAILED (${result.failure})`)
    continue
  }
  const threshold = entry.threshold ?? config.threshold
  const pass = result.score >= threshold && result.stale.length === 0
  failed ||= !pass
  for (const mutant of result.survivors) {
    const { line, column } = mutant.location.start
    console.log(`  survived ${mutant.mutatorName} ${entry.module}:${line}:${column}\n    - ${mutant.original.split("\n")[0]}\n    + ${mutant.replacement.split("\n")[0]}`)
  }
  for (const entryStale of result.stale) console.log(`  equivalent entry matches no survivor (remove it): ${JSON.stringify(entryStale)}`)
  rows.push(
    `${entry.module}: ${result.score.toFixed(1)}% (${result.killed}/${result.counted} killed, ${result.equivalents} equivalent) ` +
      `threshold ${threshold}% ${pass ? "ok" : "FAILED"}`
  )
}
console.log(`\nmutation scores:\n${rows.map((row) => `  ${row}`).join("\n")}`)
process.exit(failed ? 1 : 0)
