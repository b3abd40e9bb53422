/**
 * The task table and the door's task requests, with scripted work: a task answers at
 * once and runs apart; get, result, cancel and list keep to the client that started it;
 * finished tasks are dropped past their time to live and past the bound, oldest first;
 * a task not fetched holds its session; the 2025-11-25 fields effect's McpSchema lacks
 * are checked by their own schemas, never let through unchecked.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect } from "effect"
import { type JsonRpcOut, parseFrame } from "../../src/mcp/JsonRpc.ts"
import { makeMcpDoor, writerReply } from "../../src/mcp/McpDoor.ts"
import { DEFAULT_TASK_OPTIONS, makeTaskTable, RELATED_TASK_META_KEY } from "../../src/mcp/Tasks.ts"

const never = () => false

describe("TaskTable", () => {
  it.effect("runs a task apart, gives its result to its own client only, and reports it done", () =>
    Effect.gen(function*() {
      const table = yield* makeTaskTable()
      const gate = yield* Deferred.make<void>()
      const task = yield* table.start(1, Effect.as(Deferred.await(gate), { content: [], isError: false }), undefined, () => "line 3", never)
      expect(task).toMatchObject({ status: "working", ttl: DEFAULT_TASK_OPTIONS.defaultTtlMs, pollInterval: DEFAULT_TASK_OPTIONS.pollIntervalMs })
      expect(task.taskId).toMatch(/^[0-9a-f]{32}$/)
      expect(yield* table.get(1, task.taskId)).toMatchObject({ status: "working", statusMessage: "line 3" })
      expect(yield* Effect.flip(table.get(2, task.taskId))).toMatchObject({ code: -32602 })
      expect(yield* Effect.flip(table.get(1, 42))).toMatchObject({ code: -32602 })
      expect(table.holding(1)).toBe(1)
      yield* Deferred.succeed(gate, undefined)
      const result = yield* table.result(1, task.taskId)
      expect(result).toEqual({ content: [], isError: false, _meta: { [RELATED_TASK_META_KEY]: { taskId: task.taskId } } })
      const done = yield* table.get(1, task.taskId)
      expect(done.status).toBe("completed")
      expect(done).not.toHaveProperty("statusMessage")
      expect(table.holding(1)).toBe(0)
      expect((yield* table.list(1)).map((entry) => entry.taskId)).toEqual([task.taskId])
      expect(yield* table.list(2)).toEqual([])
    }))

  it.effect("marks a failed result or a failure failed, and answers the failure's error from tasks/result", () =>
    Effect.gen(function*() {
      const table = yield* makeTaskTable()
      const isError = (result: unknown) => (result as { readonly isError: boolean }).isError
      const failed = yield* table.start(1, Effect.succeed({ isError: true }), undefined, () => undefined, isError)
      expect(yield* table.result(1, failed.taskId)).toMatchObject({ isError: true })
      expect((yield* table.get(1, failed.taskId)).status).toBe("failed")
      const broken = yield* table.start(1, Effect.fail({ code: -32603, message: "boom" }), undefined, () => undefined, never)
      expect(yield* Effect.flip(table.result(1, broken.taskId))).toEqual({ code: -32603, message: "boom" })
      expect((yield* table.get(1, broken.taskId)).status).toBe("failed")
    }))

  it.effect("cancels a running task by interrupting it, and refuses to cancel one that ended", () =>
    Effect.gen(function*() {
      const table = yield* makeTaskTable()
      const interrupted = yield* Deferred.make<void>()
      const task = yield* table.start(1, Effect.onInterrupt(Effect.never, () => Deferred.succeed(interrupted, undefined)), undefined, () => undefined, never)
      expect(yield* table.cancel(1, task.taskId)).toMatchObject({ status: "cancelled" })
      yield* Deferred.await(interrupted)
      expect(yield* Effect.flip(table.cancel(1, task.taskId))).toMatchObject({ code: -32602, message: expect.stringContaining("already ended") })
      expect(yield* Effect.flip(table.result(1, task.taskId))).toMatchObject({ message: expect.stringContaining("cancelled") })
    }))

  it.effect("drops finished tasks past their time to live and past the bound, oldest first; bounds running ones", () =>
    Effect.gen(function*() {
      let clock = 1_000_000
      const table = yield* makeTaskTable({ ...DEFAULT_TASK_OPTIONS, maxFinished: 2, maxRunning: 1 }, () => clock)
      const ids: Array<string> = []
      for (let i = 0; i < 3; i++) {
        const task = yield* table.start(1, Effect.succeed({}), 5_000, () => undefined, never)
        yield* table.result(1, task.taskId)
        ids.push(task.taskId)
        clock += 10
      }
      expect((yield* table.list(1)).map((task) => task.taskId)).toEqual(ids.slice(1))
      clock += 6_000
      expect(yield* table.list(1)).toEqual([])
      yield* table.start(1, Effect.never, undefined, () => undefined, never)
      expect(yield* Effect.flip(table.start(1, Effect.never, undefined, () => undefined, never))).toMatchObject({ code: -32600 })
      yield* table.forget(1)
      expect(yield* table.list(1)).toEqual([])
    }))
})

/** A door with one scripted tool method, and what it wrote. */
const scriptedDoor = Effect.gen(function*() {
  const written: Array<Record<string, unknown>> = []
  const door = yield* makeMcpDoor({
    methods: {
      initialize: () => Effect.succeed({ ok: true }),
      "tools/call": (_clientId, params) => Effect.succeed({ content: [{ type: "text", text: JSON.stringify(params) }], isError: false })
    },
    tasks: { methods: new Set(["tools/call"]) }
  })
  const reply = writerReply((message: JsonRpcOut) => Effect.sync(() => void written.push(message as Record<string, unknown>)))
  const send = (message: unknown) => door.receive(1, parseFrame(JSON.stringify(message)), reply)
  const answer = (id: number) =>
    Effect.gen(function*() {
      for (;;) {
        const found = written.find((message) => message.id === id)
        if (found !== undefined) return found
        yield* Effect.sleep("10 millis")
      }
    })
  return { door, send, answer }
})

describe("the door's task requests", () => {
  it.live("accepts initialize's capabilities.tasks and a task param by their own schemas, and refuses what does not fit", () =>
    Effect.gen(function*() {
      const { send, answer } = yield* scriptedDoor
      const capabilities = { tasks: { list: {}, cancel: {}, requests: { sampling: { createMessage: {} } } } }
      yield* send({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities, clientInfo: { name: "t", version: "0" } } })
      expect(yield* answer(1)).toMatchObject({ result: { ok: true } })
      yield* send({ jsonrpc: "2.0", id: 2, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: { tasks: { anything: true } }, clientInfo: { name: "t", version: "0" } } })
      expect(yield* answer(2)).toMatchObject({ error: { code: -32602, message: expect.stringContaining("capabilities.tasks") } })
      yield* send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "eval", arguments: {}, task: { ttl: "soon" } } })
      expect(yield* answer(3)).toMatchObject({ error: { code: -32602, message: expect.stringContaining("task") } })
      yield* send({ jsonrpc: "2.0", id: 4, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "0" }, task: {} } })
      expect(yield* answer(4)).toMatchObject({ error: { code: -32602, message: expect.stringContaining("cannot run as a task") } })
    }))

  it.live("answers a tools/call with a task at once, its result by tasks/result without the task param, and counts it in flight until fetched", () =>
    Effect.gen(function*() {
      const { door, send, answer } = yield* scriptedDoor
      yield* send({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "eval", arguments: { code: "1" }, task: { ttl: 60_000 } } })
      const created = (yield* answer(1)) as { readonly result: { readonly task: { readonly taskId: string; readonly ttl: number } } }
      expect(created.result.task.ttl).toBe(60_000)
      const taskId = created.result.task.taskId
      yield* send({ jsonrpc: "2.0", id: 2, method: "tasks/result", params: { taskId } })
      const result = (yield* answer(2)) as { readonly result: { readonly content: ReadonlyArray<{ readonly text: string }> } }
      expect(JSON.parse(result.result.content[0]!.text)).toEqual({ name: "eval", arguments: { code: "1" } })
      expect(door.inFlight(1)).toBe(0)
      yield* send({ jsonrpc: "2.0", id: 3, method: "tasks/list", params: {} })
      expect(yield* answer(3)).toMatchObject({ result: { tasks: [{ taskId, status: "completed" }] } })
      yield* send({ jsonrpc: "2.0", id: 4, method: "tasks/get", params: { taskId: "0".repeat(32) } })
      expect(yield* answer(4)).toMatchObject({ error: { code: -32602 } })
    }))
})
