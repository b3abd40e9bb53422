/**
 * Figure: the MCP doors' own cost (`mcpdoors.ts`). The official SDK client's warm
 * `eval` calls through our stdio and HTTP doors beside the SDK's own `Server` replaying
 * our tool and a captured result (the floor column), rounds alternated with the
 * in-process tool; a door is held to its baseline plus the tool's p50 plus 0.3 ms (stdio)
 * or 0.5 ms (HTTP). Snapshots on (stdio) and the viewer page on (HTTP) are rows too.
 * Needs `dist/` and `bin/veyyon.mjs`.
 */
import type { BenchContext, FigureResult } from "../context.ts"
import { type DoorName, measureMcpDoors } from "../mcpdoors.ts"
import { type Row, target } from "../table.ts"

const LABELS: Record<DoorName, string> = {
  stdio: "stdio",
  http: "streamable HTTP",
  "sdk-stdio": "the SDK's Server over stdio",
  "sdk-http": "the SDK's Server over streamable HTTP",
  "stdio+snapshots": "stdio, snapshots every-cell",
  "http+viewer": "streamable HTTP, --viewer"
}

/** Measures the MCP doors figure. */
export const mcp = async (context: BenchContext): Promise<FigureResult> => {
  const rounds = context.quick ? 2 : 4
  const calls = context.quick ? 30 : 300
  const warmup = context.quick ? 30 : 300
  const result = await measureMcpDoors({ python: context.python.executable, rounds, calls, warmup, log: context.log })
  const figure = "mcp"
  const us = (ms: number) => ms * 1000
  const p50 = (name: DoorName | "tool") => us(result.doors[name].p50)
  const p99 = (name: DoorName | "tool") => us(result.doors[name].p99)
  const rows: Array<Row> = [
    { figure, measure: "p50, warm cell in-process (EvalTool.run)", unit: "us", veyyon: p50("tool"), floor: null, jupyter: null },
    ...result.budgets.map((budget): Row => ({
      figure,
      measure: `p50, warm tools/call, ${LABELS[budget.door]} (floor: ${LABELS[budget.baseline]})`,
      unit: "us",
      veyyon: us(budget.doorMs),
      floor: p50(budget.baseline),
      jupyter: null,
      target: target(`<= floor + tool + ${budget.marginMs} ms`, us(budget.doorMs), us(budget.limitMs), "at-most")
    })),
    ...result.budgets.map((budget): Row => ({
      figure,
      measure: `p99, warm tools/call, ${LABELS[budget.door]}`,
      unit: "us",
      veyyon: p99(budget.door),
      floor: p99(budget.baseline),
      jupyter: null
    }))
  ]
  return {
    id: "mcp",
    title: `the MCP doors: the official SDK client's warm \`x = 1 + 1\` through our doors vs the SDK's own Server replaying our tool and a captured result (${rounds} alternated rounds of ${calls} calls after ${warmup} warm-up; p50/p99 of all calls)`,
    rows,
    details: { rounds, calls, warmup, doors: result.doors, budgets: result.budgets },
    notes: [
      "the SDK's servers run our tool definition (from our tools/list) and a result captured from a real call, with no work behind them, so the client validates the same structuredContent; both HTTP servers answer tools/call as an event stream"
    ]
  }
}
