/**
 * The MCP server veyyon serves on every door: `effect/ai`'s `McpServer` holding one tool,
 * `eval` (the eval tool's own name, description and input schema, plus an
 * `outputSchema` for its structured result), and the artifact resource template,
 * answered through the framing layer of `McpDoor`: the handshake, the lists and the
 * calls are `McpSchema` values, tool calls dispatched by the server. Each client (a stdio connection, an HTTP session) is one kernel session;
 * its artifacts are its resources. A `tools/call` that carries a progress token gets
 * progress notifications until its answer.
 */
import { Cause, Context, Effect, Exit, Option, Result, Schema, type Scope } from "effect"
import { McpSchema, McpServer } from "effect/ai"
import { Buffer } from "node:buffer"
import { randomBytes } from "node:crypto"
import { cellToolResult, EVAL_OUTPUT_SCHEMA, failureToolResult } from "./ToolResult.ts"
import { ArtifactStore } from "../services/output/ArtifactStore.ts"
import { clampTimeoutSeconds, DEFAULT_TIMEOUT_SECONDS } from "../services/tool/CellTimeout.ts"
import { type EvalContext, EvalTool, type EvalToolService } from "../services/tool/EvalTool.ts"
import type { PrivateDirRefused } from "../services/storage/PrivateDir.ts"
import type { SessionWorkspace } from "../services/storage/SessionWorkspace.ts"
import { listResult, readArtifact } from "./ArtifactResources.ts"
import { type CellObserver, type CellWatch, personInterrupted } from "./CellObserver.ts"
import { ErrorCode, SUPPORTED_PROTOCOL_VERSIONS } from "./JsonRpc.ts"
import { McpCall, type McpDoor, McpFailure, makeMcpDoor } from "./McpDoor.ts"
import { makeLineTracker, withProgress } from "./Progress.ts"

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
}

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

const evalHandler = (
  tool: EvalToolService,
  sessions: McpSessions,
  cwdOf: (sessionId: string) => Effect.Effect<string, PrivateDirRefused>,
  progressIntervalMs: number,
  observer: CellObserver | undefined
) => (payload: unknown) =>
  Effect.gen(function*() {
    const request = yield* McpSchema.McpRequestContext
    const call = yield* Effect.serviceOption(McpCall)
    const token = Option.flatMap(call, (info) => Option.fromNullishOr(info.progressToken))
    const sessionId = sessions.sessionIdOf(request.clientId)
    const cwd = yield* cwdOf(sessionId)
    const run = (context: EvalContext) =>
      observer === undefined ? withoutWatch(tool, payload, context) : watched(tool, payload, context, observer.cell(sessionId, payload))
    if (Option.isNone(call) || Option.isNone(token)) return yield* run({ sessionId, cwd })
    const tracker = makeLineTracker()
    return yield* withProgress(run({ sessionId, cwd, onEvent: tracker.onEvent }), {
      token: token.value,
      totalSeconds: toolTotalSeconds(payload),
      intervalMs: progressIntervalMs,
      latest: tracker.latest,
      notify: call.value.notify
    })
  }).pipe(
    Effect.map(cellToolResult),
    Effect.catch((error) => Effect.succeed(failureToolResult(error))),
    Effect.catchDefect((defect) =>
      Effect.succeed(failureToolResult({
        message: `the eval tool failed unexpectedly: ${Cause.pretty(Cause.die(defect)).split("\n")[0]}`
      }))
    )
  )

/** The protocol version answered to a client that asked for `requested`: that one when spoken here, else the newest. */
export const negotiatedVersion = (requested: string): string =>
  SUPPORTED_PROTOCOL_VERSIONS.includes(requested) ? requested : SUPPORTED_PROTOCOL_VERSIONS[0]!

const asMcpFailure = (error: { readonly code: number; readonly message: string }) => new McpFailure({ code: error.code, message: error.message })

const encoded = <S extends Schema.Codec<any, any>>(schema: S) => (value: S["Type"]) => Schema.encodeEffect(schema)(value).pipe(Effect.orDie)

const noReverseRequests = Effect.die(new Error("this server sends no requests to its clients"))

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

    const door = yield* makeMcpDoor({
      methods: {
        initialize: (clientId, params) =>
          Effect.gen(function*() {
            const initialize = params as typeof McpSchema.Initialize.payloadSchema.Type
            const client = clientOf(clientId, initialize)
            clients.set(clientId, client)
            options.observer?.opened(sessionIdOf(clientId), initialize.clientInfo.name)
            return yield* encoded(McpSchema.InitializeResult)({
              protocolVersion: client.protocolVersion,
              capabilities: { tools: { listChanged: false }, resources: { listChanged: false, subscribe: false } },
              serverInfo: { name: MCP_SERVER_NAME, version: options.version }
            })
          }),
        ping: () => Effect.succeed({}),
        "tools/list": () => encoded(McpSchema.ListToolsResult)(new McpSchema.ListToolsResult({ tools: server.tools.map((entry) => entry.tool) })),
        "tools/call": (clientId, params) =>
          server.callTool(params as typeof McpSchema.CallTool.payloadSchema.Type).pipe(
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
      handle: evalHandler(tool, sessions, cwdOf, options.progressIntervalMs, options.observer)
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
