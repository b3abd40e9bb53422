/**
 * `offerNow`, the synchronous path stream text takes from the data callback to a cell's
 * handler: it answers what the handler answered, counts only the text taken, and ends the
 * request with the defect of a handler that throws.
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit } from "effect"
import { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import { offerNow, RequestTable } from "../../src/kernel/RequestTable.ts"

const open = () => new RequestTable().add(() => Effect.void)

describe("offerNow", () => {
  it("declines when the handler has no synchronous path", () => {
    const request = open()
    expect(offerNow(request, KernelOutput.Stdout({ text: "abc" }))).toBe(false)
    expect(request.textChars).toBe(0)
  })

  it("answers the handler's answer and counts the text it took", () => {
    const request = open()
    const seen: Array<string> = []
    request.now = (output) => {
      if (output._tag !== "Stdout" && output._tag !== "Stderr") return false
      seen.push(output.text)
      return output.text !== "no"
    }
    expect(offerNow(request, KernelOutput.Stdout({ text: "abc" }))).toBe(true)
    expect(offerNow(request, KernelOutput.Stderr({ text: "de" }))).toBe(true)
    expect(offerNow(request, KernelOutput.Stdout({ text: "no" }))).toBe(false)
    expect(seen).toEqual(["abc", "de", "no"])
    expect(request.textChars).toBe(5)
  })

  it("counts no text for an output that is not stream text", () => {
    const request = open()
    request.now = () => true
    expect(offerNow(request, KernelOutput.Display({ bundle: { "text/plain": "shown" } }))).toBe(true)
    expect(request.textChars).toBe(0)
  })

  it.effect("ends the request with the defect of a handler that throws", () =>
    Effect.gen(function*() {
      const request = open()
      const boom = new Error("boom")
      request.now = () => {
        throw boom
      }
      expect(offerNow(request, KernelOutput.Stdout({ text: "abc" }))).toBe(true)
      expect(request.textChars).toBe(0)
      const ended = yield* Effect.exit(Deferred.await(request.ended))
      expect(Exit.isFailure(ended) && Cause.squash(ended.cause)).toBe(boom)
    }))
})
