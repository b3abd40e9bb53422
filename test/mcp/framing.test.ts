/**
 * The pure parts of the MCP doors: JSON-RPC frames, the params sentence, progress,
 * Origin and token checks, artifact MIME types.
 */
import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { artifactMimeType, isTextMimeType, readContents } from "../../src/mcp/ArtifactResources.ts"
import { bearerMatches, originAllowed } from "../../src/mcp/HttpDoor.ts"
import { parseFrame, progressTokenOf, tooLargeReply } from "../../src/mcp/JsonRpc.ts"
import { lastLine, MAX_PROGRESS_MESSAGE_CHARS, progressIntervalMs, progressNotification } from "../../src/mcp/Progress.ts"
import { paramsProblem } from "../../src/services/ParamsProblem.ts"

describe("parseFrame", () => {
  it("classifies requests, notifications and responses, keeping the id as sent", () => {
    expect(parseFrame(`{"jsonrpc":"2.0","id":"a","method":"ping"}`)).toEqual({ _tag: "Request", id: "a", method: "ping", params: undefined })
    expect(parseFrame(`{"jsonrpc":"2.0","id":0,"method":"ping","params":{}}`)).toMatchObject({ _tag: "Request", id: 0 })
    expect(parseFrame(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)).toMatchObject({ _tag: "Notification" })
    expect(parseFrame(`{"jsonrpc":"2.0","id":1,"result":{}}`)).toEqual({ _tag: "Response" })
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
  const schema = Schema.Struct({ name: Schema.String, arguments: Schema.Record({ key: Schema.String, value: Schema.Unknown }) })
  const problem = (value: unknown) =>
    Either.match(Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })(value), {
      onLeft: (error) => paramsProblem(error, "tools/call", { name: "pass the tool's name", arguments: "pass an object" }),
      onRight: () => "fits"
    })

  it("names the field and the fix in one sentence, never the TypeScript type", () => {
    expect(problem({ arguments: {} })).toBe("`name` is missing: pass the tool's name")
    expect(problem({ name: 1, arguments: {} })).toBe("`name` must be string, got 1: pass the tool's name")
    expect(problem({ name: "x", arguments: {}, extra: 1 })).toBe("`extra` is not a parameter of tools/call; the parameters are name, arguments")
    expect(problem(5)).toBe("the tools/call params must be an object, got 5")
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
