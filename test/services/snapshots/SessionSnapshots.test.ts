/**
 * The order of saves and what a restore makes of a stored snapshot, over a fake kernel and
 * an in-memory store: a snapshot is asked for once the session settles (cells back to back
 * make one request, a cell that starts drops the one waiting); saves land in the order they
 * were asked for, an older never replaces a newer, none lands after `forget`; `unchanged`
 * writes nothing; an empty namespace forgets; a restore names the cell and what did not
 * come back, refuses what its seal does not hold, and asks for an empty kernel when the
 * runner could not read the payload.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import type * as Kernel from "../../../src/kernel/Kernel.ts"
import { LifecycleState } from "../../../src/kernel/Lifecycle.ts"
import type { RestoreOutcome, SnapshotOptions, TakenSnapshot } from "../../../src/kernel/StateTransfer.ts"
import { makeSessionSnapshots } from "../../../src/services/snapshots/SessionSnapshots.ts"
import { payloadDigest, sealMeta, SNAPSHOT_FORMAT, type SealedMeta } from "../../../src/services/snapshots/SnapshotSeal.ts"
import type { SnapshotStoreService } from "../../../src/services/snapshots/SnapshotStore.ts"

const memoryStore = () => {
  const rows = new Map<string, { sealed: SealedMeta; payload: Uint8Array }>()
  const writes: Array<string> = []
  const store: SnapshotStoreService = {
    key: randomBytes(32),
    write: (sessionId, language, sealed, _digest, payload) =>
      Effect.sync(() => {
        writes.push(JSON.parse(sealed.text).cellTitle)
        rows.set(`${sessionId}/${language}`, { sealed, payload: payload ?? rows.get(`${sessionId}/${language}`)!.payload })
      }),
    read: (sessionId, language) => Effect.sync(() => rows.get(`${sessionId}/${language}`)),
    remove: (sessionId, language) =>
      Effect.sync(() => {
        for (const key of [...rows.keys()]) if (key.startsWith(`${sessionId}/`) && (language === undefined || key === `${sessionId}/${language}`)) rows.delete(key)
      }),
    list: Effect.sync(() => [...rows.values()].map((row) => ({ sealed: row.sealed, modifiedAt: 0 })))
  }
  return { store, rows, writes }
}

/** A kernel whose snapshots end when the test says, and whose restores answer `restoreAnswer`. */
const fakeKernel = (restoreAnswer: RestoreOutcome = { restored: ["x"], skipped: [], error: undefined }, lifecycle: LifecycleState = LifecycleState.Idle()) => {
  const pending: Array<{ options: SnapshotOptions; end: Deferred.Deferred<TakenSnapshot> }> = []
  const restores: Array<{ payload: Uint8Array; count: number | undefined }> = []
  const kernel = {
    snapshot: (options: SnapshotOptions) =>
      Effect.sync(() => {
        const end = Deferred.makeUnsafe<TakenSnapshot>()
        pending.push({ options, end })
        return Deferred.await(end)
      }),
    restore: (payload: Uint8Array, count?: number) => Effect.sync(() => (restores.push({ payload, count }), restoreAnswer)),
    state: Effect.sync(() => lifecycle)
  } as unknown as Kernel.Kernel
  return { kernel, pending, restores }
}

const saved = (text: string, names: ReadonlyArray<string> = ["x"]): TakenSnapshot => {
  const payload = new TextEncoder().encode(text)
  return { status: "saved", payload, digest: payloadDigest(payload), names, skipped: [], error: undefined }
}

/** Waits (real time: the settle delay is a host timer) until `count` snapshots were asked for. */
const asked = (pending: ReadonlyArray<unknown>, count: number) =>
  Effect.promise(async () => {
    for (let waited = 0; pending.length < count && waited < 5000; waited += 5) await new Promise((resolve) => setTimeout(resolve, 5))
    expect(pending.length).toBe(count)
  })

const place = { sessionId: "s", language: "py" }
const options = { mode: "every-cell" as const, budgetMb: 1, valueBudgetMb: 1 }

describe("SessionSnapshots", () => {
  it.live("asks after each cell with the budgets and the digest it holds, keeps saves in the order asked, and renews the metadata of an unchanged state", () =>
    Effect.gen(function*() {
      const { store, writes } = memoryStore()
      const { kernel, pending } = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, options)
      yield* snapshots.afterCell(place, kernel, { executionCount: 1, code: "a = 1" })
      yield* asked(pending, 1)
      yield* snapshots.afterCell(place, kernel, { executionCount: 2, code: "b = 2" })
      yield* asked(pending, 2)
      expect(pending.map((entry) => entry.options.budget)).toEqual([1024 * 1024, 1024 * 1024])
      yield* Deferred.succeed(pending[1]!.end, saved("two"))
      yield* Effect.yieldNow
      yield* Deferred.succeed(pending[0]!.end, saved("one"))
      yield* snapshots.drain
      expect(writes).toEqual(["b = 2"])
      yield* snapshots.afterCell(place, kernel, { executionCount: 3, code: "print(b)" })
      yield* asked(pending, 3)
      expect(pending[2]!.options.known).toBe(payloadDigest(new TextEncoder().encode("two")))
      yield* Deferred.succeed(pending[2]!.end, { ...saved("two"), status: "unchanged", payload: undefined })
      yield* snapshots.drain
      // The same state as of a later cell: the metadata is renewed over the payload stored.
      expect(writes).toEqual(["b = 2", "print(b)"])
    }).pipe(Effect.scoped))

  it.live("asks once for cells back to back, drops the request a starting cell finds waiting, and sends a waiting one at shutdown", () =>
    Effect.gen(function*() {
      const { store, writes } = memoryStore()
      const { kernel, pending } = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, options)
      for (let cell = 1; cell <= 5; cell++) yield* snapshots.afterCell(place, kernel, { executionCount: cell, code: `c${cell}` })
      yield* asked(pending, 1)
      yield* Effect.sleep("100 millis")
      expect(pending).toHaveLength(1)
      yield* Deferred.succeed(pending[0]!.end, saved("five"))
      yield* snapshots.afterCell(place, kernel, { executionCount: 6, code: "c6" })
      snapshots.cellStarting(place)
      yield* Effect.sleep("100 millis")
      expect(pending).toHaveLength(1)
      yield* snapshots.afterCell(place, kernel, { executionCount: 7, code: "c7" })
      const draining = yield* Effect.forkChild(snapshots.drain)
      yield* asked(pending, 2)
      yield* Deferred.succeed(pending[1]!.end, saved("seven"))
      yield* Fiber.join(draining)
      expect(writes).toEqual(["c5", "c7"])
    }).pipe(Effect.scoped))

  it.live("asks only once the session has been settled for the whole delay since its last cell", () =>
    Effect.gen(function*() {
      const { store } = memoryStore()
      const { kernel, pending } = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, { ...options, mode: "idle" })
      yield* snapshots.afterCell(place, kernel, { executionCount: 1, code: "c1" })
      yield* Effect.sleep("1200 millis")
      yield* snapshots.afterCell(place, kernel, { executionCount: 2, code: "c2" })
      // 2400 ms after the first cell and 1200 after the second: the idle delay (2000) has not passed since the last.
      yield* Effect.sleep("1200 millis")
      expect(pending).toHaveLength(0)
      yield* asked(pending, 1)
    }).pipe(Effect.scoped))

  it.live("shutting down does not wait for the snapshot of a kernel busy with a cell (it answers only after the cell)", () =>
    Effect.gen(function*() {
      const { store, writes } = memoryStore()
      const { kernel, pending } = fakeKernel(undefined, LifecycleState.Busy({ requestId: "r9" }))
      const snapshots = yield* makeSessionSnapshots(store, options)
      yield* snapshots.afterCell(place, kernel, { executionCount: 1, code: "a = 1" })
      yield* asked(pending, 1)
      const started = Date.now()
      yield* snapshots.drain
      expect(Date.now() - started).toBeLessThan(5000)
      expect(writes).toEqual([])
    }).pipe(Effect.scoped))

  it.live("writes nothing for a snapshot yielded to a cell or failed, and nothing after forget", () =>
    Effect.gen(function*() {
      const { store, rows, writes } = memoryStore()
      const { kernel, pending } = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, options)
      yield* snapshots.afterCell(place, kernel, { executionCount: 1, code: "a" })
      yield* asked(pending, 1)
      yield* Deferred.succeed(pending[0]!.end, { ...saved("x"), status: "yielded", payload: undefined })
      yield* snapshots.afterCell(place, kernel, { executionCount: 2, code: "b" })
      yield* asked(pending, 2)
      yield* Deferred.succeed(pending[1]!.end, { ...saved("x"), status: "failed", payload: undefined, error: "no" })
      yield* snapshots.afterCell(place, kernel, { executionCount: 3, code: "c" })
      yield* asked(pending, 3)
      yield* snapshots.forget("s")
      yield* Deferred.succeed(pending[2]!.end, saved("late"))
      yield* snapshots.drain
      expect(writes).toEqual([])
      expect(rows.size).toBe(0)
    }).pipe(Effect.scoped))

  it.live("forgets the stored snapshot when the namespace is empty (after %reset)", () =>
    Effect.gen(function*() {
      const { store, rows } = memoryStore()
      const { kernel, pending } = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, options)
      yield* snapshots.afterCell(place, kernel, { executionCount: 1, code: "a = 1" })
      yield* asked(pending, 1)
      yield* Deferred.succeed(pending[0]!.end, saved("one"))
      yield* snapshots.drain
      expect(rows.size).toBe(1)
      yield* snapshots.afterCell(place, kernel, { executionCount: 2, code: "%reset -f" })
      yield* asked(pending, 2)
      yield* Deferred.succeed(pending[1]!.end, saved("", []))
      yield* snapshots.drain
      expect(rows.size).toBe(0)
    }).pipe(Effect.scoped))

  it.live("restores with the count it was saved at, and words what came back and what did not", () =>
    Effect.gen(function*() {
      const { store } = memoryStore()
      const writer = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, options)
      yield* snapshots.afterCell(place, writer.kernel, { executionCount: 4, code: "model = fit()" })
      yield* asked(writer.pending, 1)
      yield* Deferred.succeed(writer.pending[0]!.end, { ...saved("state", ["model", "conn"]), skipped: [{ name: "conn", reason: "socket objects cannot be saved" }] })
      yield* snapshots.drain
      const reader = fakeKernel({ restored: ["model"], skipped: [{ name: "np", reason: "No module named 'numpy'" }], error: undefined })
      const result = yield* snapshots.restoreInto(place, reader.kernel)
      expect(reader.restores).toEqual([{ payload: new TextEncoder().encode("state"), count: 4 }])
      expect(result.replace).toBe(false)
      expect(result.notice).toContain('as of cell 4 ("model = fit()")')
      expect(result.notice).toContain("conn: socket objects cannot be saved")
      expect(result.notice).toContain("np: No module named 'numpy'")
    }).pipe(Effect.scoped))

  it.live("refuses and discards a snapshot sealed for another session, and never hands it to the kernel", () =>
    Effect.gen(function*() {
      const { store, rows } = memoryStore()
      const payload = new TextEncoder().encode("theirs")
      const meta = {
        format: SNAPSHOT_FORMAT as typeof SNAPSHOT_FORMAT, sessionId: "other", language: "py", asOfCell: 1, cellTitle: "", digest: payloadDigest(payload),
        bytes: payload.length, names: ["x"], skipped: [], savedAt: 0
      }
      rows.set("s/py", { sealed: sealMeta(store.key, meta), payload })
      const reader = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, options)
      const result = yield* snapshots.restoreInto(place, reader.kernel)
      expect(reader.restores).toEqual([])
      expect(result.notice).toContain("not loaded: it belongs to another session")
      expect(rows.size).toBe(0)
    }).pipe(Effect.scoped))

  it.live("asks for an empty kernel when the runner could not read the payload", () =>
    Effect.gen(function*() {
      const { store } = memoryStore()
      const writer = fakeKernel()
      const snapshots = yield* makeSessionSnapshots(store, options)
      yield* snapshots.afterCell(place, writer.kernel, { executionCount: 1, code: "a = 1" })
      yield* asked(writer.pending, 1)
      yield* Deferred.succeed(writer.pending[0]!.end, saved("state"))
      yield* snapshots.drain
      const reader = fakeKernel({ restored: [], skipped: [], error: "unknown payload format 9" })
      const result = yield* snapshots.restoreInto(place, reader.kernel)
      expect(result).toEqual({ replace: true, notice: expect.stringContaining("could not be restored: unknown payload format 9") })
    }).pipe(Effect.scoped))
})
