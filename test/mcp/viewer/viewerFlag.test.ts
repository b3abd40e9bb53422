/**
 * `veyyon mcp --viewer`'s refusals: it needs `--http` (the page is served beside `/mcp`),
 * and it is not available with `--cluster` (or `VEYYON_CLUSTER=1`) yet; each says why
 * with exit code 2, before anything starts.
 */
import { describe, expect, it } from "vitest"
import { childEnv, runCli, tempDir } from "../../cli/support.ts"

const env = (extra: Record<string, string> = {}) => childEnv(tempDir("veyyon-viewer-flag-"), extra)

describe("veyyon mcp --viewer", () => {
  it("needs --http", async () => {
    for (const run of [await runCli(["mcp", "--viewer"], { env: env() }), await runCli(["mcp"], { env: env({ VEYYON_MCP_VIEWER: "1" }) })]) {
      expect(run.code).toBe(2)
      expect(run.stderr).toContain("--viewer applies only with --http")
    }
  })

  it("is refused with --cluster, saying why", async () => {
    for (const run of [
      await runCli(["mcp", "--http", "--viewer", "--cluster"], { env: env() }),
      await runCli(["mcp", "--http", "--viewer"], { env: env({ VEYYON_CLUSTER: "1" }) })
    ]) {
      expect(run.code).toBe(2)
      expect(run.stderr).toContain("--viewer is not available with --cluster yet: the cells' records and live output live on the runners")
    }
  })
})
