/**
 * Spare kernels by front door: on for the long-lived MCP doors (one for Python), off for
 * one-shot `veyyon eval`, the REPL (one session, no resets) and the embedded layer unless
 * configured; `VEYYON_KERNEL_SPARES` overrides every door.
 */
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { doorSettings } from "../../src/cli/commands/mcp.ts"
import { cliSettings, DOOR_SPARES, LONG_LIVED_IDLE_TTL_MS } from "../../src/cli/session.ts"
import { idleTtlMsOf, resolveSettings, type SettingsContext, type SettingsInput, sparesOf } from "../../src/services/config/Settings.ts"

const context: SettingsContext = { tmpdir: "/tmp", cwd: "/work/project", home: "/home/ada", uid: 1000 }

const sparesBy = (input: SettingsInput, env: Record<string, string> = {}) => {
  const settings = Result.getOrThrow(resolveSettings(input, env, context))
  return { py: sparesOf(settings, "py", 0), js: sparesOf(settings, "js", 0), rb: sparesOf(settings, "rb", 0), idle: idleTtlMsOf(settings, "py") }
}

describe("spare kernels by front door", () => {
  it("the MCP doors keep one spare Python kernel; other backends none", () => {
    expect(DOOR_SPARES).toBe(1)
    expect(sparesBy(doorSettings("stdio"))).toMatchObject({ py: 1, js: 0, rb: 0, idle: LONG_LIVED_IDLE_TTL_MS })
    expect(sparesBy(doorSettings("http"))).toMatchObject({ py: 1, js: 0, rb: 0 })
  })

  it("veyyon eval, the REPL and the embedded layer start none ahead", () => {
    expect(sparesBy(cliSettings())).toMatchObject({ py: 0, js: 0 })
    expect(sparesBy(cliSettings({ longLived: true, language: "js" }))).toMatchObject({ py: 0, js: 0, idle: LONG_LIVED_IDLE_TTL_MS })
    expect(sparesBy({})).toMatchObject({ py: 0, js: 0 })
  })

  it("VEYYON_KERNEL_SPARES overrides every door's default", () => {
    expect(sparesBy(doorSettings("stdio"), { VEYYON_KERNEL_SPARES: "0" })).toMatchObject({ py: 0, js: 0 })
    expect(sparesBy(cliSettings(), { VEYYON_KERNEL_SPARES: "2" })).toMatchObject({ py: 2, js: 2 })
  })
})
