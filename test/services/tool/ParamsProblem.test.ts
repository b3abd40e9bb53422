/**
 * The params sentence over the schema library's issues: how each kind of issue (a missing or
 * unexpected key, a wrong type, a union, a failed filter, a failed transformation) becomes one
 * sentence, with and without the value that was sent. The sentences agents see at the MCP
 * door are pinned in `test/mcp/framing.test.ts`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Result, Schema, type SchemaAST } from "effect"
import { PARAMS_PARSE_OPTIONS, paramsProblem } from "../../../src/services/tool/ParamsProblem.ts"

const sentence = (
  schema: Schema.Codec<unknown, unknown>,
  value: unknown,
  hints: Record<string, string> = {},
  options: SchemaAST.ParseOptions = PARAMS_PARSE_OPTIONS
) =>
  Result.match(Schema.decodeUnknownResult(schema)(value, options), {
    onFailure: (error) => paramsProblem(error, "eval", hints),
    onSuccess: () => "fits"
  })

describe("paramsProblem", () => {
  it("says what was expected without what was sent when the input was not reported", () => {
    expect(sentence(Schema.Struct({ code: Schema.String }), { code: 1 }, {}, { onExcessProperty: "error" })).toBe("`code` must be string")
    const range = Schema.Struct({ n: Schema.Number.check(Schema.isBetween({ minimum: 1, maximum: 3 })) })
    expect(sentence(range, { n: 9 }, {}, { onExcessProperty: "error" })).toBe("`n` must be a value between 1 and 3")
    expect(sentence(range, { n: 9 })).toBe("`n` must be a value between 1 and 3, got 9")
  })

  it("names every member of a union, leaving out the undefined an optional field allows", () => {
    const either = Schema.Union([Schema.String, Schema.Number])
    expect(sentence(Schema.Struct({ v: either }), { v: true })).toBe("`v` must be string | number, got true")
    expect(sentence(Schema.Struct({ v: Schema.optional(either) }), { v: true })).toBe("`v` must be string | number, got true")
    expect(sentence(Schema.Struct({ v: Schema.optional(Schema.Boolean) }), { v: 1 })).toBe("`v` must be boolean, got 1")
    expect(sentence(Schema.Struct({ t: Schema.Literals(["a", "b"]) }), { t: 9 })).toBe("`t` must be \"a\" | \"b\", got 9")
    expect(sentence(Schema.Struct({ n: Schema.optional(Schema.Number.annotate({ message: "needs a count" })) }), { n: "x" })).toBe("`n` needs a count")
  })

  it("follows the member of a union that came closest to the field that does not fit", () => {
    const shapes = Schema.Union([
      Schema.Struct({ kind: Schema.Literal("a"), n: Schema.Number }),
      Schema.Struct({ kind: Schema.Literal("b"), s: Schema.String })
    ])
    expect(sentence(Schema.Struct({ shape: shapes }), { shape: { kind: "a", n: "x" } })).toBe("`shape.n` must be number, got \"x\"")
  })

  it("says an object for a type named like one", () => {
    expect(sentence(Schema.Struct({ p: Schema.Number.annotate({ identifier: "{ x: number }" }) }), { p: "x" })).toBe("`p` must be an object, got \"x\"")
  })

  it("follows a transformation to the field inside it", () => {
    const json = Schema.Struct({ j: Schema.fromJsonString(Schema.Struct({ a: Schema.Number })) })
    expect(sentence(json, { j: "not json" })).toBe("`j` must be a valid JSON string, got \"not json\"")
    expect(sentence(json, { j: "{\"a\":\"x\"}" }, { j: "pass JSON text" })).toBe("`j.a` must be number, got \"x\": pass JSON text")
    expect(sentence(Schema.Struct({ s: Schema.Tuple([Schema.String]) }), { s: [1] })).toBe("`s.0` must be string, got 1")
  })

  it("keeps a schema's own message, as an expectation when it states one", () => {
    expect(sentence(Schema.Struct({ n: Schema.Number.annotate({ message: "needs a count" }) }), { n: "x" }, { n: "pass a number" })).toBe(
      "`n` needs a count: pass a number"
    )
    expect(sentence(Schema.Struct({ n: Schema.optional(Schema.Number).annotate({ message: "needs an optional count" }) }), { n: "x" })).toBe(
      "`n` needs an optional count"
    )
    expect(sentence(Schema.Struct({ n: Schema.Number.annotate({ message: "Expected a count, got nothing useful" }) }), { n: "x" })).toBe(
      "`n` must be a count, got nothing useful"
    )
  })

  it("says what a failed filter expects, from its message or its expectation", () => {
    const filtered = (filter: Parameters<typeof Schema.Number.check>[0]) => Schema.Struct({ n: Schema.Number.check(filter) })
    expect(sentence(filtered(Schema.makeFilter(() => "Expected an even number, got 3")), { n: 3 })).toBe("`n` must be an even number, got 3")
    expect(sentence(filtered(Schema.makeFilter(() => false, { expected: "an even number" })), { n: 3 })).toBe("`n` must be an even number, got 3")
    expect(sentence(filtered(Schema.makeFilter(() => false, { message: "Expected a small number" })), { n: 3 })).toBe("`n` must be a small number")
    expect(sentence(filtered(Schema.makeFilter(() => false)), { n: 1 })).toBe("`n` Invalid data 1")
    expect(sentence(filtered(Schema.makeFilter(() => `Expected an even number, got ${"9".repeat(70)}`)), { n: 3 })).toBe(
      `\`n\` must be an even number, got ${"9".repeat(60)}…`
    )
  })

  it("names a nested unexpected key by its path and lists the top-level parameters", () => {
    const nested = Schema.Struct({ a: Schema.Struct({ b: Schema.String }) })
    expect(sentence(nested, { a: { b: "x", c: 1 } }, { a: "pass a" })).toBe("`a.c` is not a parameter of eval; the parameters are a")
  })

  it("reads an issue as well as the error holding it", () => {
    const decoded = Schema.decodeUnknownResult(Schema.Struct({ a: Schema.String }))({}, PARAMS_PARSE_OPTIONS)
    expect(Result.isFailure(decoded)).toBe(true)
    if (Result.isFailure(decoded)) {
      expect(paramsProblem(decoded.failure.issue, "tools/call", { a: "pass a" })).toBe("`a` is missing: pass a")
      expect(paramsProblem(decoded.failure, "tools/call", { a: "pass a" })).toBe("`a` is missing: pass a")
    }
  })
})
