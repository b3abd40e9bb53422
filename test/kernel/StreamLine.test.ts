import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Result } from "effect"
import { binaryText, constantFrom, oneOf, sized } from "./arbitraries.ts"
import { decodeRunnerLine } from "../../src/kernel/FrameDecoder.ts"
import { decodeStreamLine } from "../../src/kernel/StreamLine.ts"

/** A stream frame as the Python runner writes it (its JSON escapes only what JSON requires). */
const runnerLine = (type: "stdout" | "stderr", id: string, data: string) => JSON.stringify({ type, id, data })

const text = oneOf(
  binaryText(),
  Arbitrary.map(
    Arbitrary.array(constantFrom("a", "\n", "\\", "\"", "\t", "\r", "é", "\u2028", "\ud800", "\u001b", "n", "x"), { maxLength: 60 }),
    (parts) => parts.join("")
  )
)

describe("decodeStreamLine", () => {
  it("takes a runner's stdout and stderr lines apart without JSON.parse", () => {
    const data = ("x".repeat(1023) + "\n").repeat(64)
    expect(decodeStreamLine(runnerLine("stdout", "c-1", data))).toEqual({ type: "stdout", id: "c-1", data })
    expect(decodeStreamLine(runnerLine("stderr", "c-1", "warn\n"))).toEqual({ type: "stderr", id: "c-1", data: "warn\n" })
    expect(decodeStreamLine(runnerLine("stdout", "c", ""))).toEqual({ type: "stdout", id: "c", data: "" })
  })

  it.prop("gives what JSON.parse gives, or leaves the line to it", [constantFrom("stdout" as const, "stderr" as const), text, text], ([type, id, data]) => {
    const line = runnerLine(type, id, data)
    const fast = decodeStreamLine(line)
    if (fast !== undefined) expect(fast).toEqual(JSON.parse(line))
    // JSON.stringify escapes lone surrogates (and, for simplicity, no surrogate is let in here).
    const plain = !/[\\"\u0000-\u001f\ud800-\udfff]/.test(id) && !/[\\"\u0000-\u0009\u000b-\u001f\ud800-\udfff]/.test(data)
    if (plain) expect(fast).toEqual({ type, id, data })
  }, sized(60))

  it("leaves other layouts, escapes and broken lines to JSON.parse", () => {
    for (
      const line of [
        "{\"id\":\"c\",\"type\":\"stdout\",\"data\":\"x\"}",
        "{\"type\":\"stdout\",\"id\":\"c\",\"data\":\"a\\\\nb\"}",
        "{\"type\":\"stdout\",\"id\":\"c\",\"data\":\"tab\\t\"}",
        "{\"type\":\"stdout\",\"id\":\"c\",\"data\":\"x\",\"more\":\"y\"}",
        "{\"type\":\"stdout\",\"id\":\"c\",\"data\":\"ends in a backslash\\\"}",
        "{\"type\":\"stdout\",\"id\":\"c\",\"data\":\"}",
        "{\"type\":\"stdout\",\"id\":\"c\\\"x\",\"data\":\"y\"}",
        "{\"type\":\"stdout\",\"id\":\"c\",\"data\":\"unterminated",
        "{\"type\":\"display\",\"id\":\"c\",\"bundle\":{}}",
        "{\"type\":\"stdout\",\"id\":\"c\"}"
      ]
    ) {
      expect(decodeStreamLine(line)).toBeUndefined()
    }
  })

  it("is the path decodeRunnerLine takes, with the same frames as the schema path", () => {
    const line = runnerLine("stdout", "c", "a\nb\n")
    expect(decodeRunnerLine(line)).toEqual(Result.succeed({ type: "stdout", id: "c", data: "a\nb\n" }))
    expect(Result.isFailure(decodeRunnerLine("{\"type\":\"stdout\",\"id\":\"c\",\"data\":\"unterminated"))).toBe(true)
    expect(decodeRunnerLine(runnerLine("stdout", "c", "tab\t"))).toEqual(Result.succeed({ type: "stdout", id: "c", data: "tab\t" }))
  })
})
