import { Result } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { resolveSecret } from "../../src/cluster/ClusterSecret.ts"
import { isAllowedEnvName, runnerEnv } from "../../src/services/isolation/EnvPolicy.ts"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-secret-"))
const secret = "f".repeat(64)
const fileWith = (name: string, mode: number) => {
  const file = path.join(dir, name)
  fs.writeFileSync(file, `${secret}\n`, { mode })
  fs.chmodSync(file, mode)
  return file
}

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

describe("the cluster secret", () => {
  it("reads a 0600 file of the running user", () => {
    expect(resolveSecret(undefined, { VEYYON_CLUSTER_SECRET_FILE: fileWith("ok", 0o600) })).toEqual(Result.succeed(secret))
  })

  it.skipIf(process.platform === "win32")("refuses a file others may read, a symbolic link, a missing file, and both variables at once", () => {
    const open = resolveSecret(undefined, { VEYYON_CLUSTER_SECRET_FILE: fileWith("open", 0o644) })
    expect(Result.isFailure(open) && open.failure).toMatch(/group or other users may read or write it \(mode 0644\)/)
    const link = path.join(dir, "link")
    fs.symlinkSync(fileWith("target", 0o600), link)
    expect(Result.isFailure(resolveSecret(undefined, { VEYYON_CLUSTER_SECRET_FILE: link }))).toBe(true)
    expect(Result.isFailure(resolveSecret(undefined, { VEYYON_CLUSTER_SECRET_FILE: path.join(dir, "missing") }))).toBe(true)
    const both = resolveSecret(undefined, { VEYYON_CLUSTER_SECRET_FILE: fileWith("both", 0o600), VEYYON_CLUSTER_SECRET: secret })
    expect(Result.isFailure(both) && both.failure).toMatch(/not both/)
  })

  it.skipIf(process.getuid?.() !== 0)("refuses a file owned by another user", () => {
    const file = fileWith("theirs", 0o600)
    fs.chownSync(file, 65534, 65534)
    const theirs = resolveSecret(undefined, { VEYYON_CLUSTER_SECRET_FILE: file })
    expect(Result.isFailure(theirs) && theirs.failure).toMatch(/owned by uid 65534/)
  })

  it("never reaches a kernel's environment, by name or through the caller's extra entries", () => {
    expect(isAllowedEnvName("VEYYON_CLUSTER_SECRET")).toBe(false)
    expect(isAllowedEnvName("VEYYON_CLUSTER_SECRET_FILE")).toBe(false)
    const env = runnerEnv({ PATH: "/usr/bin", VEYYON_CLUSTER_SECRET: secret, VEYYON_CLUSTER_SECRET_FILE: "/x" }, { extra: { VEYYON_CLUSTER_SECRET: secret } })
    expect(Object.keys(env).filter((name) => name.includes("SECRET"))).toEqual([])
  })
})
