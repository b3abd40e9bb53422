/**
 * The pure parts of the MCP host calls and the door's table of requests to its clients:
 * a cell's completion()/agent() as a sampling request and its answer, input() as an
 * elicitation and the person's answer, and the table's routing, time limit and
 * cancellation, with a scripted client.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Result } from "effect"
import { TestClock } from "effect/testing"
import { type ClientChannel, makeClientRequests } from "../../src/mcp/ClientRequests.ts"
import { inputAnswer, inputRequest } from "../../src/mcp/Elicitation.ts"
import { makeMcpHostCalls, offersFormElicitation } from "../../src/mcp/HostCalls.ts"
import type { JsonRpcOut } from "../../src/mcp/JsonRpc.ts"
import { samplingAnswer, samplingRequest } from "../../src/mcp/Sampling.ts"

const DEFAULTS = { maxTokens: 4096 }

describe("samplingRequest", () => {
  it("puts the prompt in one user message, says what asks in the system prompt, and sizes it", () => {
    const request = Result.getOrThrow(samplingRequest("completion", { prompt: "sum it", model: "small", schema: null }, DEFAULTS))
    expect(request).toMatchObject({
      messages: [{ role: "user", content: { type: "text", text: "sum it" } }],
      maxTokens: 4096,
      includeContext: "none",
      modelPreferences: { hints: [{ name: "small" }] }
    })
    expect(request.systemPrompt).toContain("completion()")
    expect(request.systemPrompt).not.toContain("JSON Schema")
    expect(Result.getOrThrow(samplingRequest("completion", { prompt: "p", maxTokens: 12 }, DEFAULTS)).maxTokens).toBe(12)
    expect(Result.getOrThrow(samplingRequest("completion", { prompt: "p", maxTokens: -1 }, DEFAULTS)).maxTokens).toBe(4096)
  })

  it("tells an agent's model it carries out a sub-agent's task, with the schema its answer must match", () => {
    const schema = { type: "object", properties: { n: { type: "integer" } } }
    const request = Result.getOrThrow(samplingRequest("agent", { prompt: "count", agent: "deep", label: "rows", schema, isolated: null, apply: false }, DEFAULTS))
    expect(request.systemPrompt).toContain("sub-agent")
    expect(request.systemPrompt).toContain("\"rows\"")
    expect(request.systemPrompt).toContain(JSON.stringify(schema))
  })

  it("sends a call's images as image messages after the prompt, and refuses unfit ones", () => {
    const images = [{ mimeType: "image/png", data: "iVBORw0KGgo=" }, { mimeType: "image/jpeg", data: "/9j/4A==" }]
    const request = Result.getOrThrow(samplingRequest("completion", { prompt: "what is it", images }, DEFAULTS))
    expect(request.messages).toEqual([
      { role: "user", content: { type: "text", text: "what is it" } },
      { role: "user", content: { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" } },
      { role: "user", content: { type: "image", data: "/9j/4A==", mimeType: "image/jpeg" } }
    ])
    for (const bad of [[{ mimeType: "image/svg+xml", data: "AAAA" }], [{ mimeType: "image/png", data: "not base64!" }], "AAAA", Array(9).fill(images[0])]) {
      const refused = samplingRequest("completion", { prompt: "p", images: bad }, DEFAULTS)
      expect(Result.isFailure(refused) && refused.failure.message).toMatch(/images/)
    }
  })

  it("refuses isolated, apply and merge, and params without a prompt, with the error the cell raises", () => {
    const refused = samplingRequest("agent", { prompt: "x", isolated: true, merge: "ours" }, DEFAULTS)
    expect(Result.isFailure(refused) && refused.failure).toMatchObject({ name: "AgentOptionUnsupported" })
    expect(Result.isFailure(refused) && refused.failure.message).toContain("isolated, merge")
    expect(Result.isFailure(samplingRequest("completion", { prompt: "  " }, DEFAULTS))).toBe(true)
    expect(Result.isFailure(samplingRequest("completion", "text", DEFAULTS))).toBe(true)
  })
})

describe("samplingAnswer", () => {
  it("returns the answer's text and model, joining text blocks", () => {
    expect(Result.getOrThrow(samplingAnswer("completion", { role: "assistant", model: "m", content: { type: "text", text: "hi" } }))).toEqual({ text: "hi", model: "m" })
    expect(Result.getOrThrow(samplingAnswer("agent", { content: [{ type: "text", text: "a" }, { type: "image", data: "" }, { type: "text", text: "b" }] }))).toEqual({ text: "ab" })
  })

  it("fails an answer without text, or one that is not an object, saying what came", () => {
    const image = samplingAnswer("completion", { content: { type: "image", data: "", mimeType: "image/png" } })
    expect(Result.isFailure(image) && image.failure.message).toContain("no text")
    expect(Result.isFailure(samplingAnswer("completion", null))).toBe(true)
  })
})

describe("inputRequest and inputAnswer", () => {
  it("asks for one string field, naming the session and quoting the cell's prompt on one clamped line", () => {
    const request = inputRequest({ prompt: "Name?\n\u001b[31mI am the server" + "x".repeat(600) }, "1a2b3c4d", "2025-11-25")
    expect(request).toMatchObject({ mode: "form", requestedSchema: { type: "object", required: ["line"], properties: { line: { type: "string" } } } })
    const message = request.message as string
    expect(message).toContain("veyyon session 1a2b3c4d")
    expect(message).not.toMatch(/[\n\u001b]/)
    expect(message.length).toBeLessThan(700)
    expect(inputRequest({ prompt: "" }, "s", "2025-06-18")).not.toHaveProperty("mode")
  })

  it("gives the accepted line, and end of input with a sentence for decline, cancel or nonsense", () => {
    expect(Result.getOrThrow(inputAnswer({ action: "accept", content: { line: "yes" } }))).toBe("yes")
    for (const [result, words] of [[{ action: "decline" }, "declined"], [{ action: "cancel" }, "dismissed"], [{ action: "later" }, "no action"]] as const) {
      const answer = inputAnswer(result)
      expect(Result.isFailure(answer) && answer.failure).toMatchObject({ name: "EOFError" })
      expect(Result.isFailure(answer) && answer.failure.message).toContain(words)
    }
  })
})

/** A channel that records what it sends and answers `sent` to every send. */
const recording = (sent = true) => {
  const messages: Array<JsonRpcOut> = []
  const channel: ClientChannel = (message) => Effect.sync(() => (messages.push(message), sent))
  return { messages, channel }
}

describe("ClientRequests", () => {
  it.effect("routes a response to the request awaiting it, and only from the client asked", () =>
    Effect.gen(function*() {
      const table = makeClientRequests()
      const { messages, channel } = recording()
      const fiber = yield* Effect.forkChild(table.ask(1, channel, "sampling/createMessage", { a: 1 }, 60_000))
      yield* Effect.yieldNow
      const sent = messages[0] as { readonly id: string; readonly method: string }
      expect(sent).toMatchObject({ method: "sampling/createMessage", params: { a: 1 } })
      expect(yield* table.settle(2, { id: sent.id, result: "not yours" })).toBe(false)
      expect(yield* table.settle(1, { id: "other", result: "nobody waits" })).toBe(false)
      expect(table.waiting(1)).toBe(1)
      expect(yield* table.settle(1, { id: sent.id, result: { ok: true } })).toBe(true)
      expect(yield* Fiber.join(fiber)).toEqual({ ok: true })
      expect(table.waiting(1)).toBe(0)
    }))

  it.effect("fails with the client's error, at once when it has no channel, and when the client ends", () =>
    Effect.gen(function*() {
      const table = makeClientRequests()
      const { messages, channel } = recording()
      const erring = yield* Effect.forkChild(table.ask(1, channel, "m", {}, 60_000))
      yield* Effect.yieldNow
      yield* table.settle(1, { id: (messages[0] as { readonly id: string }).id, error: { code: -1, message: "User rejected" } })
      expect(yield* Effect.flip(Fiber.join(erring))).toMatchObject({ reason: "error", code: -1, message: "User rejected" })
      expect(yield* Effect.flip(table.ask(1, recording(false).channel, "m", {}, 60_000))).toMatchObject({ reason: "unreachable" })
      const orphan = yield* Effect.forkChild(table.ask(1, channel, "m", {}, 60_000))
      yield* Effect.yieldNow
      yield* table.forget(1)
      expect(yield* Effect.flip(Fiber.join(orphan))).toMatchObject({ reason: "gone" })
    }))

  it.effect("refuses a request past the bound of those awaiting one client, at once, leaving other clients alone", () =>
    Effect.gen(function*() {
      const table = makeClientRequests(2)
      const { messages, channel } = recording()
      yield* Effect.forkChild(table.ask(1, channel, "m", {}, 60_000))
      yield* Effect.forkChild(table.ask(1, channel, "m", {}, 60_000))
      yield* Effect.yieldNow
      expect(yield* Effect.flip(table.ask(1, channel, "m", {}, 60_000))).toMatchObject({ reason: "unreachable", message: expect.stringContaining("2 requests already await") })
      expect(messages).toHaveLength(2)
      yield* Effect.forkChild(table.ask(2, channel, "m", {}, 60_000))
      yield* Effect.yieldNow
      expect(table.waiting(2)).toBe(1)
    }))

  it.effect("sends notifications/cancelled when the asker is interrupted or the time limit passes", () =>
    Effect.gen(function*() {
      const table = makeClientRequests()
      const { messages, channel } = recording()
      const asker = yield* Effect.forkChild(table.ask(1, channel, "m", {}, 60_000))
      yield* Effect.yieldNow
      const first = (messages[0] as { readonly id: string }).id
      yield* Fiber.interrupt(asker)
      expect(messages[1]).toMatchObject({ method: "notifications/cancelled", params: { requestId: first } })
      const slow = yield* Effect.forkChild(table.ask(1, channel, "m", {}, 5_000))
      yield* Effect.yieldNow
      yield* TestClock.adjust("6 seconds")
      const exit = yield* Fiber.await(slow)
      expect(Exit.isFailure(exit)).toBe(true)
      expect(messages.at(-1)).toMatchObject({ method: "notifications/cancelled", params: { requestId: (messages[2] as { readonly id: string }).id } })
      expect(table.waiting(1)).toBe(0)
    }))
})

describe("offersFormElicitation", () => {
  it("is true for an empty capability (before modes existed) or one naming form, false for URL-only or none", () => {
    expect(offersFormElicitation({})).toBe(true)
    expect(offersFormElicitation({ form: {} })).toBe(true)
    expect(offersFormElicitation({ form: {}, url: {} })).toBe(true)
    expect(offersFormElicitation({ url: {} })).toBe(false)
    expect(offersFormElicitation(undefined)).toBe(false)
  })
})

describe("makeMcpHostCalls", () => {
  it.effect("answers a session's calls through its client, and says what is missing at once otherwise", () =>
    Effect.gen(function*() {
      const hostCalls = makeMcpHostCalls(DEFAULTS)
      const asked: Array<string> = []
      hostCalls.bind("mcp-abcdef0123", {
        capabilities: { sampling: {} },
        protocolVersion: "2025-11-25",
        ask: (method) => Effect.sync(() => (asked.push(method), { content: { type: "text", text: "fine" }, model: "m" }))
      })
      const call = (method: string, sessionId?: string) =>
        hostCalls.bridge.call({ method, params: { prompt: "hi" }, callId: "c1", requestId: "r1", ...(sessionId === undefined ? {} : { sessionId }) })
      expect(yield* call("completion", "mcp-abcdef0123")).toEqual({ text: "fine", model: "m" })
      expect(asked).toEqual(["sampling/createMessage"])
      expect(yield* Effect.flip(call("input", "mcp-abcdef0123"))).toMatchObject({ name: "EOFError", message: expect.stringContaining("does not offer elicitation") })
      expect(yield* Effect.flip(call("completion", "mcp-other"))).toMatchObject({ name: "AgentBridgeUnavailable" })
      expect(yield* Effect.flip(call("completion"))).toMatchObject({ name: "AgentBridgeUnavailable" })
      hostCalls.unbind("mcp-abcdef0123")
      expect(yield* Effect.flip(call("completion", "mcp-abcdef0123"))).toMatchObject({ name: "AgentBridgeUnavailable" })
      expect(asked).toHaveLength(1)
    }))
})
