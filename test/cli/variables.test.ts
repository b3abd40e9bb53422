/** The variables the CLI reads besides the settings: each through the settings reader (trimmed, blank as unset). */
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { colorAllowed, dumbTerminal } from "../../src/cli/color.ts"
import { readMcpVariables } from "../../src/cli/commands/mcp.ts"
import { DEFAULT_PROGRESS_INTERVAL_MS, MAX_PROGRESS_INTERVAL_MS } from "../../src/mcp/Progress.ts"

const tty = { isTTY: true }

describe("colour and the terminal", () => {
  it("colour only on a terminal, with NO_COLOR unset (or empty or blank) and TERM not dumb", () => {
    expect(colorAllowed(tty, {})).toBe(true)
    expect(colorAllowed({ isTTY: false }, {})).toBe(false)
    expect(colorAllowed(tty, { NO_COLOR: "1" })).toBe(false)
    expect(colorAllowed(tty, { NO_COLOR: "0" })).toBe(false)
    expect(colorAllowed(tty, { NO_COLOR: "" })).toBe(true)
    expect(colorAllowed(tty, { NO_COLOR: "  " })).toBe(true)
    expect(colorAllowed(tty, { TERM: "dumb" })).toBe(false)
    expect(colorAllowed(tty, { TERM: "xterm-256color" })).toBe(true)
  })

  it("TERM=dumb (trimmed) is a terminal without escape sequences", () => {
    expect(dumbTerminal({ TERM: " dumb " })).toBe(true)
    expect(dumbTerminal({ TERM: "xterm" })).toBe(false)
    expect(dumbTerminal({})).toBe(false)
  })
})

describe("veyyon mcp's variables", () => {
  const read = (env: Record<string, string>) => Result.getOrThrow(readMcpVariables(env))

  it("default: the default progress interval, no token or workspace, not a cluster client", () => {
    expect(read({})).toEqual({ progressIntervalMs: DEFAULT_PROGRESS_INTERVAL_MS, token: undefined, workspace: undefined, cluster: false, viewer: false })
  })

  it("VEYYON_MCP_PROGRESS_INTERVAL_MS sets the interval within its bounds; blank or unreadable keeps the default", () => {
    expect(read({ VEYYON_MCP_PROGRESS_INTERVAL_MS: " 250 " }).progressIntervalMs).toBe(250)
    expect(read({ VEYYON_MCP_PROGRESS_INTERVAL_MS: "999999" }).progressIntervalMs).toBe(MAX_PROGRESS_INTERVAL_MS)
    expect(read({ VEYYON_MCP_PROGRESS_INTERVAL_MS: "  " }).progressIntervalMs).toBe(DEFAULT_PROGRESS_INTERVAL_MS)
    expect(read({ VEYYON_MCP_PROGRESS_INTERVAL_MS: "soon" }).progressIntervalMs).toBe(DEFAULT_PROGRESS_INTERVAL_MS)
  })

  it("VEYYON_MCP_TOKEN and VEYYON_MCP_WORKSPACE are trimmed, and blank counts as unset", () => {
    expect(read({ VEYYON_MCP_TOKEN: " s3cret ", VEYYON_MCP_WORKSPACE: " /srv/ws " })).toMatchObject({ token: "s3cret", workspace: "/srv/ws" })
    expect(read({ VEYYON_MCP_TOKEN: " ", VEYYON_MCP_WORKSPACE: "" })).toMatchObject({ token: undefined, workspace: undefined })
  })

  it("VEYYON_MCP_VIEWER turns the viewer page on, as a boolean", () => {
    expect(read({ VEYYON_MCP_VIEWER: " 1 " }).viewer).toBe(true)
    expect(read({ VEYYON_MCP_VIEWER: "off" }).viewer).toBe(false)
    expect(Result.isFailure(readMcpVariables({ VEYYON_MCP_VIEWER: "maybe" }))).toBe(true)
  })

  it("VEYYON_CLUSTER is a boolean like every other; an unreadable value fails naming it", () => {
    for (const on of ["1", "true", " yes ", "ON"]) expect(read({ VEYYON_CLUSTER: on }).cluster).toBe(true)
    for (const off of ["0", "false", "no", "off", " "]) expect(read({ VEYYON_CLUSTER: off }).cluster).toBe(false)
    const bad = readMcpVariables({ VEYYON_CLUSTER: "please" })
    expect(Result.isFailure(bad) && bad.failure).toMatchObject({ source: "VEYYON_CLUSTER", problem: expect.stringContaining("1/0, true/false") })
  })
})
