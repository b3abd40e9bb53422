/**
 * The prelude's host calls through the MCP doors, with the official SDK client on stdio
 * and over HTTP: a client with a sampling handler answers a cell's completion() and the
 * branches of parallel(); a cell's input() is answered, declined and cancelled through
 * an elicitation handler, and getpass is refused; a client that declared neither
 * capability gets the clear errors at once; cancelling a cell that waits on its client
 * cancels the client's request and leaves the kernel with its variables.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { CreateMessageRequestSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { childEnv, cliEntry, isAlive, repoRoot, tempDir } from "../cli/support.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { findRubyCandidate } from "../../src/backends/ruby.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { type McpChild, poll, startMcp } from "./support.ts"

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly isError?: boolean
}

const python = findPython()
const rubyFound = !(findRubyCandidate(undefined, process.cwd(), process.env.PATH) instanceof Error)
/** Ruby kernels on in the servers, when a ruby is there. */
const RUBY_ENV: Record<string, string> = rubyFound ? { VEYYON_RB: "1" } : {}
const TOKEN = "host-calls-token-0123456789abcdef0123"

/** What the scripted person and model saw and will answer. */
interface Script {
  readonly sampled: Array<{ readonly prompt: string; readonly system: string; readonly maxTokens: number; readonly images: ReadonlyArray<string> }>
  readonly elicited: Array<string>
  /** The next elicitation's answer. */
  elicit: { readonly action: "accept" | "decline" | "cancel"; readonly line?: string }
  /** Set while a sampling request hangs until the server cancels it. */
  hang: boolean
  /** How long the model takes to answer, in ms. */
  delayMs: number
  readonly cancelled: Array<unknown>
}

const newScript = (): Script => ({ sampled: [], elicited: [], elicit: { action: "accept", line: "" }, hang: false, delayMs: 0, cancelled: [] })

/** A client that declared sampling and elicitation and answers from `script` (or, bare, one that declared neither). */
const makeClient = (script: Script | undefined) => {
  const client = new Client(
    { name: "veyyon-host-calls-test", version: "0.0.0" },
    { capabilities: script === undefined ? {} : { sampling: {}, elicitation: { form: {} } } }
  )
  if (script !== undefined) {
    client.setRequestHandler(CreateMessageRequestSchema, async (request, extra) => {
      const content = request.params.messages[0]!.content as { readonly text: string }
      const images = request.params.messages.slice(1).map((message) => {
        const block = message.content as { readonly type: string; readonly mimeType?: string }
        return `${block.type} ${block.mimeType ?? ""}`.trim()
      })
      script.sampled.push({ prompt: content.text, system: request.params.systemPrompt ?? "", maxTokens: request.params.maxTokens, images })
      if (script.hang) {
        await new Promise<void>((resolve) => extra.signal.addEventListener("abort", () => resolve()))
        script.cancelled.push(extra.requestId)
        throw new Error("cancelled")
      }
      if (script.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, script.delayMs))
      return { model: "scripted-model", role: "assistant", content: { type: "text", text: `answer to ${content.text}` } }
    })
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      script.elicited.push(request.params.message)
      const { action, line } = script.elicit
      return action === "accept" ? { action, content: { line: line ?? "" } } : { action }
    })
  }
  return client
}

const text = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")

/** The cases, for a way to connect a client. */
const hostCallCases = (connect: (script: Script | undefined) => Promise<Client>) => {
  let client: Client
  let bare: Client
  const script = newScript()
  const call = async (on: Client, code: string, timeout = 60, language = "py") =>
    (await on.callTool({ name: "eval", arguments: { language, code, timeout } }, undefined, { timeout: 90_000 })) as ToolResult

  beforeAll(async () => {
    client = await connect(script)
    bare = await connect(undefined)
  }, 120_000)

  it("answers completion() and three parallel() branches by sampling, in order", async () => {
    const one = await call(client, "completion('hello there')")
    expect(one.isError).toBe(false)
    expect(text(one)).toBe("'answer to hello there'")
    expect(script.sampled[0]).toMatchObject({ prompt: "hello there", maxTokens: 4096 })
    expect(script.sampled[0]!.system).toContain("completion()")
    script.sampled.length = 0
    const many = await call(client, "parallel(*[completion.defer('q%d' % i) for i in range(3)])")
    expect(text(many)).toContain("['answer to q0', 'answer to q1', 'answer to q2']")
    expect(script.sampled.map((entry) => entry.prompt).sort()).toEqual(["q0", "q1", "q2"])
  })

  it("pauses the cell's timeout while the client's model answers", async () => {
    script.delayMs = 4_000
    try {
      const result = await call(client, "completion('slow one')", 2)
      expect(result.isError).toBe(false)
      expect(text(result)).toBe("'answer to slow one'")
    } finally {
      script.delayMs = 0
    }
  })

  it("sends the images a cell passes as image content", async () => {
    script.sampled.length = 0
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    const result = await call(client, `import base64\ncompletion('what is this', images=[base64.b64decode('${png}')])`)
    expect(text(result)).toBe("'answer to what is this'")
    expect(script.sampled[0]!.images).toEqual(["image image/png"])
    const js = await call(client, `await completion('and this', { images: [Buffer.from('${png}', 'base64')] })`, 60, "js")
    expect(text(js)).toBe("'answer to and this'")
    expect(script.sampled[1]!.images).toEqual(["image image/png"])
  })

  it("answers agent() with a system prompt naming a sub-agent's task, and refuses isolated= at once", async () => {
    script.sampled.length = 0
    expect(text(await call(client, "agent('count the rows')"))).toBe("'answer to count the rows'")
    expect(script.sampled[0]!.system).toContain("sub-agent")
    const refused = await call(client, "agent('x', isolated=True)")
    expect(refused.isError).toBe(true)
    expect(text(refused)).toContain("AgentOptionUnsupported")
    expect(script.sampled).toHaveLength(1)
  })

  it("gives input() the person's line, and EOFError with a sentence when they decline or cancel", async () => {
    script.elicit = { action: "accept", line: "forty-two" }
    const answered = await call(client, "name = input('Your name? ')\nname")
    expect(text(answered)).toContain("'forty-two'")
    expect(script.elicited[0]).toMatch(/veyyon session \w+ is waiting for a line of input.*Your name\?/)
    script.elicit = { action: "decline" }
    const declined = await call(client, "input('again? ')")
    expect(declined.isError).toBe(true)
    expect(text(declined)).toContain("EOFError")
    expect(text(declined)).toContain("declined")
    script.elicit = { action: "cancel" }
    expect(text(await call(client, "try:\n    input()\nexcept EOFError as e:\n    print('eof:', e)"))).toContain("eof: input() got no line: the person dismissed")
  })

  it("gives JavaScript's input() and Ruby's gets the person's line, and end of input on decline", async () => {
    script.elicit = { action: "accept", line: "from js" }
    expect(text(await call(client, "const got = await input('js? '); got.toUpperCase()", 60, "js"))).toContain("'FROM JS'")
    script.elicit = { action: "decline" }
    const declined = await call(client, "try { await input() } catch (error) { console.log(error.name, error.message) }", 60, "js")
    expect(text(declined)).toContain("EOFError input() got no line: the person declined")
    if (!rubyFound) return console.log("skipped Ruby's gets: no ruby on PATH (Debian: apt-get install ruby)")
    script.elicit = { action: "accept", line: "from ruby" }
    expect(text(await call(client, "line = gets\nputs line.end_with?(\"\\n\"), line.chomp.upcase", 60, "rb"))).toContain("true\nFROM RUBY")
    script.elicit = { action: "cancel" }
    expect(text(await call(client, "p gets", 60, "rb"))).toContain("nil")
  })

  it("refuses getpass at once, never as a form", async () => {
    const asked = script.elicited.length
    const result = await call(client, "import getpass\ngetpass.getpass('secret: ')")
    expect(result.isError).toBe(true)
    expect(text(result)).toContain("secret")
    expect(script.elicited).toHaveLength(asked)
  })

  it("tells a client without sampling or elicitation what it lacks, at once", async () => {
    const started = Date.now()
    const sampling = await call(bare, "completion('hi')")
    expect(sampling.isError).toBe(true)
    expect(text(sampling)).toContain("the MCP client does not offer sampling")
    const input = await call(bare, "try:\n    input('x')\nexcept EOFError as e:\n    print('eof:', e)")
    expect(text(input)).toContain("eof: input() got no line: the MCP client does not offer elicitation")
    expect(Date.now() - started).toBeLessThan(30_000)
  })

  it("cancels the client's sampling request when the waiting cell is cancelled; the kernel keeps its variables", async () => {
    await call(client, "kept = 7")
    script.hang = true
    const controller = new AbortController()
    const pending = client.callTool({ name: "eval", arguments: { language: "py", code: "completion('wait forever')" } }, undefined, { timeout: 90_000, signal: controller.signal })
      .catch((error: unknown) => error)
    await poll(() => (script.sampled.some((entry) => entry.prompt === "wait forever") ? true : undefined), 60_000, "the sampling request")
    controller.abort()
    await pending
    await poll(() => (script.cancelled.length > 0 ? true : undefined), 60_000, "the server's cancellation of the sampling request")
    script.hang = false
    expect(text(await call(client, "kept"))).toBe("7")
  })
}

describe.skipIf(!integrationEnabled() || python === undefined)(titled("host calls through veyyon mcp (stdio)", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 120_000 }, () => {
  const transports: Array<StdioClientTransport> = []
  afterAll(async () => {
    for (const transport of transports) {
      const pid = transport.pid
      await transport.close().catch(() => {})
      if (pid !== null && isAlive(pid)) process.kill(pid, "SIGKILL")
    }
  }, 30_000)
  hostCallCases(async (script) => {
    const transport = new StdioClientTransport({
      command: cliEntry.command,
      args: [...cliEntry.args, "mcp"],
      cwd: repoRoot,
      env: childEnv(tempDir("veyyon-mcp-host-calls-"), RUBY_ENV),
      stderr: "pipe"
    })
    transports.push(transport)
    const client = makeClient(script)
    await client.connect(transport, { timeout: 90_000 })
    return client
  })
})

describe.skipIf(!integrationEnabled() || python === undefined)(titled("host calls through veyyon mcp --http", skipReason(integrationOff(), python === undefined && "no python3 found")), { timeout: 120_000 }, () => {
  let server: McpChild | undefined
  let url: URL
  const clients: Array<Client> = []
  afterAll(async () => {
    for (const client of clients) await client.close().catch(() => {})
    await server?.kill()
  }, 30_000)
  hostCallCases(async (script) => {
    if (server === undefined) {
      server = startMcp(["mcp", "--http", "--port", "0"], { VEYYON_MCP_TOKEN: TOKEN, VEYYON_SANDBOX: "off", ...RUBY_ENV })
      url = new URL((await server.stderrMatch(/serving MCP \(streamable HTTP\) at (http:\S+)/, 90_000))[1]!)
    }
    const client = makeClient(script)
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }), { timeout: 90_000 })
    clients.push(client)
    return client
  })
})
