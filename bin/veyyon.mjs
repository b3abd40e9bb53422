#!/usr/bin/env node
import("../dist/cli/main.js").catch((error) => {
  if (error?.code === "ERR_MODULE_NOT_FOUND" && String(error.message).includes("main.js")) {
    process.stderr.write("veyyon: the CLI is not built; run `npm run build` in the package (npm ci does it too).\n")
    process.exit(3)
  }
  throw error
})
