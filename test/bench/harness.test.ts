import { describe, expect, it } from "@effect/vitest"
import { type BenchResults, FIGURES, mergeResults, resultsMarkdown, runBench } from "../../bench/run.ts"
import { OPS, random } from "../../bench/soak.ts"
import { quantile } from "../../bench/stats.ts"
import { markdownTable, target, textTable } from "../../bench/table.ts"
import { integrationEnabled } from "../support/python.ts"
import { integrationOff, titled } from "../support/skip.ts"

describe("bench harness modules", () => {
  it("lists every figure once and the soak mix with positive weights", () => {
    expect(FIGURES.map(([id]) => id)).toEqual(["roundtrip", "cold", "stream", "rich", "interrupt", "scale", "cluster", "mcp"])
    expect(OPS.every((op) => op.weight > 0)).toBe(true)
    const rand = random(7)
    expect(Array.from({ length: 3 }, rand)).toEqual(Array.from({ length: 3 }, random(7)))
  })

  it("merges one re-measured figure into earlier results, keeping the others", () => {
    const row = (figure: string, measure: string, veyyon: number) => ({ figure, measure, unit: "ms", veyyon, floor: null, jupyter: null })
    const results = (figures: ReadonlyArray<readonly [string, string, number]>): BenchResults => ({
      generatedAt: "2026-01-01T00:00:00.000Z",
      quick: false,
      machine: { cpus: 2, memoryGiB: 4, node: "v20", platform: "linux-x64", loadAverage: { start: [1], end: [1] }, calibrationMs: { start: 100, end: 100 } },
      interpreters: { veyyon: "", floor: "", jupyter: "" },
      rows: figures.map(([, figure, value]) => row(figure, "m", value)),
      figures: figures.map(([id, figure, value]) => ({ id, title: id, rows: [row(figure, "m", value)], details: {}, notes: [] })),
      failures: [],
      notes: [],
      summary: { targets: 0, met: 0, missed: [] }
    })
    const merged = mergeResults(results([["roundtrip", "1 warm", 1], ["cluster", "cluster", 2]]), results([["cluster", "cluster", 3]]))
    expect(merged.rows.map((r) => r.veyyon)).toEqual([1, 3])
    expect(merged.figures.map((f) => f.id)).toEqual(["roundtrip", "cluster"])
    expect(merged.notes.some((n) => n.startsWith("cluster: measured separately"))).toBe(true)
  })

  it("renders rows with a met column that states the ratio", () => {
    const rows = [
      { figure: "1", measure: "p50", unit: "us", veyyon: 300, floor: 100, jupyter: null, target: target("<= 2x floor", 300, 200, "at-most") },
      { figure: "3", measure: "rate", unit: "MB/s", veyyon: 80, floor: 100, jupyter: 5, target: target(">= 50%", 80, 50, "at-least") }
    ]
    expect(markdownTable(rows).split("\n")).toHaveLength(4)
    expect(markdownTable(rows)).toContain("no (1.5x of limit 200 us)")
    expect(textTable(rows)).toContain("yes (1.6x of limit 50 MB/s)")
    expect(quantile([5, 1, 3, 2, 4], 0.5)).toBe(3)
  })
})

describe.skipIf(!integrationEnabled())(titled("bench harness, tiny run", integrationOff()), () => {
  it("measures the round trip side by side and reports it in the results shape", async () => {
    const results = await runBench({ quick: true, only: ["roundtrip"], jupyter: false, log: () => {} })
    expect(results.failures).toEqual([])
    expect(results.rows.map((r) => r.measure)).toContain("p50, EvalTool.run")
    for (const row of results.rows) {
      expect(row.veyyon).toBeGreaterThan(0)
      expect(row.floor).toBeGreaterThan(0)
      expect(row.jupyter).toBeNull()
    }
    expect(results.summary.targets).toBe(3)
    expect(JSON.stringify(results)).not.toContain(process.env.HOME ?? "\0")
    expect(resultsMarkdown(results)).toContain("| figure |")
  })
})
