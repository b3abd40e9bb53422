/**
 * Status events from magics and prelude helpers as short lines: `find 3 matches`,
 * `pip: evicted numpy (re-imported fresh on next import)`, and `op key=value …` for any
 * other op. Fields an op does not describe are appended as `key=value`. Each fact shows
 * once in the text: `cd`, `time` and `timeit` render as nothing, because the magic that
 * sent them printed the same fact (`%cd` the path, `%time` its CPU and wall times,
 * `%timeit` its summary), and so does `egress` (the sandbox's proxy: a refusal is already a line
 * on the cell's stderr); `pip` shows only the modules it evicted, as pip prints the rest.
 * Watchdog control (`timeout` pause/resume) is not for people and renders as nothing.
 * The events themselves stay structured for event handlers and JSON output.
 */
import { Option } from "effect"

/** One structured status event: its op and the remaining fields. */
export interface StatusEvent {
  readonly op: string
  readonly fields: Readonly<Record<string, unknown>>
}

/** The longest a single field value is shown, in characters. */
const MAX_VALUE_CHARS = 120

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

const renderPip = ({ fields }: StatusEvent): string | null => {
  const evicted = words(fields.evicted)
  return evicted === undefined ? null : `pip: evicted ${evicted.split(" ").join(", ")} (re-imported fresh on next import)`
}

const renderFind = ({ fields }: StatusEvent): string | undefined =>
  isNumber(fields.count) ? line(["find", plural(fields.count, "match", "matches")], keyValues(fields, ["count"])) : undefined

const renderGeneric = ({ fields, op }: StatusEvent): string => line([op], keyValues(fields, []))

const renderKernelRestart = ({ fields }: StatusEvent): string =>
  `── the kernel died (${words(fields.exit) ?? "unexpectedly"}); the output above is from the first attempt; ` +
  `the cell runs again in a fresh kernel ──`

/**
 * Ops whose fact the cell's text already shows: what the magic that sent them printed on
 * stdout, and the egress proxy's decisions (a refusal is a line on stderr, an allowed
 * destination is what the cell asked for).
 */
const PRINTED_OPS: ReadonlySet<string> = new Set(["cd", "time", "timeit", "egress"])

/** Per-op renderers: a line, `null` when there is nothing to add, `undefined` to fall back to the generic line. */
const RENDERERS: Readonly<Record<string, (event: StatusEvent) => string | null | undefined>> = {
  pip: renderPip,
  find: renderFind,
  "kernel-restart": renderKernelRestart
}

/** Whether an event only steers the cell watchdog (`timeout` pause/resume). */
export const isWatchdogControl = (event: StatusEvent): boolean =>
  event.op === "timeout" && (event.fields.action === "pause" || event.fields.action === "resume")

/** The status line for an event; `None` for watchdog control and for facts the cell's text already shows. */
export const renderStatus = (event: StatusEvent): Option.Option<string> => {
  if (isWatchdogControl(event) || PRINTED_OPS.has(event.op)) return Option.none()
  const specific = Object.hasOwn(RENDERERS, event.op) ? RENDERERS[event.op]!(event) : undefined
  return specific === null ? Option.none() : Option.some(specific ?? renderGeneric(event))
}
