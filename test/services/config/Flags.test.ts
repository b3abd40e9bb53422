import { describe, expect, it } from "@effect/vitest"
import { Option, Schema } from "effect"
import { isUnsetEnvValue, parseBooleanFlag } from "../../../src/services/config/Flags.ts"

describe("parseBooleanFlag", () => {
  it("reads the usual spellings, trimmed and in any case", () => {
    for (const raw of ["1", "true", "TRUE", " yes ", "On", "\ttrue\n"]) expect(parseBooleanFlag(raw)).toEqual(Option.some(true))
    for (const raw of ["0", "false", "False", "no", " OFF "]) expect(parseBooleanFlag(raw)).toEqual(Option.some(false))
  })

  it("rejects anything else", () => {
    for (const raw of ["", "2", "flase", "y", "n", "enabled", "1.0", "truee"]) expect(parseBooleanFlag(raw)).toEqual(Option.none())
  })

  it.prop("is case- and whitespace-insensitive", {
    word: Schema.Literals(["1", "0", "true", "false", "yes", "no", "on", "off"]),
    pad: Schema.String.check(Schema.isPattern(/^[ \t]{0,3}$/)),
    upper: Schema.Boolean
  }, ({ word, pad, upper }) => {
    expect(parseBooleanFlag(pad + (upper ? word.toUpperCase() : word) + pad)).toEqual(parseBooleanFlag(word))
  })
})

describe("isUnsetEnvValue", () => {
  it("treats absent, empty and blank values as unset", () => {
    expect(isUnsetEnvValue(undefined)).toBe(true)
    expect(isUnsetEnvValue("")).toBe(true)
    expect(isUnsetEnvValue("  ")).toBe(true)
    expect(isUnsetEnvValue("0")).toBe(false)
  })
})
