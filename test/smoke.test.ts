import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"

describe("toolchain", () => {
  it.effect("runs an Effect test", () => Effect.sync(() => expect(1 + 1).toBe(2)))
})
