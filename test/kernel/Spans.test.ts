import { describe, expect, it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import { withCurrentSpan } from "../../src/kernel/Spans.ts"

describe("withCurrentSpan", () => {
  it.effect("hands the fiber's own span to the callback", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      yield* withCurrentSpan((span) => {
        seen.push(span.name)
        span.attribute("k", 1)
      }).pipe(Effect.withSpan("outer"))
      expect(seen).toEqual(["outer"])
    }))

  it.effect("does nothing outside a span, and nothing under an external parent span", () =>
    Effect.gen(function*() {
      let calls = 0
      yield* withCurrentSpan(() => calls++)
      yield* withCurrentSpan(() => calls++).pipe(
        Effect.provideService(Tracer.ParentSpan, Tracer.externalSpan({ traceId: "t", spanId: "s" }))
      )
      expect(calls).toBe(0)
    }))
})
