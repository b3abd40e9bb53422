/**
 * The order a session's work keeps on a runner: what is deferred behind a running cell (the
 * session's release when its entity ends) runs after the cell, and the session's next call
 * waits for both; a cell whose work ended no longer counts as running.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Scope } from "effect"
import { CellHandOff } from "../../src/cluster/CellHandOff.ts"

const staysHere = Effect.succeed(false)

/** A cell's work that runs until `end` is completed, then records its end. */
const cellUntil = (end: Deferred.Deferred<void>, log: Array<string>, name: string) =>
  Effect.andThen(Deferred.await(end), Effect.sync(() => void log.push(name)))

const step = (gate: Deferred.Deferred<void>, log: Array<string>, name: string) =>
  Effect.andThen(Deferred.await(gate), Effect.sync(() => void log.push(name)))

/** A cell "call-1" of session "s" running until `end`, with "finish" deferred behind it until `finishGate`. */
const cellWithFinish = Effect.gen(function*() {
  const handOff = yield* CellHandOff
  const log: Array<string> = []
  const end = yield* Deferred.make<void>()
  const finishGate = yield* Deferred.make<void>()
  const scope = yield* Scope.make()
  yield* Scope.provide(handOff.start("s", "py", "call-1", cellUntil(end, log, "cell"), staysHere), scope)
  expect(handOff.runningCall("s", "py")).toBe("call-1")
  yield* handOff.afterCell("s", step(finishGate, log, "finish"))
  return { handOff, log, end, finishGate }
})

describe("CellHandOff", () => {
  it.effect("defers an effect until the running cell ends, and the session's next call waits for both", () =>
    Effect.gen(function*() {
      const { handOff, log, end, finishGate } = yield* cellWithFinish
      const next = yield* Effect.forkChild(Effect.andThen(handOff.awaitCell("s"), Effect.sync(() => void log.push("next"))))
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      expect(log).toEqual([])
      yield* Deferred.succeed(end, undefined)
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      expect(log).toEqual(["cell"])
      yield* Deferred.succeed(finishGate, undefined)
      yield* Fiber.join(next)
      expect(log).toEqual(["cell", "finish", "next"])
    }).pipe(Effect.provide(Layer.fresh(CellHandOff.layer))))

  it.effect("a cell no longer runs once its work ended, though what it deferred still does", () =>
    Effect.gen(function*() {
      const { handOff, log, end, finishGate } = yield* cellWithFinish
      yield* Deferred.succeed(end, undefined)
      while (log.length === 0) yield* Effect.yieldNow
      yield* Effect.yieldNow
      expect(handOff.runningCall("s", "py")).toBeUndefined()
      expect(log).toEqual(["cell"])
      yield* Deferred.succeed(finishGate, undefined)
      yield* handOff.awaitCell("s")
      expect(log).toEqual(["cell", "finish"])
    }).pipe(Effect.provide(Layer.fresh(CellHandOff.layer))))

  it.effect("an entity's own cells are not waited for: its next call of another language runs beside them", () =>
    Effect.gen(function*() {
      const handOff = yield* CellHandOff
      const end = yield* Deferred.make<void>()
      const log: Array<string> = []
      const scope = yield* Scope.make()
      yield* Scope.provide(handOff.start("s", "py", "call-1", cellUntil(end, log, "cell"), staysHere), scope)
      yield* handOff.awaitCell("s", (callId) => callId === "call-1")
      expect(handOff.runningCall("s", "py")).toBe("call-1")
      expect(handOff.runningCall("s", "js")).toBeUndefined()
      const other = yield* Effect.forkChild(handOff.awaitCell("s", (callId) => callId === "call-2"))
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      expect(other.pollUnsafe()).toBeUndefined()
      yield* Deferred.succeed(end, undefined)
      yield* Fiber.join(other)
      expect(log).toEqual(["cell"])
    }).pipe(Effect.provide(Layer.fresh(CellHandOff.layer))))

  it.effect("with nothing running or deferred, an effect runs at once", () =>
    Effect.gen(function*() {
      const handOff = yield* CellHandOff
      const log: Array<string> = []
      yield* handOff.afterCell("s", Effect.sync(() => void log.push("now")))
      expect(log).toEqual(["now"])
    }).pipe(Effect.provide(Layer.fresh(CellHandOff.layer))))
})
