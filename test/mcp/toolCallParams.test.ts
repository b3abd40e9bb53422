/**
 * The door's check of `tools/call` params: those that fit `McpSchema.CallTool` reach the
 * method unchanged, and each way of not fitting it gets -32602 with the sentence naming
 * the field, whether or not the door checks the common shape without the schema.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { type JsonRpcOut, parseFrame } from "../../src/mcp/JsonRpc.ts"
import { makeMcpDoor, writerReply } from "../../src/mcp/McpDoor.ts"

const answerTo = (params: unknown) =>
  Effect.gen(function*() {
    const written: Array<Record<string, unknown>> = []
    const door = yield* makeMcpDoor({
      methods: { "tools/call": (_clientId, given) => Effect.succeed({ given }) }
    })
    const reply = writerReply((message: JsonRpcOut) => Effect.sync(() => void written.push(message as Record<string, unknown>)))
    yield* door.receive(1, parseFrame(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params })), reply)
    for (;;) {
      if (written.length > 0) return written[0]!
      yield* Effect.yieldNow
    }
  })

describe("tools/call params", () => {
  it.live("that fit reach the method as sent", () =>
    Effect.gen(function*() {
      for (
        const params of [
          { name: "eval" },
          { name: "eval", arguments: { language: "py", code: "1" } },
          { name: "eval", arguments: {}, _meta: { progressToken: "p" } },
          { name: "eval", arguments: {}, _meta: { progressToken: 7, other: { x: 1 } } },
          { name: "eval", _meta: {} }
        ]
      ) {
        expect(yield* answerTo(params)).toEqual({ jsonrpc: "2.0", id: 1, result: { given: params } })
      }
    }))

  it.live("that do not fit get -32602 naming the field", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [unknown, string]> = [
        [{ arguments: {} }, "name"],
        [{ name: 3 }, "name"],
        [{ name: "eval", arguments: [1] }, "arguments"],
        [{ name: "eval", arguments: null }, "arguments"],
        [{ name: "eval", arguments: "code" }, "arguments"],
        [{ name: "eval", _meta: { progressToken: {} } }, "progressToken"],
        [{ name: "eval", _meta: { progressToken: null } }, "progressToken"],
        [{ name: "eval", _meta: [1] }, "_meta"],
        [{ name: "eval", _meta: null }, "_meta"],
        [{ name: "eval", extra: 1 }, "extra"]
      ]
      for (const [params, field] of cases) {
        const answer = (yield* answerTo(params)) as { readonly error?: { readonly code: number; readonly message: string } }
        expect(answer.error?.code, JSON.stringify(params)).toBe(-32602)
        expect(answer.error?.message, JSON.stringify(params)).toContain(field)
      }
    }))
})
