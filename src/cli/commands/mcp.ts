/**
 * `veyyon mcp`: an MCP server on stdio (`@effect/ai`'s `McpServer`) with one tool,
 * `eval`, whose name, description and input schema are the eval tool's own definition
 * (`language` narrowed to the enabled backends). Each client connection is one session
 * with its own kernel, kept for the life of the server, so state persists across calls
 * and `reset: true` starts it afresh. Cells run in the directory the server started in.
 *
 * Stdout is the protocol: logs go to stderr, and the server stops (shutting its kernels
 * down) when stdin closes or on SIGINT/SIGTERM.
 */
import { Command } from "@effect/cli"
import { McpServerClient, Tool, ToolAnnotations } from "@effect/ai/McpSchema"
import * as McpServer from "@effect/ai/McpServer"
import * as NodeSink from "@effect/platform-node/NodeSink"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Cause, Effect, Exit, Fiber, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { EvalTool } from "../../services/EvalTool.ts"
import type { CliFailure } from "../exitCodes.ts"
import { cellToolResult, failureToolResult } from "../mcpResult.ts"
import { cliEvalLayer } from "../session.ts"
import { VERSION } from "../version.ts"

/** The tool's human-readable title. */
export const EVAL_TOOL_TITLE = "Run code in a persistent kernel"

/** The server's name in the MCP handshake. */
export const MCP_SERVER_NAME = "veyyon"

/** Adds the `eval` tool to the server; every connection gets a session of its own. */
const registerEvalTool = Layer.effectDiscard(
  Effect.gen(function*() {
    const server = yield* McpServer.McpServer
    const tool = yield* EvalTool
    const cwd = process.cwd()
    const serverToken = randomBytes(4).toString("hex")
    yield* server.addTool({
      tool: new Tool({
        name: tool.definition.name,
        title: EVAL_TOOL_TITLE,
        description: tool.definition.description,
        inputSchema: tool.definition.parameters,
        annotations: new ToolAnnotations({
          title: EVAL_TOOL_TITLE,
          readOnlyHint: false,
          destructiveHint: true,
          idempotentHint: false,
          openWorldHint: true
        })
      }),
      handle: (payload) =>
        Effect.gen(function*() {
          const client = yield* McpServerClient
          const sessionId = `mcp-${serverToken}-${client.clientId}`
          return yield* tool.run(payload, { sessionId, cwd }).pipe(
            Effect.map(cellToolResult),
            Effect.catchAll((error) => Effect.succeed(failureToolResult(error))),
            Effect.catchAllDefect((defect) =>
              Effect.succeed(failureToolResult({
                _tag: "Defect",
                message: `the eval tool failed unexpectedly: ${Cause.pretty(Cause.die(defect)).split("\n")[0]}`
              }))
            )
          )
        })
    })
  })
)

/**
 * The server as a Layer. The tool is registered on the server's registry before the
 * stdio transport starts serving (both share the one memoized registry layer), so the
 * `initialize` answer already lists the tools capability.
 */
export const mcpServerLayer: Layer.Layer<never, CliFailure> = McpServer.layerStdio({
  name: MCP_SERVER_NAME,
  version: VERSION,
  stdin: NodeStream.stdin,
  stdout: NodeSink.stdout
}).pipe(
  Layer.provide(registerEvalTool.pipe(Layer.provideMerge(McpServer.McpServer.layer))),
  Layer.provide(cliEvalLayer({ longLived: true }))
)

/** Serves until stdin closes (a normal end, though the transport ends it by interruption) or a signal arrives. */
const serve = Effect.gen(function*() {
  const server = yield* Effect.fork(Layer.launch(mcpServerLayer))
  const exit = yield* Fiber.await(server)
  if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) return yield* Effect.failCause(exit.cause)
})

/** The `mcp` command. */
export const mcpCommand = Command.make("mcp", {}, () => serve).pipe(
  Command.withDescription("Serve the eval tool to MCP clients on stdio; state persists per connection.")
)
