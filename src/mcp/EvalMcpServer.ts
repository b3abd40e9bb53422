/**
 * The MCP server veyyon serves on every door: `@effect/ai`'s `McpServer` with one tool,
 * `eval` (the eval tool's own name, description and input schema, plus an
 * `outputSchema` for its structured result), running on the framing layer of
 * `McpDoor`. Each client (a stdio connection, an HTTP session) is one kernel session;
 * its artifacts are its resources. A `tools/call` that carries a progress token gets
 * progress notifications until its answer.
 */
import { InternalError, InvalidParams, McpServerClient, ResourceTemplate, Tool, ToolAnnotations } from "@effect/ai/McpSchema"
import * as McpServer from "@effect/ai/McpServer"
import * as RpcServer from "@effect/rpc/RpcServer"
import { Cause, Effect, Either, Option, type Scope } from "effect"
import { Buffer } from "node:buffer"
import { randomBytes } from "node:crypto"
import { cellToolResult, EVAL_OUTPUT_SCHEMA, failureToolResult } from "../cli/mcpResult.ts"
import { ArtifactStore } from "../services/ArtifactStore.ts"
import { clampTimeoutSeconds, DEFAULT_TIMEOUT_SECONDS } from "../services/CellTimeout.ts"
import { EvalTool, type EvalToolService } from "../services/EvalTool.ts"
import type { PrivateDirRefused } from "../services/PrivateDir.ts"
import type { SessionWorkspace } from "../services/SessionWorkspace.ts"
import { listResult, readArtifact } from "./ArtifactResources.ts"
import { ErrorCode } from "./JsonRpc.ts"
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
  /** Ends a client: interrupts its calls and shuts its kernels down. */
  readonly end: (clientId: number) => Effect.Effect<void>
}

/** How the server runs. */
export interface McpServeOptions {
  readonly version: string
  /** Milliseconds between progress notifications (at most 5000). */
  readonly progressIntervalMs: number
  /** Each session's cells run in its own directory here (removed when it ends); without it, in the server's directory. */
  readonly sessionDirs?: SessionWorkspace | undefined
}

const toolTotalSeconds = (payload: unknown): number =>
  Either.getOrElse(clampTimeoutSeconds((payload as { readonly timeout?: unknown } | undefined)?.timeout), () => DEFAULT_TIMEOUT_SECONDS)

const evalHandler = (
  tool: EvalToolService,
  sessions: McpSessions,
  cwdOf: (sessionId: string) => Effect.Effect<string, PrivateDirRefused>,
  progressIntervalMs: number
) => (payload: unknown) =>
  Effect.gen(function*() {
    const client = yield* McpServerClient
    const call = yield* Effect.serviceOption(McpCall)
    const token = Option.flatMap(call, (info) => Option.fromNullable(info.progressToken))
    const sessionId = sessionIds(sessions, client.clientId)
    const cwd = yield* cwdOf(sessionId)
    if (Option.isNone(call) || Option.isNone(token)) return yield* tool.run(payload, { sessionId, cwd })
    const tracker = makeLineTracker()
    return yield* withProgress(tool.run(payload, { sessionId, cwd, onEvent: tracker.onEvent }), {
      token: token.value,
      totalSeconds: toolTotalSeconds(payload),
      intervalMs: progressIntervalMs,
      latest: tracker.latest,
      notify: call.value.notify
    })
  }).pipe(
    Effect.map(cellToolResult),
    Effect.catchAll((error) => Effect.succeed(failureToolResult(error))),
    Effect.catchAllDefect((defect) =>
      Effect.succeed(failureToolResult({
        _tag: "Defect",
        message: `the eval tool failed unexpectedly: ${Cause.pretty(Cause.die(defect)).split("\n")[0]}`
      }))
    )
  )

const sessionIds = (sessions: McpSessions, clientId: number) => sessions.sessionIdOf(clientId)

const withOutputSchema = (method: string, result: unknown): unknown => {
  if (method !== "tools/list" || typeof result !== "object" || result === null) return result
  const tools = (result as { readonly tools?: ReadonlyArray<{ readonly name?: string }> }).tools
  if (!Array.isArray(tools)) return result
  return { ...result, tools: tools.map((tool) => (tool.name === "eval" ? { ...tool, outputSchema: EVAL_OUTPUT_SCHEMA } : tool)) }
}

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
        id = `mcp-${randomBytes(16).toString("hex")}`
        ids.set(clientId, id)
      }
      return id
    }
    const forget = (clientId: number) =>
      Effect.suspend(() => {
        const id = ids.get(clientId)
        ids.delete(clientId)
        return id === undefined || sessionDirs === undefined ? Effect.void : sessionDirs.remove(id)
      })
    const storeOf = (clientId: number) =>
      Effect.mapError(artifacts.forSession(sessionIdOf(clientId)), (error) =>
        new McpFailure({ code: ErrorCode.InternalError, message: error.message }))
    const readFor = (clientId: number, uri: unknown) => Effect.flatMap(storeOf(clientId), (store) => readArtifact(store, uri))

    const door = yield* makeMcpDoor({
      localMethods: {
        "resources/list": (clientId) =>
          storeOf(clientId).pipe(
            Effect.flatMap((store) => store.list),
            Effect.map(listResult),
            Effect.mapError((error) => (error instanceof McpFailure ? error : new McpFailure({ code: ErrorCode.InternalError, message: error.message })))
          ),
        "resources/read": (clientId, params) => readFor(clientId, params.uri)
      },
      decorate: withOutputSchema
    })
    const sessions: McpSessions = {
      sessionIdOf,
      end: (clientId) => Effect.zipRight(door.disconnect(clientId), Effect.zipRight(tool.endSession(sessionIdOf(clientId)), forget(clientId)))
    }

    yield* server.addTool({
      tool: new Tool({
        name: tool.definition.name,
        title: EVAL_TOOL_TITLE,
        description: `${tool.definition.description}\n${RESOURCES_GUIDANCE}`,
        inputSchema: tool.definition.parameters,
        annotations: new ToolAnnotations({
          title: EVAL_TOOL_TITLE,
          readOnlyHint: false,
          destructiveHint: true,
          idempotentHint: false,
          openWorldHint: true
        })
      }),
      handle: evalHandler(tool, sessions, cwdOf, options.progressIntervalMs)
    })
    yield* server.addResourceTemplate({
      template: new ResourceTemplate({
        uriTemplate: "artifact://{id}",
        name: "artifact",
        title: "Cell artifact",
        description: "A file a cell of this session produced (full output of a truncated result, an image, spilled outputs).",
        mimeType: undefined
      }),
      routerPath: "/artifact/:id",
      completions: {},
      handle: (uri) =>
        Effect.flatMap(McpServerClient, (client) => readFor(client.clientId, uri)).pipe(
          Effect.map(({ contents }) => ({
            contents: contents.map((content) =>
              content.blob === undefined
                ? { uri: content.uri, mimeType: content.mimeType, text: content.text }
                : { uri: content.uri, mimeType: content.mimeType, blob: new Uint8Array(Buffer.from(content.blob, "base64")) }
            )
          })),
          Effect.mapError((failure) =>
            failure.code === ErrorCode.InvalidParams ? new InvalidParams({ message: failure.message }) : new InternalError({ message: failure.message })
          )
        )
    })
    yield* Effect.forkScoped(
      McpServer.run({ name: MCP_SERVER_NAME, version: options.version }).pipe(Effect.provideService(RpcServer.Protocol, door.protocol))
    )
    yield* transport(door, sessions)
  }).pipe(Effect.scoped, Effect.provide(McpServer.McpServer.layer))
