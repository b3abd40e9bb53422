/**
 * Generators for the property tests of the kernel and the renderers, on `effect/Arbitrary`:
 * picks among values or generators (optionally weighted), integers in a range, byte arrays,
 * records with optional keys, and text of a chosen alphabet (printable ASCII, any code point
 * including lone surrogates, or whole grapheme clusters).
 */
import { Arbitrary, Schema } from "effect"

/** An integer from `min` to `max`, both included. */
export const integer = (min: number, max: number): Arbitrary.Arbitrary<number> =>
  Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: min, maximum: max })))

/** A non-negative integer up to 2^31 - 1. */
export const nat: Arbitrary.Arbitrary<number> = integer(0, 0x7fffffff)

/** true or false. */
export const boolean: Arbitrary.Arbitrary<boolean> = Arbitrary.schema(Schema.Boolean)

/** One of `values`. */
export const constantFrom = <const A>(...values: ReadonlyArray<A>): Arbitrary.Arbitrary<A> =>
  Arbitrary.map(integer(0, values.length - 1), (index) => values[index]!)

/** A value of one of `arbitraries`, each as likely. */
export const oneOf = <A>(...arbitraries: ReadonlyArray<Arbitrary.Arbitrary<A>>): Arbitrary.Arbitrary<A> =>
  Arbitrary.flatMap(integer(0, arbitraries.length - 1), (index) => arbitraries[index]!)

/** A value of one of `choices`, each as likely as its weight says. */
export const weighted = <A>(
  ...choices: ReadonlyArray<{ readonly weight: number; readonly arbitrary: Arbitrary.Arbitrary<A> }>
): Arbitrary.Arbitrary<A> => oneOf(...choices.flatMap(({ arbitrary, weight }) => Array.from({ length: weight }, () => arbitrary)))

/** Up to `maxLength` bytes. */
export const bytes = (maxLength: number): Arbitrary.Arbitrary<Uint8Array> =>
  Arbitrary.map(Arbitrary.array(integer(0, 255), { maxLength }), (values) => Uint8Array.from(values))

/** An object with every key of `required` and, each independently present or absent, the keys of `optional`. */
export const record = <Required extends Record<string, unknown>, Optional extends Record<string, unknown>>(
  required: { readonly [K in keyof Required]: Arbitrary.Arbitrary<Required[K]> },
  optional: { readonly [K in keyof Optional]: Arbitrary.Arbitrary<Optional[K]> }
): Arbitrary.Arbitrary<Required & Partial<Optional>> => {
  const maybe = Object.fromEntries(
    Object.entries(optional).map(([key, arbitrary]) => [key, oneOf(Arbitrary.Constant(absent), arbitrary as Arbitrary.Arbitrary<unknown>)])
  )
  return Arbitrary.map(Arbitrary.all({ ...required, ...maybe } as Record<string, Arbitrary.Arbitrary<unknown>>), (fields) =>
    Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== absent)) as Required & Partial<Optional>)
}

const absent: unique symbol = Symbol("absent")

const joined = (characters: Arbitrary.Arbitrary<string>, maxLength?: number): Arbitrary.Arbitrary<string> =>
  Arbitrary.map(Arbitrary.array(characters, maxLength === undefined ? {} : { maxLength }), (parts) => parts.join(""))

/** Printable ASCII, as `fast-check`'s `grapheme-ascii` strings. */
export const asciiText = (maxLength?: number): Arbitrary.Arbitrary<string> =>
  joined(Arbitrary.map(integer(0x20, 0x7e), (code) => String.fromCharCode(code)), maxLength)

/** Any code point, ASCII controls, the whole BMP with lone surrogates, and the astral planes alike. */
export const binaryText = (maxLength?: number): Arbitrary.Arbitrary<string> =>
  joined(Arbitrary.map(oneOf(integer(0, 0x7f), integer(0x80, 0xffff), integer(0x10000, 0x10ffff)), (code) => String.fromCodePoint(code)), maxLength)

/** Grapheme clusters of several code points: combining marks, emoji with modifiers and joiners, flags, Hangul jamo. */
const CLUSTERS = ["e\u0301", "a\u0308\u0323", "👍🏽", "👨‍👩‍👧", "🇫🇷", "❤️", "\u1100\u1161\u11a8", "क्षि", "🏳️‍🌈"] as const

/** Whole grapheme clusters (printable, no controls or lone surrogates), as `fast-check`'s `grapheme` strings. */
export const graphemeText = (options: { readonly minLength?: number; readonly maxLength?: number } = {}): Arbitrary.Arbitrary<string> => {
  const cluster = oneOf(
    Arbitrary.map(integer(0x20, 0x7e), (code) => String.fromCharCode(code)),
    Arbitrary.map(oneOf(integer(0xa1, 0x2fff), integer(0x3000, 0xd7ff), integer(0xe000, 0xfffd)), (code) => String.fromCharCode(code)),
    Arbitrary.map(integer(0x1f300, 0x1faff), (code) => String.fromCodePoint(code)),
    constantFrom(...CLUSTERS)
  )
  const clusters = Arbitrary.array(cluster, {
    ...(options.maxLength === undefined ? {} : { maxLength: options.maxLength }),
    ...(options.minLength === undefined ? {} : { minLength: options.minLength })
  })
  return Arbitrary.map(clusters, (parts) => parts.join(""))
}

/** A record of up to a few keys from `keys`, each with a value from `values`. */
export const dictionary = <A>(keys: Arbitrary.Arbitrary<string>, values: Arbitrary.Arbitrary<A>): Arbitrary.Arbitrary<Record<string, A>> =>
  Arbitrary.map(Arbitrary.array(Arbitrary.all([keys, values])), (entries) => Object.fromEntries(entries))

/** Any JSON-like value: strings, numbers, booleans, null, arrays and records of them. */
export const anything: Arbitrary.Arbitrary<unknown> = Arbitrary.schema(Schema.Unknown)

/**
 * Check options letting generated arrays and strings grow to `size` elements (`fast-check`
 * lets an array with a `maxLength` reach it; here lengths are capped by the run's size).
 */
export const sized = (size: number) => ({ arbitrary: { size } })
