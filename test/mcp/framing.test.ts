/**
 * The pure parts of the MCP doors: JSON-RPC frames, the params sentence, progress,
 * Origin and token checks, artifact MIME types.
 */
import { Result, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { artifactMimeType, isTextMimeType, readContents } from "../../src/mcp/ArtifactResources.ts"
import { bearerMatches, originAllowed } from "../../src/mcp/HttpDoor.ts"
import { parseFrame, progressTokenOf, tooLargeReply } from "../../src/mcp/JsonRpc.ts"
import { lastLine, MAX_PROGRESS_MESSAGE_CHARS, progressIntervalMs, progressNotification } from "../../src/mcp/Progress.ts"
import { PARAMS_PARSE_OPTIONS, paramsProblem } from "../../src/services/tool/ParamsProblem.ts"

describe("parseFrame", () => {
  it("classifies requests, notifications and responses, keeping the id as sent", () => {
    expect(parseFrame(`{"jsonrpc":"2.0","id":"a","method":"ping"}`)).toEqual({ _tag: "Request", id: "a", method: "ping", params: undefined })
    expect(parseFrame(`{"jsonrpc":"2.0","id":0,"method":"ping","params":{}}`)).toMatchObject({ _tag: "Request", id: 0 })
    expect(parseFrame(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)).toMatchObject({ _tag: "Notification" })
    expect(parseFrame(`{"jsonrpc":"2.0","id":1,"result":{}}`)).toEqual({ _tag: "Response", id: 1, result: {} })
    expect(parseFrame(`{"jsonrpc":"2.0","id":"veyyon-2","error":{"code":-1,"message":"no"}}`)).toEqual({
      _tag: "Response",
      id: "veyyon-2",
      error: { code: -1, message: "no" }
    })
  })

  it("reads a client's error response defensively: a missing code or message is supplied, a long message clamped", () => {
    expect(parseFrame(`{"jsonrpc":"2.0","id":3,"error":"bad"}`)).toMatchObject({ error: { code: -32603, message: "the client answered with an error" } })
    const long = parseFrame(JSON.stringify({ jsonrpc: "2.0", id: 3, error: { code: 7, message: "x".repeat(10_000) } }))
    expect(long).toMatchObject({ error: { code: 7 } })
    expect((long as { readonly error: { readonly message: string } }).error.message.length).toBe(500)
  })

  it("answers what is not a request with the JSON-RPC error it is owed", () => {
    expect(parseFrame("{not json")).toMatchObject({ _tag: "Invalid", reply: { id: null, error: { code: -32700 } } })
    expect(parseFrame("[]")).toMatchObject({ reply: { id: null, error: { code: -32600 } } })
    expect(parseFrame("42")).toMatchObject({ reply: { id: null, error: { code: -32600 } } })
    expect(parseFrame(`{"id":5,"method":"ping"}`)).toMatchObject({ reply: { id: 5, error: { code: -32600 } } })
    expect(parseFrame(`{"jsonrpc":"2.0","id":6,"method":7}`)).toMatchObject({ reply: { id: 6, error: { code: -32600 } } })
    expect(parseFrame(`{"jsonrpc":"2.0","id":7,"method":"ping","params":[1]}`)).toMatchObject({ reply: { id: 7, error: { code: -32602 } } })
    expect(parseFrame(`{"jsonrpc":"2.0","id":null,"method":"ping"}`)).toMatchObject({ reply: { id: null, error: { code: -32600 } } })
    expect(tooLargeReply(8 * 1024 * 1024)).toMatchObject({ id: null, error: { code: -32600, message: expect.stringContaining("8 MiB") } })
  })

  it("finds a progress token in _meta", () => {
    expect(progressTokenOf({ _meta: { progressToken: 3 } })).toBe(3)
    expect(progressTokenOf({ _meta: { progressToken: "t" } })).toBe("t")
    expect(progressTokenOf({ _meta: {} })).toBeUndefined()
    expect(progressTokenOf(undefined)).toBeUndefined()
  })
})

describe("paramsProblem", () => {
  const schema = Schema.Struct({ name: Schema.String, arguments: Schema.Record(Schema.String, Schema.Unknown) })
  const problem = (value: unknown) =>
    Result.match(Schema.decodeUnknownResult(schema)(value, PARAMS_PARSE_OPTIONS), {
      onFailure: (error) => paramsProblem(error, "tools/call", { name: "pass the tool's name", arguments: "pass an object" }),
      onSuccess: () => "fits"
    })

  it("names the field and the fix in one sentence, never the TypeScript type", () => {
    expect(problem({ arguments: {} })).toBe("`name` is missing: pass the tool's name")
    expect(problem({ name: 1, arguments: {} })).toBe("`name` must be string, got 1: pass the tool's name")
    expect(problem({ name: "x", arguments: {}, extra: 1 })).toBe("`extra` is not a parameter of tools/call; the parameters are name, arguments")
    expect(problem(5)).toBe("the tools/call params must be an object, got 5")
  })

  const sentence = (schema: Schema.Codec<any, any>, value: unknown, hints: Record<string, string> = {}) =>
    Result.match(Schema.decodeUnknownResult(schema)(value, PARAMS_PARSE_OPTIONS), {
      onFailure: (error) => paramsProblem(error, "eval", hints),
      onSuccess: () => "fits"
    })

  it("joins a nested field's path with dots and takes the hint of its top-level field", () => {
    const nested = Schema.Struct({ options: Schema.Struct({ depth: Schema.Number }) })
    expect(sentence(nested, { options: { depth: "deep" } }, { options: "pass { depth: number }" })).toBe(
      "`options.depth` must be number, got \"deep\": pass { depth: number }"
    )
    expect(sentence(nested, { options: {} })).toBe("`options.depth` is missing")
  })

  it("says an array or an object for a container type, and a different type for a long one", () => {
    const s = Schema.Struct({
      items: Schema.Array(Schema.String),
      list: Schema.mutable(Schema.Array(Schema.String)),
      pair: Schema.Tuple([Schema.Number, Schema.Number]),
      point: Schema.mutable(Schema.Tuple([Schema.Number, Schema.Number])),
      where: Schema.Struct({ x: Schema.Number })
    })
    const fine = { items: [], list: [], pair: [1, 2], point: [1, 2], where: { x: 1 } }
    for (const field of ["items", "list", "pair", "point"]) {
      expect(sentence(s, { ...fine, [field]: 3 })).toBe(`\`${field}\` must be an array, got 3`)
    }
    expect(sentence(s, { ...fine, where: 4 })).toBe("`where` must be an object, got 4")
    const named = (length: number) => Schema.Struct({ mode: Schema.Number.annotate({ identifier: "N".repeat(length) }) })
    expect(sentence(named(61), { mode: "z" })).toBe("`mode` must be a different type, got \"z\"")
    expect(sentence(named(60), { mode: "z" })).toBe(`\`mode\` must be ${"N".repeat(60)}, got "z"`)
  })

  it("names an optional field's own type", () => {
    expect(sentence(Schema.Struct({ timeout: Schema.optional(Schema.Number) }), { timeout: "1" })).toBe("`timeout` must be number, got \"1\"")
  })

  it("reads the expected type only from a message that starts with it, and only a leading bracket as an array", () => {
    const s = Schema.Struct({ n: Schema.Number.check(Schema.makeFilter(() => false, { message: "is not Expected x, actual y" })) })
    expect(sentence(s, { n: 1 })).toBe("`n` is not Expected x, actual y")
    const map = Schema.Struct({ m: Schema.Number.annotate({ identifier: "Map[string]" }) })
    expect(sentence(map, { m: "z" })).toBe("`m` must be Map[string], got \"z\"")
  })

  it("clips what was sent past 60 characters", () => {
    const s = Schema.Struct({ n: Schema.Number })
    expect(sentence(s, { n: "x".repeat(58) })).toBe(`\`n\` must be number, got "${"x".repeat(58)}"`)
    expect(sentence(s, { n: "x".repeat(59) })).toBe(`\`n\` must be number, got "${"x".repeat(59)}…`)
  })

  it("keeps a refinement's own message with the field's hint", () => {
    const s = Schema.Struct({ timeout: Schema.Number.check(Schema.isBetween({ minimum: 1, maximum: 3600 }, { message: "is out of range" })) })
    expect(sentence(s, { timeout: 9000 }, { timeout: "seconds, 1 to 3600" })).toBe("`timeout` is out of range: seconds, 1 to 3600")
  })
})

describe("progress", () => {
  it("reports elapsed seconds against the cell's budget with the latest line, clamped", () => {
    expect(progressNotification("t", 4_230, 30, "epoch 3")).toEqual({
      jsonrpc: "2.0",
      method: "notifications/progress",
      params: { progressToken: "t", progress: 4.2, total: 30, message: "epoch 3" }
    })
    expect(lastLine("a\nb\n\n")).toBe("b")
    expect(lastLine("\n \n")).toBeUndefined()
    expect(lastLine("x".repeat(1000))!.length).toBe(MAX_PROGRESS_MESSAGE_CHARS)
  })

  it("never configures an interval over the 5 s promise", () => {
    expect(progressIntervalMs(undefined)).toBe(4_000)
    expect(progressIntervalMs("60000")).toBe(5_000)
    expect(progressIntervalMs("250")).toBe(250)
    expect(progressIntervalMs("0")).toBe(100)
    expect(progressIntervalMs("soon")).toBe(4_000)
  })
})

describe("the HTTP door's checks", () => {
  it("allows no Origin or a loopback one, and the listening host's name, but not another site", () => {
    expect(originAllowed(undefined, "127.0.0.1")).toBe(true)
    expect(originAllowed("http://localhost:3000", "127.0.0.1")).toBe(true)
    expect(originAllowed("http://[::1]:8080", "127.0.0.1")).toBe(true)
    expect(originAllowed("https://agents.internal", "agents.internal")).toBe(true)
    expect(originAllowed("http://evil.example", "127.0.0.1")).toBe(false)
    expect(originAllowed("http://evil.example", "0.0.0.0")).toBe(false)
    expect(originAllowed("null", "127.0.0.1")).toBe(false)
  })

  it("accepts only the bearer token itself", () => {
    expect(bearerMatches("Bearer secret", "secret")).toBe(true)
    expect(bearerMatches("bearer secret", "secret")).toBe(true)
    expect(bearerMatches("Bearer secreT", "secret")).toBe(false)
    expect(bearerMatches("secret", "secret")).toBe(false)
    expect(bearerMatches(undefined, "secret")).toBe(false)
    expect(bearerMatches("Bearer ", "")).toBe(false)
  })
})

describe("artifact resources", () => {
  it("returns text with its MIME type and binary as a base64 blob", () => {
    expect(artifactMimeType("out-a-00000000.txt")).toBe("text/plain")
    expect(artifactMimeType("img-a-00000000.png")).toBe("image/png")
    expect(artifactMimeType("x-a-00000000.bin")).toBe("application/octet-stream")
    expect(isTextMimeType("application/jsonl")).toBe(true)
    expect(readContents("artifact://out-a-00000000.txt", "out-a-00000000.txt", new TextEncoder().encode("hi"))).toEqual({
      uri: "artifact://out-a-00000000.txt",
      mimeType: "text/plain",
      text: "hi"
    })
    expect(readContents("artifact://img-a-00000000.png", "img-a-00000000.png", new Uint8Array([1, 2, 3]))).toEqual({
      uri: "artifact://img-a-00000000.png",
      mimeType: "image/png",
      blob: "AQID"
    })
  })
})
