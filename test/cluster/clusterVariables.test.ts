/** The cluster's variables go through the settings reader: trimmed, an empty or blank value unset. */
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import * as os from "node:os"
import { DEFAULT_SHARDS, resolveClusterSettings } from "../../src/cluster/ClusterSettings.ts"
import { resolveWorkspaceSettings } from "../../src/cluster/RunnerWorkspace.ts"
import { defaultWorkspaceRoot } from "../../src/services/storage/SessionWorkspace.ts"

const url = "postgres://u:p@127.0.0.1:5432/db"
const secret = "0123456789abcdef".repeat(4)

describe("cluster variables", () => {
  it("VEYYON_CLUSTER_* values are trimmed, and a blank one counts as unset", () => {
    const settings = Result.getOrThrow(resolveClusterSettings({ secret }, {
      VEYYON_CLUSTER_POSTGRES_URL: ` ${url} `,
      VEYYON_CLUSTER_LISTEN: " 127.0.0.1:4000 ",
      VEYYON_CLUSTER_ADVERTISE: "  ",
      VEYYON_CLUSTER_SHARDS: " "
    }))
    expect(settings).toMatchObject({ postgresUrl: url, listen: { host: "127.0.0.1", port: 4000 }, advertise: { host: "127.0.0.1", port: 4000 }, shards: DEFAULT_SHARDS })
    const missing = resolveClusterSettings({ secret }, { VEYYON_CLUSTER_POSTGRES_URL: " " })
    expect(Result.isFailure(missing) && missing.failure.message).toContain("no Postgres URL")
    const bad = resolveClusterSettings({ secret, postgresUrl: url }, { VEYYON_CLUSTER_SHARDS: " ten " })
    expect(Result.isFailure(bad) && bad.failure.message).toBe("VEYYON_CLUSTER_SHARDS: \"ten\" is not a positive whole number")
  })

  it("VEYYON_RUNNER_WORKSPACE and VEYYON_RUNNER_ALLOWED_ROOTS: trimmed, blank as unset, a relative path refused", () => {
    expect(Result.getOrThrow(resolveWorkspaceSettings({ VEYYON_RUNNER_WORKSPACE: " ", VEYYON_RUNNER_ALLOWED_ROOTS: "  " })))
      .toEqual({ root: defaultWorkspaceRoot("runner"), allowedRoots: [] })
    expect(Result.getOrThrow(resolveWorkspaceSettings({ VEYYON_RUNNER_WORKSPACE: " /srv/runner " })).root).toBe("/srv/runner")
    const relative = resolveWorkspaceSettings({ VEYYON_RUNNER_WORKSPACE: "runner" })
    expect(Result.isFailure(relative) && relative.failure.message).toContain("must be an absolute path")
    const tmp = os.tmpdir()
    expect(Result.getOrThrow(resolveWorkspaceSettings({ VEYYON_RUNNER_ALLOWED_ROOTS: ` ${tmp} ` })).allowedRoots.length).toBe(1)
  })
})
