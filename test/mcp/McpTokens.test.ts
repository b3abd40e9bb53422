/**
 * The HTTP door's tokens from VEYYON_MCP_TOKEN or VEYYON_MCP_TOKENS_FILE: one token per
 * line, each long enough, from a private regular file; never both variables.
 */
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parseTokens, resolveTokens } from "../../src/mcp/McpTokens.ts"
import { tempDir } from "../support/tempDirs.ts"

const A = "a".repeat(32)
const B = "b".repeat(40)

const tokensFile = (text: string, mode = 0o600) => {
  const dir = tempDir("veyyon-tokens-")
  const file = path.join(dir, "tokens")
  fs.writeFileSync(file, text, { mode })
  fs.chmodSync(file, mode)
  return file
}

describe("parseTokens", () => {
  it("reads one token a line, skipping blank lines and comments, each once", () => {
    expect(Result.getOrThrow(parseTokens(`# clients\n${A}\n\n  ${B}  \r\n${A}\n`, "f"))).toEqual([A, B])
  })

  it("names the line of a short token or one with spaces, and refuses a file without one", () => {
    const short = parseTokens(`${A}\nshort\n`, "f")
    expect(Result.isFailure(short) && short.failure).toMatch(/line 2: the token is 5 characters long; each must have at least 32/)
    const spaced = parseTokens(`${A} ${B}\n`, "f")
    expect(Result.isFailure(spaced) && spaced.failure).toContain("line 1")
    expect(Result.isFailure(parseTokens("# none\n\n", "f"))).toBe(true)
  })
})

describe("resolveTokens", () => {
  it("the one token, the file's tokens, or none (the door makes one)", () => {
    expect(Result.getOrThrow(resolveTokens("given", undefined))).toEqual(["given"])
    expect(Result.getOrThrow(resolveTokens(undefined, undefined))).toBeUndefined()
    expect(Result.getOrThrow(resolveTokens(undefined, tokensFile(`${A}\n${B}\n`)))).toEqual([A, B])
  })

  it("refuses both variables, a file others may read, a symbolic link and a missing file", () => {
    const file = tokensFile(`${A}\n`)
    const both = resolveTokens("given", file)
    expect(Result.isFailure(both) && both.failure).toContain("not both")
    const open = resolveTokens(undefined, tokensFile(`${A}\n`, 0o644))
    expect(Result.isFailure(open) && open.failure).toContain("chmod 600")
    const link = path.join(path.dirname(file), "link")
    fs.symlinkSync(file, link)
    const linked = resolveTokens(undefined, link)
    expect(Result.isFailure(linked) && linked.failure).toContain("symbolic link")
    expect(Result.isFailure(resolveTokens(undefined, path.join(path.dirname(file), "absent")))).toBe(true)
  })
})
