/**
 * How a setting may be spelled as text (an environment variable's value, or a value of
 * the settings object as a config source presents it): Schema codecs from a string, each
 * failing with a sentence that quotes the value and says what would be accepted.
 */
import { Effect, Option, Schema, SchemaIssue, SchemaTransformation } from "effect"
import { BOOLEAN_FLAG_SPELLINGS, parseBooleanFlag } from "./Flags.ts"

/** A codec reading `target` from text with `parse`, failing with `problem(raw)` when it returns undefined. */
const spelled = <S extends Schema.Top>(
  target: S,
  parse: (raw: string) => S["Type"] | undefined,
  problem: (raw: string) => string
) =>
  Schema.String.pipe(Schema.decodeTo(
    Schema.toType(target),
    SchemaTransformation.transformEffect<S["Type"], string>({
      decode: (raw) => {
        const value = parse(raw)
        return value === undefined ? Effect.fail(new SchemaIssue.InvalidValue({ message: problem(raw) })) : Effect.succeed(value)
      },
      encode: (value) => Effect.succeed(Array.isArray(value) ? value.join(",") : String(value))
    })
  ))

/** A boolean: 1/0, true/false, yes/no, on/off (trimmed, any case). */
export const FlagText = spelled(
  Schema.Boolean,
  (raw) => Option.getOrUndefined(parseBooleanFlag(raw)),
  (raw) => `${JSON.stringify(raw)} is not a boolean; use one of ${BOOLEAN_FLAG_SPELLINGS}, or unset it.`
)

/** Text, trimmed. */
export const TrimmedText = spelled(Schema.String, (raw) => raw.trim(), () => "")

/** One of `words` (trimmed, any case); `problem` words the failure from the trimmed value and the raw one. */
export const WordText = <const Words extends ReadonlyArray<string>>(
  words: Words,
  problem: (trimmed: string, raw: string) => string = (_trimmed, raw) =>
    `${JSON.stringify(raw)} is not one of ${words.join(", ")}; use one, or unset it.`
) =>
  spelled(
    Schema.Literals(words),
    (raw) => (words as ReadonlyArray<string>).includes(raw.trim().toLowerCase()) ? raw.trim().toLowerCase() as Words[number] : undefined,
    (raw) => problem(raw.trim(), raw)
  )

const digits = (raw: string): number | undefined => {
  const text = raw.trim()
  const value = /^[0-9]+$/.test(text) ? Number(text) : Number.NaN
  return Number.isSafeInteger(value) ? value : undefined
}

/** A whole number above 0, in decimal digits. */
export const PositiveIntText = spelled(
  Schema.Number,
  (raw) => {
    const value = digits(raw)
    return value !== undefined && value > 0 ? value : undefined
  },
  (raw) => `${JSON.stringify(raw.trim())} is not a positive whole number; unset it for the default.`
)

/** A whole number, 0 or more, in decimal digits. */
export const WholeNumberText = spelled(
  Schema.Number,
  digits,
  (raw) => `${JSON.stringify(raw.trim())} is not a whole number (0 or more); unset it for the default.`
)

/** A limit: a positive whole number of `unit`, or `off` (no limit, over any default). */
export const LimitText = (unit: string) =>
  spelled(
    Schema.Union([Schema.Number, Schema.Literal("off")]),
    (raw) => {
      if (raw.trim().toLowerCase() === "off") return "off"
      const value = Number(raw.trim())
      return Number.isSafeInteger(value) && value > 0 ? value : undefined
    },
    (raw) => `${JSON.stringify(raw)} is not a positive whole number of ${unit} or off; fix it, or unset it.`
  )

/** A list: text split at commas and white space, or (from the settings object) an array of strings. */
export const ListText = Schema.Union([
  Schema.Array(Schema.String),
  spelled(Schema.Array(Schema.String), (raw) => raw.split(/[\s,]+/).filter((entry) => entry !== ""), () => "")
])
