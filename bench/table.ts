/**
 * Result rows of the bench, and how they print: a console table and the markdown the
 * README includes.
 */
import { round } from "./stats.ts"

/** A target a row is held to, and whether it was met. */
export interface Target {
  /** How the target reads, e.g. `<= 2x floor`. */
  readonly text: string
  /** The bound the veyyon value is compared with, in the row's unit. */
  readonly limit: number
  readonly direction: "at-most" | "at-least"
  readonly met: boolean
  /** veyyon / limit. */
  readonly ratio: number
}

/** One measured quantity, side by side. `null` where a column was not measured. */
export interface Row {
  readonly figure: string
  readonly measure: string
  readonly unit: string
  readonly veyyon: number | null
  readonly floor: number | null
  readonly jupyter: number | null
  readonly target?: Target
}

/** A target on `value` against `limit`. */
export const target = (text: string, value: number | null, limit: number, direction: Target["direction"]): Target => {
  const ratio = value === null ? Number.NaN : value / limit
  const met = value !== null && (direction === "at-most" ? value <= limit : value >= limit)
  return { text, limit, direction, met, ratio }
}

const cell = (value: number | null): string => (value === null || Number.isNaN(value) ? "-" : String(round(value)))

const metText = (row: Row): string => {
  const t = row.target
  if (t === undefined) return ""
  return `${t.met ? "yes" : "no"} (${round(t.ratio, 2)}x of limit ${round(t.limit)} ${row.unit})`
}

const HEADER = ["figure", "measure", "unit", "veyyon", "floor", "Jupyter", "target", "met"] as const

const cells = (row: Row): ReadonlyArray<string> => [
  row.figure,
  row.measure,
  row.unit,
  cell(row.veyyon),
  cell(row.floor),
  cell(row.jupyter),
  row.target?.text ?? "",
  metText(row)
]

/** The rows as an aligned plain-text table. */
export const textTable = (rows: ReadonlyArray<Row>): string => {
  const table = [HEADER, ...rows.map(cells)]
  const widths = HEADER.map((_, i) => Math.max(...table.map((line) => line[i]!.length)))
  const format = (line: ReadonlyArray<string>) => line.map((text, i) => text.padEnd(widths[i]!)).join("  ").trimEnd()
  return [format(table[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...table.slice(1).map(format)].join("\n")
}

const escape = (text: string): string => text.replaceAll("|", "\\|")

/** The rows as a GitHub markdown table. */
export const markdownTable = (rows: ReadonlyArray<Row>): string =>
  [
    `| ${HEADER.join(" | ")} |`,
    `|${HEADER.map((_, i) => (i >= 3 && i <= 5 ? "---:" : "---")).join("|")}|`,
    ...rows.map((row) => `| ${cells(row).map(escape).join(" | ")} |`)
  ].join("\n")
