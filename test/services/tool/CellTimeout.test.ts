import { describe, expect, it } from "@effect/vitest"
import { Effect, Result, Schema } from "effect"
import {
  clampTimeoutSeconds,
  DEFAULT_TIMEOUT_SECONDS,
  InvalidTimeout,
  MAX_TIMEOUT_SECONDS,
  MIN_TIMEOUT_SECONDS
} from "../../../src/services/tool/CellTimeout.ts"

describe("clampTimeoutSeconds", () => {
  it("defaults a missing timeout to 30 seconds", () => {
    expect(clampTimeoutSeconds(undefined)).toEqual(Result.succeed(DEFAULT_TIMEOUT_SECONDS))
    expect(clampTimeoutSeconds(null)).toEqual(Result.succeed(30))
  })

  it("clamps numbers into 1..3600", () => {
    expect(clampTimeoutSeconds(0)).toEqual(Result.succeed(1))
    expect(clampTimeoutSeconds(-5)).toEqual(Result.succeed(1))
    expect(clampTimeoutSeconds(0.2)).toEqual(Result.succeed(1))
    expect(clampTimeoutSeconds(90.5)).toEqual(Result.succeed(90.5))
    expect(clampTimeoutSeconds(7200)).toEqual(Result.succeed(3600))
    expect(clampTimeoutSeconds(Infinity)).toEqual(Result.succeed(3600))
    expect(clampTimeoutSeconds(-Infinity)).toEqual(Result.succeed(1))
  })

  it("rejects NaN and non-numbers with a message naming the range and the value", () => {
    for (const [value, shown] of [
      [NaN, "NaN"],
      ["60", 'the string "60"'],
      [true, "a value of type boolean"],
      [{}, "a value of type object"],
      [[1], "an array"]
    ] as const) {
      const result = clampTimeoutSeconds(value)
      expect(Result.isFailure(result)).toBe(true)
      if (Result.isFailure(result)) {
        expect(result.failure).toBeInstanceOf(InvalidTimeout)
        expect(result.failure.message).toContain("between 1 and 3600")
        expect(result.failure.message).toContain(shown)
      }
    }
  })

  it.effect("works as an Effect, failing with the tagged error", () =>
    Effect.gen(function*() {
      expect(yield* Effect.fromResult(clampTimeoutSeconds(12))).toBe(12)
      const error = yield* Effect.flip(Effect.fromResult(clampTimeoutSeconds("x")))
      expect(error._tag).toBe("InvalidTimeout")
    }))

  it.prop("always lands in range for any number", { n: Schema.Number }, ({ n }) => {
    const result = clampTimeoutSeconds(n)
    if (Number.isNaN(n)) expect(Result.isFailure(result)).toBe(true)
    else {
      const seconds = Result.getOrThrow(result)
      expect(seconds).toBeGreaterThanOrEqual(MIN_TIMEOUT_SECONDS)
      expect(seconds).toBeLessThanOrEqual(MAX_TIMEOUT_SECONDS)
      if (n >= MIN_TIMEOUT_SECONDS && n <= MAX_TIMEOUT_SECONDS) expect(seconds).toBe(n)
    }
  })
})
