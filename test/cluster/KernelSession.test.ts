/**
 * The session protocol's errors cross the wire as themselves: each error a session call
 * fails with, encoded by its schema the way the cluster's RPC encodes it and decoded on the
 * other side, is an instance of its own class with the same fields and message, so a
 * client sees the runner's `RuntimeUnavailable` or `InvalidCwd`, not a closed kernel; a
 * backend's own unavailability error (`PythonUnavailable`) travels as `RuntimeUnavailable`. The
 * answers of `Execute` (a cell's outputs, its result) are checked by their schema the same way.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Schema } from "effect"
import { RuntimeUnavailable } from "../../src/backends/Backend.ts"
import { PythonUnavailable } from "../../src/backends/python/PythonRuntime.ts"
import { KernelDied } from "../../src/kernel/KernelError.ts"
import { InvalidCwd } from "../../src/services/registry/KernelRegistry.ts"
import { ExecuteBatch, isSessionCallError, SessionCallError, SessionLedgerUnavailable, toSessionCallError } from "../../src/cluster/KernelSession.ts"
import { KernelOutput } from "../../src/kernel/KernelOutput.ts"

const acrossTheWire = (error: SessionCallError): unknown =>
  Schema.decodeUnknownSync(SessionCallError)(JSON.parse(JSON.stringify(Schema.encodeSync(SessionCallError)(error))))

describe("session call errors on the wire", () => {
  it.prop("every error arrives as an instance of its own class, fields and message intact", [Arbitrary.schema(SessionCallError)], ([error]) => {
    expect(error).toBeInstanceOf(Error)
    const arrived = acrossTheWire(error)
    expect(arrived).toBeInstanceOf(error.constructor)
    expect({ ...(arrived as object) }).toStrictEqual(JSON.parse(JSON.stringify({ ...error })))
    expect((arrived as Error).message).toBe(error.message)
    expect(isSessionCallError(arrived)).toBe(true)
  }, { arbitrary: { runs: 200 } })

  it("carries a backend's own unavailability as the language-neutral error, its sentence intact", () => {
    const python = new PythonUnavailable({ reason: "not-found", detail: "no Python interpreter found", tried: ["PATH: python3 (missing)"], fix: "install Python 3.8+" })
    const arrived = acrossTheWire(toSessionCallError(python))
    expect(arrived).toBeInstanceOf(RuntimeUnavailable)
    expect(arrived).toMatchObject({ language: "py", fix: "install Python 3.8+" })
    expect((arrived as Error).message).toBe(python.message)
    expect((arrived as Error).message).toContain("Tried: PATH: python3 (missing)")
    const julia = new RuntimeUnavailable({ language: "jl", detail: "no Julia", fix: "use py" })
    expect(toSessionCallError(julia)).toBe(julia)
    expect(() => Schema.encodeSync(SessionCallError)(python as never)).toThrow()
    expect(isSessionCallError(Schema.encodeSync(PythonUnavailable)(python))).toBe(false)
  })

  it("keeps what the caller acts on", () => {
    expect(acrossTheWire(new InvalidCwd({ cwd: "/etc", problem: "outside the allowed roots" }))).toBeInstanceOf(InvalidCwd)
    expect(acrossTheWire(new RuntimeUnavailable({ language: "jl", detail: "no Julia", fix: "use py" }))).toBeInstanceOf(RuntimeUnavailable)
    expect((acrossTheWire(new KernelDied({ exit: { code: null, signal: "SIGKILL" }, stderr: "" })) as KernelDied).message).toContain("signal SIGKILL")
    expect((acrossTheWire(new SessionLedgerUnavailable({ reason: "connection refused" })) as Error).message)
      .toBe("the session ledger could not be reached, so the cell did not run: connection refused")
  })

  it("is no catch-all: a value of no listed error is not one", () => {
    expect(isSessionCallError({ _tag: "SessionCallFailed", tag: "X", reason: "r", fields: {} })).toBe(false)
    expect(isSessionCallError(new Error("boom"))).toBe(false)
  })
})

describe("Execute's answers on the wire", () => {
  const roundTrip = (batch: ExecuteBatch): unknown =>
    Schema.decodeUnknownSync(ExecuteBatch)(JSON.parse(JSON.stringify(Schema.encodeSync(ExecuteBatch)(batch))))

  it.prop("every answer, its outputs and its result, arrives as it left", [Arbitrary.schema(ExecuteBatch)], ([batch]) => {
    expect(roundTrip(batch)).toStrictEqual(JSON.parse(JSON.stringify(batch)))
  }, { arbitrary: { runs: 100 } })

  it("refuses what is not an answer instead of passing it on", () => {
    const batch = { outputs: [KernelOutput.Stdout({ text: "hi\n" })], next: 1 }
    expect(roundTrip(batch)).toEqual({ outputs: [{ _tag: "Stdout", text: "hi\n" }], next: 1 })
    expect(() => Schema.decodeUnknownSync(ExecuteBatch)({ outputs: [{ _tag: "Stdout", text: 1 }], next: 1 })).toThrow()
    expect(() => Schema.decodeUnknownSync(ExecuteBatch)({ outputs: [], next: 0, result: { status: "ok" } })).toThrow()
    expect(() => Schema.decodeUnknownSync(ExecuteBatch)({ outputs: [] })).toThrow()
    expect(() => Schema.decodeUnknownSync(ExecuteBatch)({ outputs: [], next: -1 })).toThrow()
    expect(() => Schema.decodeUnknownSync(ExecuteBatch)({ outputs: [], next: 1.5 })).toThrow()
  })
})
