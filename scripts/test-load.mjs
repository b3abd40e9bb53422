#!/usr/bin/env node
/**
 * `npm run test:load`: the whole suite (`npm test`) with two CPU-bound processes running
 * beside it, as on a busy machine. The hogs end with the suite, also when it fails or
 * this script is interrupted, and on their own if this script dies.
 * Extra arguments go to vitest (e.g. a test file).
 */
import { spawn } from "node:child_process"

const HOGS = 2
const parent = process.pid
const hogSource = `const parent = ${parent}; for (let n = 1; ; n++) { if (n % 50000000 === 0 && process.ppid !== parent) process.exit(0) }`
const hogs = Array.from({ length: HOGS }, () => spawn(process.execPath, ["-e", hogSource], { stdio: "ignore" }))

const stopHogs = () => {
  for (const hog of hogs) if (hog.exitCode === null && hog.signalCode === null) hog.kill("SIGKILL")
}
process.on("exit", stopHogs)

const suite = spawn("npx", ["vitest", "run", ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, VEYYON_PYTHON_INTEGRATION: "1" }
})
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    suite.kill(signal)
    stopHogs()
    process.exit(130)
  })
}
console.log(`test:load: running the suite beside ${HOGS} CPU-bound processes (${hogs.map((h) => h.pid).join(", ")})`)
suite.once("exit", (code, signal) => {
  stopHogs()
  process.exit(code ?? (signal === null ? 1 : 128))
})
