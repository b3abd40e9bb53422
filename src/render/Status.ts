/**
 * Status events from magics and prelude helpers as short lines: `cd /tmp`,
 * `time 12.3 ms`, `timeit 1.23 µs per loop (7 runs × 100000 loops)`, `pip install numpy`,
 * `find 3 matches`, and `op key=value …` for any other op. Fields an op does not
 * describe are appended as `key=value`. Watchdog control (`timeout` pause/resume) is
 * not for people and renders as nothing.
 */
import { Option } from "effect"

/** One structured status event: its op and the remaining fields. */
export interface StatusEvent {
  readonly op: string
  readonly fields: Readonly<Record<string, unknown>>
}

/** The longest a single field value is shown, in characters. */
const MAX_VALUE_CHARS = 120

const DURATION_UNITS: ReadonlyArray<{ readonly unit: string; readonly perMs: number }> = [
  { unit: "ns", perMs: 1e6 },
  { unit: "µs", perMs: 1e3 },
  { unit: "ms", perMs: 1 },
  { unit: "s", perMs: 1e-3 }
]

const threeSignificant = (value: number): string =>
  value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2)

/** A duration given in milliseconds, to three significant digits: `812 ns`, `1.23 µs`, `12.3 ms`, `4.56 s`, `2 min 3.4 s`. */
export const formatDuration = (ms: number): string => {
  if (!Number.isFinite(ms) || ms < 0) return `${ms} ms`
  if (ms === 0) return "0 ms"
  if (ms >= 60_000) {
    const minutes = Math.floor(ms / 60_000)
    const seconds = (ms - minutes * 60_000) / 1000
    return `${minutes} min ${seconds.toFixed(1)} s`
  }
  for (const { perMs, unit } of DURATION_UNITS) {
    const shown = threeSignificant(ms * perMs)
    if (Number(shown) < 1000 || unit === "s") return `${shown} ${unit}`
  }
  return `${ms} ms`
}

const plural = (count: number, singular: string, pluralForm: string = `${singular}s`): string =>
  `${count} ${count === 1 ? singular : pluralForm}`

const clip = (text: string): string => (text.length > MAX_VALUE_CHARS ? text.slice(0, MAX_VALUE_CHARS - 1) + "…" : text)

/** A field value as written after `key=`: bare when it is a simple word, JSON otherwise. */
const formatValue = (value: unknown): string => {
  if (typeof value === "string") return clip(/^[^\s"'=]+$/.test(value) ? value : JSON.stringify(value))
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value)
  if (value === undefined) return "undefined"
  try {
    return clip(JSON.stringify(value) ?? String(value))
  } catch {
    return clip(String(value))
  }
}

const keyValues = (fields: Readonly<Record<string, unknown>>, skip: ReadonlyArray<string>): Array<string> =>
  Object.entries(fields)
    .filter(([key]) => !skip.includes(key))
    .map(([key, value]) => `${key}=${formatValue(value)}`)

const line = (head: ReadonlyArray<string>, rest: ReadonlyArray<string>): string => [...head, ...rest].join(" ")

const isNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

const words = (value: unknown): string | undefined => {
  if (typeof value === "string" && value.trim().length > 0) return value.trim()
  if (Array.isArray(value) && value.length > 0 && value.every((item) => typeof item === "string")) return value.join(" ")
  return undefined
}

const renderCd = ({ fields }: StatusEvent): string | undefined =>
  typeof fields.path === "string" ? line(["cd", fields.path], keyValues(fields, ["path"])) : undefined

const renderTime = ({ fields }: StatusEvent): string | undefined =>
  isNumber(fields.ms) ? line(["time", formatDuration(fields.ms)], keyValues(fields, ["ms"])) : undefined

const renderTimeit = ({ fields }: StatusEvent): string | undefined => {
  if (!isNumber(fields.ms)) return undefined
  const runs = isNumber(fields.runs) ? fields.runs : undefined
  const loops = isNumber(fields.loops) ? fields.loops : undefined
  const counts = [
    ...(runs === undefined ? [] : [plural(runs, "run")]),
    ...(loops === undefined ? [] : [plural(loops, "loop")])
  ]
  const detail = counts.length === 0 ? [] : [`(${counts.join(" × ")})`]
  return line(["timeit", formatDuration(fields.ms), "per loop", ...detail], keyValues(fields, ["ms", "runs", "loops"]))
}

const renderPip = ({ fields }: StatusEvent): string | undefined => {
  const args = words(fields.args)
  if (args !== undefined) return line(["pip", args], keyValues(fields, ["args"]))
  const action = words(fields.action) ?? words(fields.command)
  const packages = words(fields.packages)
  if (action === undefined && packages === undefined) return undefined
  return line(
    ["pip", ...(action === undefined ? [] : [action]), ...(packages === undefined ? [] : [packages])],
    keyValues(fields, ["action", "command", "packages"])
  )
}

const renderFind = ({ fields }: StatusEvent): string | undefined =>
  isNumber(fields.count) ? line(["find", plural(fields.count, "match", "matches")], keyValues(fields, ["count"])) : undefined

const renderGeneric = ({ fields, op }: StatusEvent): string => line([op], keyValues(fields, []))

const renderKernelRestart = ({ fields }: StatusEvent): string =>
  `── the kernel died (${words(fields.exit) ?? "unexpectedly"}); the output above is from the first attempt; ` +
  `the cell runs again in a fresh kernel ──`

const RENDERERS: Readonly<Record<string, (event: StatusEvent) => string | undefined>> = {
  cd: renderCd,
  time: renderTime,
  timeit: renderTimeit,
  pip: renderPip,
  find: renderFind,
  "kernel-restart": renderKernelRestart
}

/** Whether an event only steers the cell watchdog (`timeout` pause/resume). */
export const isWatchdogControl = (event: StatusEvent): boolean =>
  event.op === "timeout" && (event.fields.action === "pause" || event.fields.action === "resume")

/** The status line for an event; `None` for watchdog control, which people need not see. */
export const renderStatus = (event: StatusEvent): Option.Option<string> => {
  if (isWatchdogControl(event)) return Option.none()
  const specific = Object.hasOwn(RENDERERS, event.op) ? RENDERERS[event.op]!(event) : undefined
  return Option.some(specific ?? renderGeneric(event))
}
