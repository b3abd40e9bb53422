/**
 * The framing layer of the MCP doors (stdio, HTTP): JSON-RPC parsed here, so the server's
 * guarantees hold whatever the library does: malformed JSON gets -32700 with `id: null`,
 * an unknown method -32601 with the request's own id, params that do not fit the
 * method's schema (`effect/ai`'s `McpSchema`) -32602 with one sentence, and the door
 * keeps serving after each. Request ids go back exactly as the client sent them
 * (strings included).
 *
 * Every request runs on its own fiber and carries a `Reply`: where its progress
 * notifications and its one answer go (stdout on stdio, the POST's response over HTTP).
 * Handlers see the call as the `McpCall` service, so a tool can send progress for its
 * own request; `notifications/cancelled` interrupts the request, which then gets no answer.
 * The server asks its clients through `ask` (`ClientRequests`): a client's responses are
 * routed back to the request awaiting them.
 */
import { Cause, Context, Data, Effect, Exit, FiberMap, Schema } from "effect"
import { McpSchema } from "effect/ai"
import { type FieldHints, PARAMS_PARSE_OPTIONS, paramsProblem } from "../services/tool/ParamsProblem.ts"
import { type ClientChannel, type ClientRequestFailed, makeClientRequests } from "./ClientRequests.ts"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { ClientTasksCapability, makeTaskTable, type TaskFailure, type TaskOptions, TaskParams } from "./Tasks.ts"
import { ErrorCode, errorReply, type Frame, type JsonRpcId, type JsonRpcOut, progressTokenOf, resultReply } from "./JsonRpc.ts"
import { lastLine } from "./Progress.ts"

/** Where the messages about one request go. */
export interface Reply {
  /** A message before the answer (a progress notification). */
  readonly send: (message: JsonRpcOut) => Effect.Effect<void>
  /** The answer, or nothing (a cancelled request gets none); nothing is sent after it. */
  readonly end: (message?: JsonRpcOut) => Effect.Effect<void>
}

/** The request a handler is answering, as the door knows it. */
export interface McpCallInfo {
  readonly clientId: number
  readonly method: string
  /** The request's `_meta.progressToken`, when it asked for progress. */
  readonly progressToken?: JsonRpcId
  /** Sends a notification about this request to its client. */
  readonly notify: (message: JsonRpcOut) => Effect.Effect<void>
  /** Sees the call's output as it comes (a task's status shows its latest line). */
  readonly observe?: (output: KernelOutput) => void
}

/** The call being handled; present in every request handler the door starts. */
export class McpCall extends Context.Service<McpCall, McpCallInfo>()("veyyon-eval/McpCall") {}

/** A JSON-RPC error a door method answers with. */
export class McpFailure extends Data.TaggedError("McpFailure")<{ readonly code: number; readonly message: string }> {}

/** A method the door answers for a client, given the request's params (decoded by the method's `McpSchema` payload schema when it has one). */
export type Method = (clientId: number, params: Record<string, unknown>) => Effect.Effect<unknown, McpFailure, McpCall>

/** How a door is built. */
export interface DoorOptions {
  /** The requests the server answers, by method. */
  readonly methods: Readonly<Record<string, Method>>
  /** Called for every notification a client sends but `notifications/cancelled`. */
  readonly onNotification?: (clientId: number, method: string, params: unknown) => Effect.Effect<void>
  /** The methods a client may run as a task (a `task` param), and how tasks are kept; none without it. */
  readonly tasks?: {
    readonly methods: ReadonlySet<string>
    readonly options?: TaskOptions
    /** Whether a task's result counts as failed (a tool result with `isError`). */
    readonly isFailure?: (result: unknown) => boolean
  }
}

/** The door: the entry points for a transport. */
export interface McpDoor {
  /** Registers a client; `channel` carries the server's requests to it, when the transport has one. */
  readonly connect: (clientId: number, channel?: ClientChannel) => Effect.Effect<void>
  /** Sends a request to a client and waits up to `timeoutMs` for its result. */
  readonly ask: (clientId: number, method: string, params: unknown, timeoutMs: number) => Effect.Effect<unknown, ClientRequestFailed>
  /** Handles one frame from a client. Returns once it is dispatched, not answered. */
  readonly receive: (clientId: number, frame: Frame, reply: Reply) => Effect.Effect<void>
  /** Ends a client: its calls are interrupted and their replies ended without an answer. */
  readonly disconnect: (clientId: number) => Effect.Effect<void>
  /** How many of a client's requests await their answer, and of its tasks run or hold an unfetched result. */
  readonly inFlight: (clientId: number) => number
}

interface Pending {
  readonly id: JsonRpcId
  readonly reply: Reply
  cancelled: boolean
}

const PARAM_HINTS: FieldHints = {
  name: "pass the tool's name as a string, e.g. \"eval\"",
  arguments: "pass the tool's arguments as an object",
  uri: "pass the URI as a string, e.g. an artifact:// URI a result named",
  protocolVersion: "pass the protocol version as a string, e.g. \"2025-06-18\"",
  capabilities: "pass the client's capabilities as an object",
  clientInfo: "pass { name, version } strings",
  cursor: "pass the cursor string from the previous page, or leave it out",
  _meta: "pass an object, e.g. { \"progressToken\": 1 }"
}

const defectText = (defect: unknown): string => {
  if (typeof defect === "string") return defect.split("\n")[0]!
  if (typeof defect === "object" && defect !== null && "message" in defect) return String(defect.message).split("\n")[0]!
  return "an unexpected failure"
}

/** The problem with `value` by `schema`, or undefined when it fits. */
const problemOf = (schema: Schema.Codec<unknown, unknown>, value: unknown, method: string): string | undefined => {
  const decoded = Schema.decodeUnknownExit(schema)(value, PARAMS_PARSE_OPTIONS)
  if (Exit.isSuccess(decoded)) return undefined
  const error = Cause.findErrorOption(decoded.cause)
  return error._tag === "Some" ? paramsProblem(error.value, method, PARAM_HINTS) : "the params could not be read"
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value)

const isProgressToken = (value: unknown) => typeof value === "string" || (typeof value === "number" && Number.isFinite(value))

/**
 * Whether `tools/call` params plainly fit `McpSchema.CallTool`'s payload: a string `name`,
 * `arguments` an object or absent, `_meta` an object whose `progressToken` is a string, a
 * finite number or absent, and nothing else. The commonest call is checked without the schema;
 * anything else still goes through it (and its sentence).
 */
const plainToolCall = (params: Record<string, unknown>): boolean => {
  for (const key in params) {
    if (key !== "name" && key !== "arguments" && key !== "_meta") return false
  }
  if (typeof params.name !== "string") return false
  if (params.arguments !== undefined && !isRecord(params.arguments)) return false
  const meta = params._meta
  if (meta === undefined) return "_meta" in params ? false : true
  return isRecord(meta) && (meta.progressToken === undefined ? !("progressToken" in meta) : isProgressToken(meta.progressToken))
}

/** The problem with `params` for `method` by its `McpSchema` payload schema, or undefined when they fit (or it has none). */
const paramsProblemOf = (method: string, params: Record<string, unknown>): string | undefined => {
  if (method === "tools/call" && plainToolCall(params)) return undefined
  const rpc = McpSchema.ClientRequestRpcs.requests.get(method)
  return rpc === undefined ? undefined : problemOf(rpc.payloadSchema as Schema.Codec<unknown, unknown>, params, method)
}

/**
 * `params` without the 2025-11-25 fields effect's McpSchema lacks (a request's `task`,
 * `initialize`'s `capabilities.tasks`), each checked by its own schema: the rest, the
 * task asked for, or the problem with them.
 */
const withoutExtensions = (method: string, params: Record<string, unknown>, taskMethods: ReadonlySet<string>):
  | { readonly params: Record<string, unknown>; readonly task?: { readonly ttl?: number } }
  | { readonly problem: string } =>
{
  if (method === "initialize" && isRecord(params.capabilities) && "tasks" in params.capabilities) {
    const { tasks, ...capabilities } = params.capabilities
    const problem = problemOf(ClientTasksCapability as Schema.Codec<unknown, unknown>, tasks, method)
    return problem === undefined ? { params: { ...params, capabilities } } : { problem: `capabilities.tasks: ${problem}` }
  }
  if (!("task" in params)) return { params }
  if (!taskMethods.has(method)) return { problem: `${method} cannot run as a task; send it without "task"` }
  const { task, ...rest } = params
  const problem = problemOf(TaskParams as Schema.Codec<unknown, unknown>, task, method)
  return problem === undefined ? { params: rest, task: task as { readonly ttl?: number } } : { problem: `task: ${problem}` }
}

/** The JSON-RPC answer for a finished request, or undefined when it was interrupted. */
export const exitReply = (id: JsonRpcId, exit: Exit.Exit<unknown, McpFailure>): JsonRpcOut | undefined => {
  if (Exit.isSuccess(exit)) return resultReply(id, exit.value)
  const failure = Cause.findErrorOption(exit.cause)
  if (failure._tag === "Some") return errorReply(id, failure.value.code, failure.value.message)
  if (Cause.hasInterruptsOnly(exit.cause)) return undefined
  return errorReply(id, ErrorCode.InternalError, `Internal error: ${defectText(Cause.squash(exit.cause))}.`)
}

const asFailure = (failure: TaskFailure) => new McpFailure({ code: failure.code, message: failure.message })

/** Builds a door; its requests' and tasks' fibers live in the current scope. */
export const makeMcpDoor = (options: DoorOptions) =>
  Effect.gen(function*() {
    const fibers = yield* FiberMap.make<string>()
    const pending = new Map<string, Pending>()
    const tasks = yield* makeTaskTable(options.tasks?.options)
    const taskMethods = options.tasks?.methods ?? new Set<string>()
    const isTaskFailure = options.tasks?.isFailure ?? (() => false)
    const channels = new Map<number, ClientChannel>()
    const asked = makeClientRequests()
    const noChannel: ClientChannel = () => Effect.succeed(false)

    const idKey = (clientId: number, id: JsonRpcId) => `${clientId}/${typeof id}:${id}`

    const settle = (key: string): Pending | undefined => {
      const entry = pending.get(key)
      pending.delete(key)
      return entry
    }

    const finish = (key: string, exit: Exit.Exit<unknown, McpFailure>) =>
      Effect.suspend(() => {
        const entry = settle(key)
        if (entry === undefined) return Effect.void
        if (entry.cancelled) return entry.reply.end()
        return entry.reply.end(
          exitReply(entry.id, exit) ??
            errorReply(entry.id, ErrorCode.InternalError, "The request was interrupted: its session ended or the server is stopping.")
        )
      })

    const taskRequests: Readonly<Record<string, Method>> = options.tasks === undefined ? {} : {
      "tasks/get": (clientId, params) => Effect.mapError(tasks.get(clientId, params.taskId), asFailure),
      "tasks/result": (clientId, params) => Effect.mapError(tasks.result(clientId, params.taskId), asFailure),
      "tasks/cancel": (clientId, params) => Effect.mapError(tasks.cancel(clientId, params.taskId), asFailure),
      "tasks/list": (clientId) => Effect.map(tasks.list(clientId), (list) => ({ tasks: list }))
    }
    const methods = { ...options.methods, ...taskRequests }
    const known = Object.keys(methods)

    /** Starts a request with a `task` param as a task and answers with it at once. */
    const startTask = (clientId: number, frame: Frame & { readonly _tag: "Request" }, method: Method, params: Record<string, unknown>, ttl: number | undefined, reply: Reply) =>
      Effect.gen(function*() {
        let latest: string | undefined
        const call: McpCallInfo = {
          clientId,
          method: frame.method,
          notify: () => Effect.void,
          observe: (output) => {
            if (output._tag === "Stdout" || output._tag === "Stderr") latest = lastLine(output.text) ?? latest
          }
        }
        const run = Effect.mapError(Effect.provideService(method(clientId, params), McpCall, call), (failure): TaskFailure => ({ code: failure.code, message: failure.message }))
        const started = yield* Effect.result(tasks.start(clientId, run, ttl, () => latest, isTaskFailure))
        return yield* reply.end(
          started._tag === "Success" ? resultReply(frame.id, { task: started.success }) : errorReply(frame.id, started.failure.code, started.failure.message)
        )
      })

    const request = (clientId: number, frame: Frame & { readonly _tag: "Request" }, reply: Reply) =>
      Effect.suspend(() => {
        const given = (frame.params ?? {}) as Record<string, unknown>
        const method = methods[frame.method]
        if (method === undefined) {
          return reply.end(errorReply(frame.id, ErrorCode.MethodNotFound, `Method not found: ${frame.method}. This server answers ${known.join(", ")}.`))
        }
        const split = withoutExtensions(frame.method, given, taskMethods)
        const problem = "problem" in split ? split.problem : paramsProblemOf(frame.method, split.params)
        if (problem !== undefined || "problem" in split) return reply.end(errorReply(frame.id, ErrorCode.InvalidParams, `Invalid params: ${problem}.`))
        const params = frame.method === "initialize" ? given : split.params
        if (split.task !== undefined) return startTask(clientId, frame, method, split.params, split.task.ttl, reply)
        const key = idKey(clientId, frame.id)
        if (pending.has(key)) {
          return reply.end(errorReply(frame.id, ErrorCode.InvalidRequest, `Request id ${JSON.stringify(frame.id)} is already in use by a request still running; use a new id.`))
        }
        pending.set(key, { id: frame.id, reply, cancelled: false })
        const progressToken = progressTokenOf(params)
        const call: McpCallInfo = {
          clientId,
          method: frame.method,
          ...(progressToken === undefined ? {} : { progressToken }),
          notify: reply.send
        }
        const run = method(clientId, params).pipe(
          Effect.provideService(McpCall, call),
          Effect.onExit((exit) => finish(key, exit))
        )
        return Effect.asVoid(FiberMap.run(fibers, key, run))
      })

    const cancel = (clientId: number, params: unknown) =>
      Effect.suspend(() => {
        const target = (params as { readonly requestId?: unknown } | undefined)?.requestId
        if (typeof target !== "string" && typeof target !== "number") return Effect.void
        const key = idKey(clientId, target)
        const entry = pending.get(key)
        if (entry === undefined) return Effect.void
        entry.cancelled = true
        return FiberMap.remove(fibers, key)
      })

    const receive = (clientId: number, frame: Frame, reply: Reply): Effect.Effect<void> => {
      switch (frame._tag) {
        case "Request":
          return request(clientId, frame, reply)
        case "Notification":
          return frame.method === "notifications/cancelled"
            ? Effect.andThen(cancel(clientId, frame.params), reply.end())
            : Effect.andThen(options.onNotification?.(clientId, frame.method, frame.params) ?? Effect.void, reply.end())
        case "Response":
          return Effect.andThen(asked.settle(clientId, frame), reply.end())
        case "Invalid":
          return reply.end(frame.reply)
      }
    }

    const disconnect = (clientId: number) =>
      Effect.gen(function*() {
        channels.delete(clientId)
        yield* asked.forget(clientId)
        yield* tasks.forget(clientId)
        const prefix = `${clientId}/`
        for (const key of [...pending.keys()]) {
          if (!key.startsWith(prefix)) continue
          const entry = settle(key)
          yield* FiberMap.remove(fibers, key)
          if (entry !== undefined) yield* entry.reply.end()
        }
      })

    const door: McpDoor = {
      connect: (clientId, channel) => Effect.sync(() => void channels.set(clientId, channel ?? noChannel)),
      ask: (clientId, method, params, timeoutMs) => asked.ask(clientId, channels.get(clientId) ?? noChannel, method, params, timeoutMs),
      receive,
      disconnect,
      inFlight: (clientId) => {
        let count = tasks.holding(clientId)
        for (const key of pending.keys()) if (key.startsWith(`${clientId}/`)) count++
        return count
      }
    }
    return door
  })

/** A `Reply` that writes every message with `write` (stdio: one line each). */
export const writerReply = (write: (message: JsonRpcOut) => Effect.Effect<void>): Reply => ({
  send: write,
  end: (message) => (message === undefined ? Effect.void : write(message))
})
