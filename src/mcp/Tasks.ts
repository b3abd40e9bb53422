/**
 * Long calls as MCP tasks (protocol 2025-11-25): a `tools/call` with a `task` param is
 * answered at once with a task and runs apart from its request; `tasks/get` reports it
 * (working, then completed, failed or cancelled, with the latest line the cell printed),
 * `tasks/result` waits for it and gives the result the plain call would have,
 * `tasks/cancel` interrupts it, `tasks/list` lists the client's tasks. A task is its
 * client's alone: another client's id is not found. Finished tasks are kept for their
 * time to live (the one asked, within bounds) and at most `maxFinished` per client,
 * oldest dropped first.
 */
import { Cause, Deferred, Effect, Exit, Fiber, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { ErrorCode } from "./JsonRpc.ts"

/** The `_meta` key tying a message to its task. */
export const RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"

/** A task's status, as the protocol names them. */
export type TaskStatus = "working" | "completed" | "failed" | "cancelled"

/** A task as `tasks/get` and `tasks/list` report it. */
export interface TaskView {
  readonly taskId: string
  readonly status: TaskStatus
  readonly ttl: number
  readonly createdAt: string
  readonly lastUpdatedAt: string
  readonly pollInterval: number
  readonly statusMessage?: string
}

/** A failure a task method answers with (a JSON-RPC error). */
export interface TaskFailure {
  readonly code: number
  readonly message: string
}

/** How tasks are kept. */
export interface TaskOptions {
  /** A finished task's time to live unless the call asks for another, in ms. */
  readonly defaultTtlMs: number
  /** The longest time to live a call may ask for, in ms. */
  readonly maxTtlMs: number
  /** How often a client should poll, in ms. */
  readonly pollIntervalMs: number
  /** How many finished tasks a client keeps at most. */
  readonly maxFinished: number
  /** How many tasks a client may have running at once. */
  readonly maxRunning: number
}

/** The defaults: kept 10 minutes (at most an hour), polled every 2 s, 64 finished and 16 running per client. */
export const DEFAULT_TASK_OPTIONS: TaskOptions = {
  defaultTtlMs: 600_000,
  maxTtlMs: 3_600_000,
  pollIntervalMs: 2_000,
  maxFinished: 64,
  maxRunning: 16
}

/** The shortest time to live kept, in ms. */
const MIN_TTL_MS = 1_000

interface Entry {
  readonly taskId: string
  readonly clientId: number
  readonly createdAt: number
  readonly ttlMs: number
  lastUpdatedAt: number
  status: TaskStatus
  finishedAt: number | undefined
  fetched: boolean
  readonly latest: () => string | undefined
  readonly done: Deferred.Deferred<unknown, TaskFailure>
  fiber: Fiber.Fiber<unknown, unknown> | undefined
}

/** The table of a door's tasks. */
export interface TaskTable {
  /** Starts `run` as a task of `clientId` (`ttl` as the call asked); `latest` gives the line its status shows. */
  readonly start: (
    clientId: number,
    run: Effect.Effect<unknown, TaskFailure>,
    ttl: number | undefined,
    latest: () => string | undefined,
    isFailure: (result: unknown) => boolean
  ) => Effect.Effect<TaskView, TaskFailure>
  /** A task's state. */
  readonly get: (clientId: number, taskId: unknown) => Effect.Effect<TaskView, TaskFailure>
  /** Waits for a task to finish and gives its result (tied to the task by `_meta`), or its error. */
  readonly result: (clientId: number, taskId: unknown) => Effect.Effect<unknown, TaskFailure>
  /** Cancels a running task: its cell is interrupted. */
  readonly cancel: (clientId: number, taskId: unknown) => Effect.Effect<TaskView, TaskFailure>
  /** The client's tasks, oldest first. */
  readonly list: (clientId: number) => Effect.Effect<ReadonlyArray<TaskView>>
  /** How many of the client's tasks still run or hold a result not yet fetched. */
  readonly holding: (clientId: number) => number
  /** Ends the client's tasks (its session ended). */
  readonly forget: (clientId: number) => Effect.Effect<void>
}

const notFound = (taskId: unknown): TaskFailure => ({
  code: ErrorCode.InvalidParams,
  message: `Failed to retrieve task: no task ${JSON.stringify(typeof taskId === "string" ? taskId.slice(0, 64) : taskId)} in this session (it expired, or never existed)`
})

/** A task table whose tasks run in the current scope; `now` reads the time (a test's own clock). */
export const makeTaskTable = (options: TaskOptions = DEFAULT_TASK_OPTIONS, now: () => number = Date.now) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const entries = new Map<string, Entry>()

    const view = (entry: Entry): TaskView => {
      const line = entry.status === "working" ? entry.latest() : undefined
      return {
        taskId: entry.taskId,
        status: entry.status,
        ttl: entry.ttlMs,
        createdAt: new Date(entry.createdAt).toISOString(),
        lastUpdatedAt: new Date(entry.lastUpdatedAt).toISOString(),
        pollInterval: options.pollIntervalMs,
        ...(line === undefined ? {} : { statusMessage: line })
      }
    }

    const prune = (at: number) => {
      const finished: Array<Entry> = []
      for (const entry of entries.values()) {
        if (entry.finishedAt === undefined) continue
        if (at - entry.finishedAt > entry.ttlMs) entries.delete(entry.taskId)
        else finished.push(entry)
      }
      const byClient = new Map<number, Array<Entry>>()
      for (const entry of finished) byClient.set(entry.clientId, [...(byClient.get(entry.clientId) ?? []), entry])
      for (const list of byClient.values()) {
        list.sort((a, b) => a.finishedAt! - b.finishedAt!)
        for (const entry of list.slice(0, Math.max(0, list.length - options.maxFinished))) entries.delete(entry.taskId)
      }
    }

    const find = (clientId: number, taskId: unknown): Effect.Effect<Entry, TaskFailure> =>
      Effect.suspend(() => {
        prune(now())
        const entry = typeof taskId === "string" ? entries.get(taskId) : undefined
        return entry === undefined || entry.clientId !== clientId ? Effect.fail(notFound(taskId)) : Effect.succeed(entry)
      })

    const settle = (entry: Entry, status: TaskStatus) => {
      if (entry.finishedAt !== undefined) return false
      entry.status = status
      entry.finishedAt = now()
      entry.lastUpdatedAt = entry.finishedAt
      return true
    }

    const start: TaskTable["start"] = (clientId, run, ttl, latest, isFailure) =>
      Effect.gen(function*() {
        prune(now())
        const running = [...entries.values()].filter((entry) => entry.clientId === clientId && entry.finishedAt === undefined).length
        if (running >= options.maxRunning) {
          return yield* Effect.fail<TaskFailure>({
            code: ErrorCode.InvalidRequest,
            message: `This session already runs ${running} tasks, the most it may; wait for one to finish or cancel one (tasks/cancel).`
          })
        }
        const createdAt = now()
        const entry: Entry = {
          taskId: randomBytes(16).toString("hex"),
          clientId,
          createdAt,
          ttlMs: Math.min(options.maxTtlMs, Math.max(MIN_TTL_MS, ttl === undefined || !Number.isFinite(ttl) ? options.defaultTtlMs : Math.round(ttl))),
          lastUpdatedAt: createdAt,
          status: "working",
          finishedAt: undefined,
          fetched: false,
          latest,
          done: Deferred.makeUnsafe<unknown, TaskFailure>(),
          fiber: undefined
        }
        entries.set(entry.taskId, entry)
        const finish = (exit: Exit.Exit<unknown, TaskFailure>) =>
          Effect.suspend(() => {
            if (Exit.isSuccess(exit)) {
              settle(entry, isFailure(exit.value) ? "failed" : "completed")
              return Deferred.succeed(entry.done, exit.value)
            }
            const failure = Cause.findErrorOption(exit.cause)
            if (failure._tag === "Some") {
              settle(entry, "failed")
              return Deferred.fail(entry.done, failure.value)
            }
            settle(entry, "cancelled")
            return Deferred.fail(entry.done, { code: ErrorCode.InternalError, message: "The task was cancelled before it finished: its cell was interrupted." })
          })
        entry.fiber = yield* Effect.forkIn(Effect.onExit(run, finish), scope)
        return view(entry)
      })

    const cancel: TaskTable["cancel"] = (clientId, taskId) =>
      Effect.flatMap(find(clientId, taskId), (entry) => {
        if (!settle(entry, "cancelled")) {
          return Effect.fail<TaskFailure>({ code: ErrorCode.InvalidParams, message: `Cannot cancel task ${entry.taskId}: it already ended (${entry.status}).` })
        }
        const fiber = entry.fiber
        return Effect.as(fiber === undefined ? Effect.void : Effect.asVoid(Effect.forkIn(Fiber.interrupt(fiber), scope)), view(entry))
      })

    const result: TaskTable["result"] = (clientId, taskId) =>
      Effect.flatMap(find(clientId, taskId), (entry) =>
        Deferred.await(entry.done).pipe(
          Effect.map((value) => {
            entry.fetched = true
            const meta = typeof value === "object" && value !== null && "_meta" in value ? (value as { readonly _meta: object })._meta : {}
            return { ...(value as object), _meta: { ...meta, [RELATED_TASK_META_KEY]: { taskId: entry.taskId } } }
          }),
          Effect.tapError(() => Effect.sync(() => void (entry.fetched = true)))
        ))

    const table: TaskTable = {
      start,
      get: (clientId, taskId) => Effect.map(find(clientId, taskId), view),
      result,
      cancel,
      list: (clientId) =>
        Effect.sync(() => {
          prune(now())
          return [...entries.values()].filter((entry) => entry.clientId === clientId).map(view)
        }),
      holding: (clientId) => {
        let count = 0
        for (const entry of entries.values()) if (entry.clientId === clientId && (entry.finishedAt === undefined || !entry.fetched)) count++
        return count
      },
      forget: (clientId) =>
        Effect.suspend(() => {
          const ended = [...entries.values()].filter((entry) => entry.clientId === clientId)
          for (const entry of ended) entries.delete(entry.taskId)
          return Effect.forEach(ended, (entry) => (entry.fiber === undefined ? Effect.void : Fiber.interrupt(entry.fiber)), { discard: true })
        })
    }
    return table
  })

const Empty = Schema.Struct({})

/** A request's `task` param (2025-11-25), which effect's McpSchema does not know. */
export const TaskParams = Schema.Struct({ ttl: Schema.optional(Schema.Number), pollInterval: Schema.optional(Schema.Number) })

/** A client's `capabilities.tasks` (2025-11-25), which effect's McpSchema does not know. */
export const ClientTasksCapability = Schema.Struct({
  list: Schema.optional(Empty),
  cancel: Schema.optional(Empty),
  requests: Schema.optional(Schema.Struct({
    sampling: Schema.optional(Schema.Struct({ createMessage: Schema.optional(Empty) })),
    elicitation: Schema.optional(Schema.Struct({ create: Schema.optional(Empty) }))
  }))
})

/** The server's `capabilities.tasks`: tools/call may run as a task, and tasks can be listed and cancelled. */
export const SERVER_TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } } as const

/** The first protocol revision with tasks. */
export const TASKS_PROTOCOL_VERSION = "2025-11-25"
