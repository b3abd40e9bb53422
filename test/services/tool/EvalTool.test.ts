import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { checkParams, evalDescription, evalParametersSchema } from "../../../src/services/tool/EvalTool.ts"
import { testSettings } from "../../support/settings.ts"

describe("checkParams", () => {
  const settings = testSettings()

  it("accepts the seed's params and clamps the timeout", () => {
    expect(Result.getOrThrow(checkParams({ language: "py", code: "1" }, settings))).toEqual({
      language: "py",
      code: "1",
      timeoutSeconds: 30,
      reset: false
    })
    expect(Result.getOrThrow(checkParams({ language: "py", code: "1", timeout: 0.2 }, settings)).timeoutSeconds).toBe(1)
    expect(Result.getOrThrow(checkParams({ language: "py", code: "1", timeout: 99999 }, settings)).timeoutSeconds).toBe(3600)
    expect(Result.getOrThrow(checkParams({ language: "py", code: "1", title: "t", reset: true }, settings))).toMatchObject({
      title: "t",
      reset: true
    })
  })

  it("rejects a non-numeric timeout with a clear message", () => {
    const result = checkParams({ language: "py", code: "1", timeout: "10" }, settings)
    expect(Result.isFailure(result) && result.failure.message).toMatch(/timeout/)
  })

  it("says what is wrong with the params in one sentence naming the field and the fix", () => {
    const message = (raw: unknown) => Result.match(checkParams(raw, settings), { onFailure: (error) => error.message, onSuccess: () => "accepted" })
    expect(message({ language: "py" })).toBe("invalid eval params: `code` is missing: pass the cell's source code as a string")
    expect(message({ language: "py", code: 1 })).toBe("invalid eval params: `code` must be string, got 1: pass the cell's source code as a string")
    expect(message({ language: "py", code: "1", lang: "py" })).toBe(
      "invalid eval params: `lang` is not a parameter of eval; the parameters are language, code, title, timeout, reset"
    )
    expect(message("print(1)")).not.toContain("readonly")
  })

  it("rejects missing code, unknown fields and unknown languages", () => {
    expect(Result.isFailure(checkParams({ language: "py" }, settings))).toBe(true)
    expect(Result.isFailure(checkParams({ language: "py", code: "1", extra: 1 }, settings))).toBe(true)
    const unknown = checkParams({ language: "cobol", code: "1" }, settings)
    expect(Result.isFailure(unknown) && unknown.failure.message).toContain("language must be one of py, js")
  })

  it("says how to enable a disabled backend", () => {
    const result = checkParams({ language: "rb", code: "1" }, settings)
    expect(Result.isFailure(result) && result.failure._tag).toBe("BackendUnavailable")
    expect(Result.isFailure(result) && result.failure.message).toContain("VEYYON_RB=1")
  })
})

describe("tool definition", () => {
  it("narrows the language enum to the enabled backends", () => {
    const schema = evalParametersSchema(testSettings({ eval: { js: false } })) as { properties: { language: { enum: Array<string> } } }
    expect(schema.properties.language.enum).toEqual(["py"])
    const both = evalParametersSchema(testSettings()) as { properties: { language: { enum: Array<string> } } }
    expect(both.properties.language.enum).toEqual(["py", "js"])
  })

  it("adds the workspace guidance only when asked", () => {
    expect(evalDescription(testSettings())).not.toContain("workspace")
    expect(evalDescription(testSettings({ eval: { pyWorkspace: true } }))).toContain("workspace")
  })
})
