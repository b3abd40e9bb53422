import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, FastCheck as fc } from "effect"
import {
  clampTimeoutSeconds,
  DEFAULT_TIMEOUT_SECONDS,
  InvalidTimeout,
  MAX_TIMEOUT_SECONDS,
  MIN_TIMEOUT_SECONDS
} from "../../src/services/CellTimeout.ts"

describe("clampTimeoutSeconds", () => {
  it("defaults a missing timeout to 30 seconds", () => {
    expect(clampTimeoutSeconds(undefined)).toEqual(Either.right(DEFAULT_TIMEOUT_SECONDS))
    expect(clampTimeoutSeconds(null)).toEqual(Either.right(30))
  })

  it("clamps numbers into 1..3600", () => {
    expect(clampTimeoutSeconds(0)).toEqual(Either.right(1))
    expect(clampTimeoutSeconds(-5)).toEqual(Either.right(1))
    expect(clampTimeoutSeconds(0.2)).toEqual(Either.right(1))
    expect(clampTimeoutSeconds(90.5)).toEqual(Either.right(90.5))
    expect(clampTimeoutSeconds(7200)).toEqual(Either.right(3600))
    expect(clampTimeoutSeconds(Infinity)).toEqual(Either.right(3600))
    expect(clampTimeoutSeconds(-Infinity)).toEqual(Either.right(1))
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
      expect(Either.isLeft(result)).toBe(true)
      if (Either.isLeft(result)) {
        expect(result.left).toBeInstanceOf(InvalidTimeout)
        expect(result.left.message).toContain("between 1 and 3600")
        expect(result.left.message).toContain(shown)
      }
    }
  })

  it.effect("works as an Effect, failing with the tagged error", () =>
    Effect.gen(function*() {
      expect(yield* clampTimeoutSeconds(12)).toBe(12)
      const error = yield* Effect.flip(clampTimeoutSeconds("x"))
      expect(error._tag).toBe("InvalidTimeout")
    }))

  it.prop("always lands in range for any number", { n: fc.double() }, ({ n }) => {
    const result = clampTimeoutSeconds(n)
    if (Number.isNaN(n)) expect(Either.isLeft(result)).toBe(true)
    else {
      const seconds = Either.getOrThrow(result)
      expect(seconds).toBeGreaterThanOrEqual(MIN_TIMEOUT_SECONDS)
      expect(seconds).toBeLessThanOrEqual(MAX_TIMEOUT_SECONDS)
      if (n >= MIN_TIMEOUT_SECONDS && n <= MAX_TIMEOUT_SECONDS) expect(seconds).toBe(n)
    }
  })
})
