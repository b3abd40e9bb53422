/**
 * One sentence for params that do not fit their schema: the first problem, the field it
 * is in, and what to send instead, instead of a dump of the schema's TypeScript type.
 */
import { ParseResult } from "effect"

/** What to say about each field: how to fix it, by field name. */
export type FieldHints = Readonly<Record<string, string>>

const EXPECTED = /^Expected (.+?), actual (.+)$/s
const ARRAY_TYPE = /^(ReadonlyArray<|Array<|readonly \[|\[)/

const shortExpected = (expected: string): string => {
  if (expected.startsWith("{")) return "an object"
  if (ARRAY_TYPE.test(expected)) return "an array"
  return expected.length > 60 ? "a different type" : expected
}

const clip = (text: string): string => (text.length > 60 ? `${text.slice(0, 60)}…` : text)

/** The sentence for the first issue of `error`, naming the field of `subject` (e.g. "eval") and how to fix it. */
export const paramsProblem = (error: ParseResult.ParseError, subject: string, hints: FieldHints): string => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  if (issue === undefined) return `the ${subject} params do not fit the schema`
  const field = issue.path.map(String).join(".")
  const name = field === "" ? `the ${subject} params` : `\`${field}\``
  const hint = hints[String(issue.path[0] ?? "")]
  const fix = hint === undefined ? "" : `: ${hint}`
  if (issue._tag === "Unexpected") {
    return `${name} is not a parameter of ${subject}; the parameters are ${Object.keys(hints).join(", ")}`
  }
  const match = EXPECTED.exec(issue.message)
  if (match === null) return `${name} ${clip(issue.message)}${fix}`
  return `${name} must be ${shortExpected(match[1]!)}, got ${clip(match[2]!)}${fix}`
}
