/**
 * One sentence for params that do not fit their schema: the first problem, the field it
 * is in, and what to send instead, instead of a dump of the schema's TypeScript type.
 */
import { Formatter, type Schema, SchemaAST, SchemaIssue } from "effect"

/** What to say about each field: how to fix it, by field name. */
export type FieldHints = Readonly<Record<string, string>>

/** The parse options params are decoded with, so a problem can quote what was sent. */
export const PARAMS_PARSE_OPTIONS: SchemaAST.ParseOptions = { onExcessProperty: "error", reportInput: true }

const EXPECTED = /^Expected (.+?)(?:, got (.+))?$/s
const ARRAY_TYPE = /^(ReadonlyArray<|Array<|readonly \[|\[)/

const shortExpected = (expected: string): string => {
  if (expected === "object" || expected.startsWith("{")) return "an object"
  if (expected === "array" || ARRAY_TYPE.test(expected)) return "an array"
  return expected.length > 60 ? "a different type" : expected
}

const clip = (text: string): string => (text.length > 60 ? `${text.slice(0, 60)}…` : text)

interface Found {
  readonly path: ReadonlyArray<PropertyKey>
  readonly issue: SchemaIssue.Issue
  /** What a filter above the issue says about it, when one does. */
  readonly phrase: string | undefined
}

const sent = (issue: SchemaIssue.Issue): string | undefined => (SchemaIssue.hasInput(issue) ? Formatter.format(issue.input) : undefined)

const mustBe = (expected: string, got: string | undefined): string =>
  got === undefined ? `must be ${shortExpected(expected)}` : `must be ${shortExpected(expected)}, got ${clip(got)}`

/** A schema's message as a phrase: "must be …" when it states an expectation, else the message itself. */
const phraseOfMessage = (message: string): string => {
  const match = EXPECTED.exec(message)
  return match === null ? clip(message) : mustBe(match[1]!, match[2])
}

/** The phrase of a failed filter: its own message, else what it expects of the value it was given. */
const filterPhrase = (issue: SchemaIssue.Filter): string | undefined => {
  const { expected, message } = issue.filter.annotations ?? {}
  if (message !== undefined) return phraseOfMessage(message)
  return expected === undefined ? undefined : mustBe(expected, sent(issue))
}

/** The first leaf problem below `issue` (a group's first), with its path and what a filter above it says. */
const firstProblem = (issue: SchemaIssue.Issue, path: ReadonlyArray<PropertyKey>, phrase: string | undefined): Found => {
  switch (issue._tag) {
    case "Filter":
      return firstProblem(issue.issue, path, phrase ?? filterPhrase(issue))
    case "Encoding":
      return firstProblem(issue.issue, path, phrase)
    case "Pointer":
      return firstProblem(issue.issue, [...path, ...issue.path], phrase)
    case "Composite":
    case "AnyOf": {
      const first = issue.issues[0]
      return first === undefined ? { path, issue, phrase } : firstProblem(first, path, phrase)
    }
    default:
      return { path, issue, phrase }
  }
}

/** The phrase for a value that is not of `ast`'s type: its own message, else what it expects and what was sent. */
const phraseOfType = (ast: SchemaAST.AST, issue: SchemaIssue.Issue): string => {
  const own = ast.annotations?.message
  if (typeof own === "string") return phraseOfMessage(own)
  return mustBe(SchemaIssue.defaultLeafHook(new SchemaIssue.InvalidType(ast)).slice("Expected ".length), sent(issue))
}

/** The type a union asks for: its members but the `undefined` an optional field allows, when one is left. */
const definedType = (ast: SchemaAST.Union): SchemaAST.AST => {
  const defined = ast.types.filter((member) => !SchemaAST.isUndefined(member))
  return defined.length === 1 && ast.annotations?.message === undefined ? defined[0]! : ast
}

/** The predicate phrase for one leaf problem: "is missing", "must be string, got 1", or the schema's own message. */
const phraseOf = (found: Found): string => {
  if (found.phrase !== undefined) return found.phrase
  const issue = found.issue
  switch (issue._tag) {
    case "MissingKey":
      return "is missing"
    case "AnyOf":
      return phraseOfType(definedType(issue.ast), issue)
    default:
      return phraseOfMessage(SchemaIssue.defaultLeafHook(issue as SchemaIssue.Leaf))
  }
}

/**
 * The sentence for the first issue of `error`, naming the field of `subject` (e.g. "eval") and how to fix it.
 * Decode with `PARAMS_PARSE_OPTIONS` so the sentence can say what was sent.
 */
export const paramsProblem = (error: Schema.SchemaError | SchemaIssue.Issue, subject: string, hints: FieldHints): string => {
  const found = firstProblem(SchemaIssue.isIssue(error) ? error : error.issue, [], undefined)
  const field = found.path.map(String).join(".")
  const name = field === "" ? `the ${subject} params` : `\`${field}\``
  const hint = hints[String(found.path[0] ?? "")]
  const fix = hint === undefined ? "" : `: ${hint}`
  if (found.issue._tag === "UnexpectedKey") {
    return `${name} is not a parameter of ${subject}; the parameters are ${Object.keys(hints).join(", ")}`
  }
  return `${name} ${phraseOf(found)}${fix}`
}
