/**
 * The runner's stream frames without `JSON.parse`: a `stdout`/`stderr` line exactly as the
 * runners write it (`{"type":"stdout","id":"…","data":"…"}`), whose text escapes nothing but
 * newlines, is taken apart with a few string scans. `JSON.parse` walks a 64 KiB frame with
 * escapes at well under 1 GB/s; this is several times quicker. Anything else (another key
 * order, other escapes, a quote inside) is left to `JSON.parse`.
 */
import type { StderrFrame, StdoutFrame } from "./Frame.ts"

const STDOUT_HEAD = "{\"type\":\"stdout\",\"id\":\""
const STDERR_HEAD = "{\"type\":\"stderr\",\"id\":\""
const DATA_KEY = "\",\"data\":\""
const TAIL = "\"}"
const BACKSLASH = "\\"
const LOWERCASE_N = 0x6e

/**
 * The stream frame `line` holds when it has the runners' exact layout and its text has no
 * escape but `\n`; undefined otherwise (decode it as JSON). A frame it returns is the one
 * `JSON.parse` gives, except that raw control characters in the text, which JSON forbids,
 * are kept as they are instead of failing the line.
 */
export const decodeStreamLine = (line: string): StdoutFrame | StderrFrame | undefined => {
  const type = line.startsWith(STDOUT_HEAD) ? "stdout" : line.startsWith(STDERR_HEAD) ? "stderr" : undefined
  if (type === undefined || !line.endsWith(TAIL)) return undefined
  const idEnd = line.indexOf("\"", STDOUT_HEAD.length)
  if (idEnd === -1 || !line.startsWith(DATA_KEY, idEnd)) return undefined
  const id = line.slice(STDOUT_HEAD.length, idEnd)
  const dataStart = idEnd + DATA_KEY.length
  const dataEnd = line.length - TAIL.length
  if (dataStart > dataEnd || id.includes(BACKSLASH)) return undefined
  const quoted = line.slice(dataStart, dataEnd)
  if (quoted.includes("\"")) return undefined
  let escape = quoted.indexOf(BACKSLASH)
  if (escape === -1) return { type, id, data: quoted }
  while (escape !== -1) {
    if (quoted.charCodeAt(escape + 1) !== LOWERCASE_N) return undefined
    escape = quoted.indexOf(BACKSLASH, escape + 2)
  }
  return { type, id, data: quoted.replaceAll("\\n", "\n") }
}
