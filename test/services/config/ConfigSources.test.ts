import { describe, expect, it } from "@effect/vitest"
import { Config, Result } from "effect"
import { fromSettings, fromVariables, optionalSetting, readConfig, setting } from "../../../src/services/config/ConfigSources.ts"
import { FlagText, PositiveIntText, TrimmedText } from "../../../src/services/config/Spellings.ts"

const names = (path: string) =>
  ({
    "a.size": { variables: ["NEW_SIZE", "OLD_SIZE"], olderKeys: [["legacy", "size"]] },
    "a.name": { variables: ["A_NAME"], olderKeys: [] }
  })[path]

const size = setting(PositiveIntText, "a.size").pipe(Config.withDefault(3))

const read = <A>(config: Config.Config<A>, env: Record<string, string | undefined>, object: unknown) =>
  readConfig(config, fromSettings(env, object, names))

describe("fromSettings", () => {
  it("reads a setting from its variable, then the object, then its older key, then the default", () => {
    const object = { a: { size: 5 }, legacy: { size: 7 } }
    expect(Result.getOrThrow(read(size, { NEW_SIZE: "9" }, object))).toBe(9)
    expect(Result.getOrThrow(read(size, {}, object))).toBe(5)
    expect(Result.getOrThrow(read(size, {}, { legacy: { size: 7 } }))).toBe(7)
    expect(Result.getOrThrow(read(size, {}, {}))).toBe(3)
  })

  it("tries a setting's variables newest first, and an empty or blank one counts as unset", () => {
    expect(Result.getOrThrow(read(size, { NEW_SIZE: "9", OLD_SIZE: "8" }, {}))).toBe(9)
    expect(Result.getOrThrow(read(size, { OLD_SIZE: "8" }, { a: { size: 5 } }))).toBe(8)
    expect(Result.getOrThrow(read(size, { NEW_SIZE: " ", OLD_SIZE: "" }, { a: { size: 5 } }))).toBe(5)
  })

  it("names the variable that held a bad value, and leaves a setting without a variable to the object", () => {
    const bad = read(size, { NEW_SIZE: "0", OLD_SIZE: "2" }, {})
    expect(Result.isFailure(bad) && bad.failure).toMatchObject({
      source: "NEW_SIZE",
      problem: "\"0\" is not a positive whole number; unset it for the default."
    })
    const older = read(size, { OLD_SIZE: "x" }, {})
    expect(Result.isFailure(older) && older.failure.source).toBe("OLD_SIZE")
    expect(Result.getOrThrow(read(optionalSetting(TrimmedText, "a.other"), { A_OTHER: "x" }, { a: { other: "y" } }))).toBe("y")
  })

  it("names the object's key when the object holds a value its setting cannot read", () => {
    const bad = read(setting(FlagText, "a.name"), {}, { a: { name: "maybe" } })
    expect(Result.isFailure(bad) && bad.failure).toMatchObject({ source: "settings object", problem: expect.stringContaining("a.name: ") })
  })
})

describe("fromVariables", () => {
  it("reads a variable by its name, trimmed by its spelling, blank as unset", () => {
    const flag = optionalSetting(FlagText, "SOME_FLAG")
    expect(Result.getOrThrow(readConfig(flag, fromVariables({ SOME_FLAG: " On " })))).toBe(true)
    expect(Result.getOrThrow(readConfig(flag, fromVariables({ SOME_FLAG: "  " })))).toBeUndefined()
    const bad = readConfig(flag, fromVariables({ SOME_FLAG: "sometimes" }))
    expect(Result.isFailure(bad) && bad.failure.message).toBe(
      "Invalid veyyon-eval settings (SOME_FLAG): \"sometimes\" is not a boolean; use one of 1/0, true/false, yes/no, on/off, or unset it."
    )
  })

  it("reads the process environment unless given one", () => {
    process.env["VEYYON_TEST_READER"] = "yes"
    try {
      expect(Result.getOrThrow(readConfig(optionalSetting(FlagText, "VEYYON_TEST_READER"), fromVariables()))).toBe(true)
    } finally {
      delete process.env["VEYYON_TEST_READER"]
    }
  })
})
