/**
 * The MCP server veyyon serves on every door: `effect/ai`'s `McpServer` holding one tool,
 * `eval` (the eval tool's own name, description and input schema, plus an
 * `outputSchema` for its structured result), and the artifact resource template,
 * answered through the framing layer of `McpDoor`: the handshake, the lists and the
 * calls are `McpSchema` values, tool calls dispatched by the server. Each client (a stdio connection, an HTTP session) is one kernel session;
 * its artifacts are its resources. A `tools/call` that carries a progress token gets
 * progress notifications until its answer; one that carries a `task` runs as a task
 * (`Tasks`), declared with `execution.taskSupport` and the `tasks` capability. With `hostCalls`, each client's session is
 * bound to it on `initialize`, so its cells' `completion()`, `agent()` and `input()` ask
 * that client (sampling, elicitation).
 */
import { Cause, Context, Effect, Exit, Option, Result, Schema, type Scope } from "effect"
import { McpSchema, McpServer } from "effect/ai"
import { Buffer } from "node:buffer"
import { randomBytes } from "node:crypto"
import { cellToolJson, cellToolResult, EVAL_OUTPUT_SCHEMA, failureToolJson, failureToolResult } from "./ToolResult.ts"
import { ArtifactStore } from "../services/output/ArtifactStore.ts"
import { clampTimeoutSeconds, DEFAULT_TIMEOUT_SECONDS } from "../services/tool/CellTimeout.ts"
import { type EvalContext, type EvalResult, EvalTool, type EvalToolService } from "../services/tool/EvalTool.ts"
import type { PrivateDirRefused } from "../services/storage/PrivateDir.ts"
import type { SessionWorkspace } from "../services/storage/SessionWorkspace.ts"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { listResult, readArtifact } from "./ArtifactResources.ts"
import { type CellObserver, type CellWatch, personInterrupted } from "./CellObserver.ts"
import type { McpHostCalls } from "./HostCalls.ts"
import { ErrorCode, SUPPORTED_PROTOCOL_VERSIONS } from "./JsonRpc.ts"
import { McpCall, type McpDoor, McpFailure, makeMcpDoor } from "./McpDoor.ts"
import { makeLineTracker, withProgress } from "./Progress.ts"
import { SERVER_TASKS_CAPABILITY, TASKS_PROTOCOL_VERSION } from "./Tasks.ts"

/** The tool's human-readable title. */
export const EVAL_TOOL_TITLE = "Run code in a persistent kernel"

/** The server's name in the MCP handshake. */
export const MCP_SERVER_NAME = "veyyon"

/** What the tool description adds for MCP clients. */
export const RESOURCES_GUIDANCE =
  "Read an artifact:// URI a result names with the MCP resources/read request (resources/list lists this session's artifacts)."

/** The sessions behind a door's clients. */
export interface McpSessions {
  /** The kernel session of a client. */
  readonly sessionIdOf: (clientId: number) => string
  /** Ends a client: interrupts its calls and shuts its kernels down; `forget` also forgets its saved state (an explicit delete). */
  readonly end: (clientId: number, options?: { readonly forget?: boolean }) => Effect.Effect<void>
}

/** How the server runs. */
export interface McpServeOptions {
  readonly version: string
  /** Milliseconds between progress notifications (at most 5000). */
  readonly progressIntervalMs: number
  /** Each session's cells run in its own directory here (removed when it ends); without it, in the server's directory. */
  readonly sessionDirs?: SessionWorkspace | undefined
  /** The session id of every client (the stdio door's one client, named so a restarted server restores it); without it, a random id per client. */
  readonly sessionId?: string | undefined
  /** Told of every session and cell (the viewer page); the door is the same without it. */
  readonly observer?: CellObserver | undefined
  /** The bridge the kernels were given, answered through each session's client. */
  readonly hostCalls?: McpHostCalls | undefined
  /** How long a request to a client (sampling, elicitation) may wait for its answer. */
  readonly clientRequestTimeoutMs?: number | undefined
}

/** How long a request to a client waits unless `clientRequestTimeoutMs` says otherwise: a person may have to read and approve it. */
export const DEFAULT_CLIENT_REQUEST_TIMEOUT_MS = 600_000

const toolTotalSeconds = (payload: unknown): number =>
  Result.getOrElse(clampTimeoutSeconds((payload as { readonly timeout?: unknown } | undefined)?.timeout), () => DEFAULT_TIMEOUT_SECONDS)

const withoutWatch = (tool: EvalToolService, payload: unknown, context: EvalContext) => tool.run(payload, context)

const failureSentence = (cause: Cause.Cause<unknown>): string => {
  if (Cause.hasInterruptsOnly(cause)) return "the call was cancelled by its client"
  const error = Cause.squash(cause)
  return error instanceof Error ? error.message : String(error)
}

/** Runs the cell under `watch`: its events streamed to it, its signal able to stop it, its ending told. */
const watched = (tool: EvalToolService, payload: unknown, context: EvalContext, watch: CellWatch) => {
  const onEvent = context.onEvent
  return tool.run(payload, {
    ...context,
    signal: watch.signal,
    onEvent: onEvent === undefined ? watch.onEvent : (output) => {
      onEvent(output)
      watch.onEvent(output)
    }
  }).pipe(
    Effect.map((result) => (watch.signal.aborted && result.cancelled ? personInterrupted(result) : result)),
    Effect.onExit((exit) =>
      Effect.sync(() =>
        watch.finished(
          Exit.isSuccess(exit)
            ? { result: exit.value }
            : { failure: failureSentence(exit.cause) }
        )
      ))
  )
}

/** A cell's answer: its result, or why it could not run. */
type Outcome = { readonly result: EvalResult } | { readonly failure: { readonly message: string } }

/** Runs one `eval` call for a client; never fails (a call that cannot run is an outcome too). */
const evalRunner = (
  tool: EvalToolService,
  sessionIdOf: (clientId: number) => string,
  cwdOf: (sessionId: string) => Effect.Effect<string, PrivateDirRefused>,
  progressIntervalMs: number,
  observer: CellObserver | undefined
) => Effect.fnUntraced(function*(clientId: number, payload: unknown) {
    const call = yield* Effect.serviceOption(McpCall)
    const token = Option.flatMap(call, (info) => Option.fromNullishOr(info.progressToken))
    const sessionId = sessionIdOf(clientId)
    const cwd = yield* cwdOf(sessionId)
    const run = (context: EvalContext) =>
      observer === undefined ? withoutWatch(tool, payload, context) : watched(tool, payload, context, observer.cell(sessionId, payload))
    const observe = Option.isSome(call) ? call.value.observe : undefined
    if (Option.isNone(call) || Option.isNone(token)) return yield* run({ sessionId, cwd, ...(observe === undefined ? {} : { onEvent: observe }) })
    const tracker = makeLineTracker()
    const onEvent = observe === undefined ? tracker.onEvent : (output: KernelOutput) => (tracker.onEvent(output), observe(output))
    return yield* withProgress(run({ sessionId, cwd, onEvent }), {
      token: token.value,
      totalSeconds: toolTotalSeconds(payload),
      intervalMs: progressIntervalMs,
      latest: tracker.latest,
      notify: call.value.notify
    })
  }, (effect) =>
    effect.pipe(
      Effect.map((result): Outcome => ({ result })),
      Effect.catch((error) => Effect.succeed<Outcome>({ failure: error })),
      Effect.catchDefect((defect) =>
        Effect.succeed<Outcome>({
          failure: { message: `the eval tool failed unexpectedly: ${Cause.pretty(Cause.die(defect)).split("\n")[0]}` }
        })
      )
    ))

/** The protocol version answered to a client that asked for `requested`: that one when spoken here, else the newest. */
export const negotiatedVersion = (requested: string): string =>
  SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : SUPPORTED_PROTOCOL_VERSIONS[0]!

const outcomeJson = (outcome: Outcome) => ("result" in outcome ? cellToolJson(outcome.result) : failureToolJson(outcome.failure))

const asMcpFailure = (error: { readonly code: number; readonly message: string }) => new McpFailure({ code: error.code, message: error.message })

const encoded = <S extends Schema.Codec<any, any>>(schema: S) => (value: S["Type"]) => Schema.encodeEffect(schema)(value).pipe(Effect.orDie)

const noReverseRequests = Effect.die(new Error("this server sends no requests to its clients"))

/** The methods a client may run as a task. */
const TASK_METHODS: ReadonlySet<string> = new Set(["tools/call"])

/**
 * Serves the eval tool through a door for as long as `transport` runs: `transport`
 * feeds the door its clients' frames (and ends clients through the sessions).
 */
export const serveMcp = <E, R>(
  options: McpServeOptions,
  transport: (door: McpDoor, sessions: McpSessions) => Effect.Effect<void, E, R>
): Effect.Effect<void, E, Exclude<R, Scope.Scope> | EvalTool | ArtifactStore> =>
  Effect.gen(function*() {
    const tool = yield* EvalTool
    const artifacts = yield* ArtifactStore
    const server = yield* McpServer.McpServer
    const serverCwd = process.cwd()
    const sessionDirs = options.sessionDirs
    const cwdOf = (sessionId: string) => (sessionDirs === undefined ? Effect.succeed(serverCwd) : sessionDirs.dirOf(sessionId))
    // 128 random bits per client: another client cannot guess a session's id (and so its kv, artifacts or kernels).
    const ids = new Map<number, string>()
    const sessionIdOf = (clientId: number) => {
      let id = ids.get(clientId)
      if (id === undefined) {
        id = options.sessionId ?? `mcp-${randomBytes(16).toString("hex")}`
        ids.set(clientId, id)
      }
      return id
    }
    const clients = new Map<number, McpSchema.McpServerClient["Service"]>()
    const forget = (clientId: number) =>
      Effect.suspend(() => {
        const id = ids.get(clientId)
        ids.delete(clientId)
        clients.delete(clientId)
        if (id !== undefined) options.hostCalls?.unbind(id)
        return id === undefined || sessionDirs === undefined ? Effect.void : sessionDirs.remove(id)
      })
    const storeOf = (clientId: number) =>
      Effect.mapError(artifacts.forSession(sessionIdOf(clientId)), (error) =>
        new McpFailure({ code: ErrorCode.InternalError, message: error.message }))
    const readFor = (clientId: number, uri: unknown) => Effect.flatMap(storeOf(clientId), (store) => readArtifact(store, uri))

    const clientOf = (clientId: number, initialize: typeof McpSchema.Initialize.payloadSchema.Type): McpSchema.McpServerClient["Service"] => ({
      clientId,
      protocolVersion: negotiatedVersion(initialize.protocolVersion) as McpSchema.McpServerClient["Service"]["protocolVersion"],
      clientCapabilities: initialize.capabilities,
      clientInfo: initialize.clientInfo,
      initializePayload: initialize,
      getClient: noReverseRequests
    })
    const anonymous = (clientId: number) =>
      clientOf(clientId, { protocolVersion: SUPPORTED_PROTOCOL_VERSIONS[0]!, capabilities: {}, clientInfo: { name: "unknown", version: "0" } })

    const runEval = evalRunner(tool, sessionIdOf, cwdOf, options.progressIntervalMs, options.observer)

    const door = yield* makeMcpDoor({
      tasks: { methods: TASK_METHODS, isFailure: (result) => typeof result === "object" && result !== null && "isError" in result && result.isError === true },
      methods: {
        initialize: (clientId, params) =>
          Effect.gen(function*() {
            const initialize = params as typeof McpSchema.Initialize.payloadSchema.Type
            const client = clientOf(clientId, initialize)
            clients.set(clientId, client)
            options.observer?.opened(sessionIdOf(clientId), initialize.clientInfo.name)
            options.hostCalls?.bind(sessionIdOf(clientId), {
              capabilities: initialize.capabilities,
              protocolVersion: client.protocolVersion,
              ask: (method, askParams) => door.ask(clientId, method, askParams, options.clientRequestTimeoutMs ?? DEFAULT_CLIENT_REQUEST_TIMEOUT_MS)
            })
            const result = yield* encoded(McpSchema.InitializeResult)({
              protocolVersion: client.protocolVersion,
              capabilities: { tools: { listChanged: false }, resources: { listChanged: false, subscribe: false } },
              serverInfo: { name: MCP_SERVER_NAME, version: options.version }
            })
            // McpSchema knows no tasks: the capability is added to what it encoded.
            return client.protocolVersion >= TASKS_PROTOCOL_VERSION
              ? { ...result, capabilities: { ...result.capabilities, tasks: SERVER_TASKS_CAPABILITY } }
              : result
          }),
        ping: () => Effect.succeed({}),
        "tools/list": () =>
          Effect.map(
            encoded(McpSchema.ListToolsResult)(new McpSchema.ListToolsResult({ tools: server.tools.map((entry) => entry.tool) })),
            // McpSchema knows no `execution`: each tool may run as a task or not, as the client asks.
            (result) => ({ ...result, tools: result.tools.map((tool) => ({ ...tool, execution: { taskSupport: "optional" } })) })
          ),
        // The eval tool answers straight from its runner, its result built in wire form; another name gets McpServer's answer.
        "tools/call": (clientId, params) =>
          params.name === tool.definition.name ? Effect.map(runEval(clientId, params.arguments), outcomeJson) : server.callTool(params as typeof McpSchema.CallTool.payloadSchema.Type).pipe(
            Effect.provideService(McpSchema.McpServerClient, clients.get(clientId) ?? anonymous(clientId)),
            Effect.mapError(asMcpFailure),
            Effect.flatMap(encoded(McpSchema.CallToolResult))
          ),
        "resources/list": (clientId) =>
          storeOf(clientId).pipe(
            Effect.flatMap((store) => store.list),
            Effect.map(listResult),
            Effect.mapError((error) => (error instanceof McpFailure ? error : new McpFailure({ code: ErrorCode.InternalError, message: error.message })))
          ),
        "resources/read": (clientId, params) => readFor(clientId, params.uri),
        "resources/templates/list": () =>
          encoded(McpSchema.ListResourceTemplatesResult)(
            new McpSchema.ListResourceTemplatesResult({ resourceTemplates: server.resourceTemplates.map((entry) => entry.template) })
          )
      }
    })
    const sessions: McpSessions = {
      sessionIdOf,
      end: (clientId, endOptions) =>
        Effect.andThen(
          door.disconnect(clientId),
          Effect.andThen(
            tool.endSession(sessionIdOf(clientId), endOptions),
            Effect.andThen(Effect.sync(() => options.observer?.ended(sessionIdOf(clientId))), forget(clientId))
          )
        )
    }

    yield* server.addTool({
      tool: new McpSchema.Tool({
        name: tool.definition.name,
        title: EVAL_TOOL_TITLE,
        description: `${tool.definition.description}\n${RESOURCES_GUIDANCE}`,
        inputSchema: tool.definition.parameters as McpSchema.ToolJson,
        outputSchema: EVAL_OUTPUT_SCHEMA,
        annotations: {
          title: EVAL_TOOL_TITLE,
          readOnlyHint: false,
          destructiveHint: true,
          idempotentHint: false,
          openWorldHint: true
        }
      }),
      annotations: Context.empty(),
      handle: (payload) =>
        Effect.gen(function*() {
          const request = yield* McpSchema.McpRequestContext
          const outcome = yield* runEval(request.clientId, payload)
          return "result" in outcome ? cellToolResult(outcome.result) : failureToolResult(outcome.failure)
        })
    })
    yield* server.addResourceTemplate({
      template: new McpSchema.ResourceTemplate({
        uriTemplate: "artifact://{id}",
        name: "artifact",
        title: "Cell artifact",
        description: "A file a cell of this session produced (full output of a truncated result, an image, spilled outputs)."
      }),
      annotations: Context.empty(),
      routerPath: "/artifact/:id",
      completions: {},
      handle: (uri) =>
        Effect.gen(function*() {
          const request = yield* McpSchema.McpRequestContext
          return yield* readFor(request.clientId, uri)
        }).pipe(
          Effect.map(({ contents }): McpSchema.ReadResourceResult => ({
            contents: contents.map((content) =>
              content.blob === undefined
                ? { uri: content.uri, mimeType: content.mimeType, text: content.text }
                : { uri: content.uri, mimeType: content.mimeType, blob: new Uint8Array(Buffer.from(content.blob, "base64")) }
            )
          })),
          Effect.mapError((failure) =>
            failure.code === ErrorCode.InvalidParams
              ? new McpSchema.InvalidParams({ message: failure.message })
              : new McpSchema.InternalError({ message: failure.message })
          )
        )
    })

    yield* transport(door, sessions)
  }).pipe(Effect.scoped, Effect.provide(McpServer.McpServer.layer))
