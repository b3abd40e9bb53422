import * as NodeFs from "node:fs"
import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

/** The package's own entries (`veyyon-eval`, `veyyon-eval/render`...) resolved to their sources, as package.json exports them. */
const packageExports = JSON.parse(NodeFs.readFileSync(new URL("./package.json", import.meta.url), "utf8")).exports as Record<
  string,
  string | { readonly default: string }
>
const entryAliases = Object.entries(packageExports).flatMap(([subpath, target]) =>
  typeof target === "string"
    ? []
    : [{
      find: new RegExp(`^veyyon-eval${subpath.slice(1).replace(/[/.]/g, "\\$&")}$`),
      replacement: fileURLToPath(new URL(target.default.replace(/^\.\/dist\//, "./src/").replace(/\.js$/, ".ts"), import.meta.url))
    }]
)

export default defineConfig({
  resolve: { alias: entryAliases },
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/globalSetup.ts"],
    reporters: ["default", "./test/support/skipReporter.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 120_000
  }
})
