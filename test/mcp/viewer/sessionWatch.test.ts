/**
 * The viewer's picture of the sessions: sessions open and end, a cell's events reach its
 * watchers as they happen and are held while it runs, a finished cell keeps its outputs
 * as the notebook has them and says how it ended (interrupted from the page when a person
 * did it), and what is held stays within the session's budget.
 */
import { describe, expect, it } from "vitest"
import { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import type { EvalResult } from "../../../src/services/tool/EvalTool.ts"
import { MAX_CELLS, MAX_LIVE_CELL_BYTES, MAX_SESSION_BYTES, makeSessionWatch, type WatchEvent } from "../../../src/mcp/viewer/SessionWatch.ts"

const result = (extra: Partial<EvalResult> = {}): EvalResult => ({
  language: "py",
  status: "ok",
  cancelled: false,
  timedOut: false,
  killed: false,
  executionCount: 3,
  outputs: [KernelOutput.Stdout({ text: "a\n" }), KernelOutput.Stdout({ text: "b\n" })],
  text: "",
  images: [],
  artifactIds: [],
  durationMs: 5,
  ...extra
})

describe("session watch", () => {
  it("follows a session's cells and tells its watchers as they happen", () => {
    let now = 100
    const watch = makeSessionWatch({ now: () => now })
    watch.observer.opened("s1", "claude")
    const heard: Array<WatchEvent["_tag"]> = []
    const stop = watch.listen("s1", (event) => heard.push(event._tag))!
    const cell = watch.observer.cell("s1", { language: "py", code: "print('a')", title: "greet" })
    cell.onEvent(KernelOutput.Stdout({ text: "a\n" }))
    const session = watch.session("s1")!
    expect(session.cells[0]).toMatchObject({ n: 1, language: "py", title: "greet", state: "running", startedAt: 100 })
    expect(session.cells[0]!.events).toEqual([KernelOutput.Stdout({ text: "a\n" })])
    now = 350
    cell.finished({ result: result() })
    expect(session.cells[0]).toMatchObject({ state: "ok", executionCount: 3, endedAt: 350, events: [] })
    expect(session.cells[0]!.outputs).toEqual([{ output_type: "stream", name: "stdout", text: "a\nb\n" }])
    expect([...session.languages]).toEqual(["py"])
    expect(session.lastActivity).toBe(350)
    expect(heard).toEqual(["CellStarted", "CellEvent", "CellEnded"])
    stop()
    watch.observer.ended("s1")
    expect(watch.session("s1")).toBeUndefined()
    expect(watch.listen("s1", () => {})).toBeUndefined()
  })

  it("a cell a person stops is aborted and ends as interrupted; a client's cancel stays cancelled", () => {
    const watch = makeSessionWatch()
    watch.observer.opened("s1", "agent")
    const first = watch.observer.cell("s1", { language: "py", code: "sleep" })
    const second = watch.observer.cell("s1", { language: "rb", code: "sleep" })
    expect(watch.interrupt("s1", 1)).toBe(true)
    expect(first.signal.aborted).toBe(true)
    expect(second.signal.aborted).toBe(false)
    first.finished({ result: result({ cancelled: true }) })
    second.finished({ result: result({ cancelled: true }) })
    expect(watch.session("s1")!.cells.map((cell) => cell.state)).toEqual(["interrupted", "cancelled"])
    expect(watch.interrupt("s1", 1)).toBe(false)
    expect(watch.interrupt("nope", 1)).toBe(false)
  })

  it("a call that could not run ends as failed with its sentence", () => {
    const watch = makeSessionWatch()
    const cell = watch.observer.cell("s1", { language: "jl", code: "1" })
    cell.finished({ failure: "the jl eval backend is not available" })
    expect(watch.session("s1")!.cells[0]).toMatchObject({ state: "failed", notice: "the jl eval backend is not available" })
  })

  it("holds and streams a running cell's output up to its live budget, says once that more follows, and shows the result when it ends", () => {
    const watch = makeSessionWatch()
    const heard: Array<WatchEvent["_tag"]> = []
    watch.observer.opened("s1", "agent")
    watch.listen("s1", (event) => heard.push(event._tag))
    const cell = watch.observer.cell("s1", { language: "py", code: "while True: print('x' * 100000)" })
    const chunk = "x".repeat(100_000)
    for (let i = 0; i < 2 * MAX_LIVE_CELL_BYTES / chunk.length; i++) cell.onEvent(KernelOutput.Stdout({ text: chunk }))
    const held = watch.session("s1")!.cells[0]!
    expect(held.bytes).toBeLessThanOrEqual(MAX_LIVE_CELL_BYTES)
    expect(held.dropped).toBe(true)
    expect(heard.filter((tag) => tag === "CellOverflowed")).toHaveLength(1)
    expect(heard.filter((tag) => tag === "CellEvent").length).toBe(held.events.length)
    cell.finished({ result: result() })
    expect(held).toMatchObject({ dropped: false, events: [], outputs: [{ output_type: "stream", name: "stdout", text: "a\nb\n" }] })
  })

  it("keeps the newest cells and lets the oldest outputs go past the session's budget", () => {
    const watch = makeSessionWatch()
    for (let i = 0; i < MAX_CELLS + 5; i++) watch.observer.cell("s1", { language: "py", code: `${i}` }).finished({ result: result() })
    const session = watch.session("s1")!
    expect(session.cells.length).toBe(MAX_CELLS)
    expect(session.cells[0]!.code).toBe("5")

    const big = "x".repeat(MAX_SESSION_BYTES / 4)
    for (let i = 0; i < 6; i++) {
      watch.observer.cell("s2", { language: "py", code: "big" }).finished({ result: result({ outputs: [KernelOutput.Stdout({ text: big })] }) })
    }
    const heavy = watch.session("s2")!
    expect(heavy.bytes).toBeLessThanOrEqual(MAX_SESSION_BYTES)
    expect(heavy.cells[0]!.dropped).toBe(true)
    expect(heavy.cells[0]!.outputs).toEqual([])
    expect(heavy.cells.at(-1)!.dropped).toBe(false)
  })
})
