#!/usr/bin/env node
import { readFileSync } from "node:fs"

// `veyyon --version` answers from package.json: loading the CLI would take most of a second.
if (process.argv.length === 3 && process.argv[2] === "--version") {
  process.stdout.write(`${JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version}\n`)
} else {
  import("../dist/cli/main.js").catch((error) => {
    if (error?.code === "ERR_MODULE_NOT_FOUND" && String(error.message).includes("main.js")) {
      process.stderr.write("veyyon: the CLI is not built; run `npm run build` in the package (npm ci does it too).\n")
      process.exit(3)
    }
    throw error
  })
}
