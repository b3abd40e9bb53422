/**
 * One simulated agent of the cluster soak: an MCP client of a `veyyon mcp --cluster --http`
 * door, its own session there, sending cells one at a time, Python and JavaScript in turn.
 * Each call has its own id; its cell appends `id\n` to the agent's counter file (a path
 * relative to the door's cwd, which the runners allow) and writes kv key `id`. An answer
 * is recorded as it came and never sent again, whatever it says.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ALREADY_RAN_NOTICE, LOST_CELL_NOTICE, REHOMED_NOTICE } from "../../dist/cluster/LedgerDecision.js"

/** How long an agent waits for one answer before it counts the call unanswered. */
export const CALL_TIMEOUT_MS = 150_000

/** What an answer said. */
export type Outcome =
  | "ok"
  | "rehomed"
  | "lost"
  | "already-ran"
  | "database-did-not-run"
  | "database-may-have-run"
  | "failed"
  | "unanswered"

/** One call and its answer. */
export interface CallRecord {
  readonly id: string
  readonly language: "py" | "js"
  readonly sentAt: number
  answeredAt: number
  outcome: Outcome
  runner: string | undefined
  detail: string
}

/** An agent's state, read by the soak as it runs and checked at the end. */
export interface Agent {
  readonly index: number
  readonly counterFile: string
  readonly calls: Array<CallRecord>
  /** The kv keys whose write a successful answer acknowledged. */
  readonly acknowledged: Array<string>
  /** The runner of the agent's latest answer. */
  lastRunner: string | undefined
}

interface StructuredResult {
  readonly status?: string
  readonly notice?: string
  readonly runner?: string
  readonly text?: string
}

/** The cell of call `id`: append the id, hold for `holdMs` (so a fault can land mid-cell), write kv key `id`. */
const cellCode = (language: "py" | "js", file: string, id: string, holdMs: number): string =>
  language === "py"
    ? `import time\nwith open(${JSON.stringify(file)}, "a") as f:\n    f.write(${JSON.stringify(`${id}\n`)})\ndel f\ntime.sleep(${holdMs / 1000})\nkv.set(${JSON.stringify(id)}, 1)\nprint("done")`
    : `require("node:fs").appendFileSync(${JSON.stringify(file)}, ${JSON.stringify(`${id}\n`)});\nawait new Promise((resolve) => setTimeout(resolve, ${holdMs}));\nawait kv.set(${JSON.stringify(id)}, 1);\nconsole.log("done")`

/** The snapshot notice of a cell that ran in a new kernel (the session's entity restarted, on its runner or another). */
const FRESH_KERNEL = /^this cell ran in a new (py|js) kernel/

/** What a tool result says about its call (the notices are the runners' own sentences). */
export const classify = (result: Readonly<Record<string, unknown>>): { readonly outcome: Outcome; readonly runner: string | undefined; readonly detail: string } => {
  const structured = result.structuredContent as StructuredResult | undefined
  const text = structured?.text ?? ((result.content as Array<{ text?: string }> | undefined)?.[0]?.text ?? "")
  const runner = structured?.runner
  const notice = structured?.notice ?? ""
  if (structured === undefined) {
    if (/could not be reached for .*did not run/s.test(text)) return { outcome: "database-did-not-run", runner, detail: text }
    if (/could not be reached for .*may have run/s.test(text)) return { outcome: "database-may-have-run", runner, detail: text }
    return { outcome: "failed", runner, detail: text }
  }
  if (notice.startsWith(LOST_CELL_NOTICE)) return { outcome: "lost", runner, detail: notice }
  if (notice.startsWith(ALREADY_RAN_NOTICE)) return { outcome: "already-ran", runner, detail: notice }
  if (structured.status !== "ok" || !/\bdone\b/.test(text)) return { outcome: "failed", runner, detail: `${structured.status}: ${text.slice(0, 400)}` }
  if (notice.startsWith(REHOMED_NOTICE) || FRESH_KERNEL.test(notice)) return { outcome: "rehomed", runner, detail: notice }
  if (notice !== "") return { outcome: "failed", runner, detail: `an unexpected notice: ${notice}` }
  return { outcome: "ok", runner, detail: "" }
}

/** A connected agent: `run` loops until `until()` is false (`pause()`: ms a cell holds, and ms between calls), `readKv` reads its kv keys back, `close` ends its session. */
export interface RunningAgent {
  readonly agent: Agent
  readonly run: (until: () => boolean, pause: () => number) => Promise<void>
  readonly readKv: () => Promise<Set<string> | string>
  readonly close: () => Promise<void>
}

/** Connects agent `index` to the door at `url`. */
export const connectAgent = async (index: number, url: URL, token: string): Promise<RunningAgent> => {
  const client = new Client({ name: `soak-agent-${index}`, version: "0.0.0" })
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${token}` } } }), { timeout: 60_000 })
  const agent: Agent = { index, counterFile: `agent-${index}.calls`, calls: [], acknowledged: [], lastRunner: undefined }
  const call = (language: "py" | "js", code: string) =>
    client.callTool({ name: "eval", arguments: { language, code } }, undefined, { timeout: CALL_TIMEOUT_MS })
  const once = async (n: number, holdMs: number) => {
    const language = n % 2 === 0 ? "py" : "js"
    const id = `a${index}-c${n}`
    const record: CallRecord = { id, language, sentAt: Date.now(), answeredAt: 0, outcome: "unanswered", runner: undefined, detail: "" }
    agent.calls.push(record)
    try {
      const answer = classify(await call(language, cellCode(language, agent.counterFile, id, holdMs)))
      Object.assign(record, answer)
      if (answer.runner !== undefined) agent.lastRunner = answer.runner
      if (answer.outcome === "ok" || answer.outcome === "rehomed") agent.acknowledged.push(id)
    } catch (error) {
      record.detail = String(error)
    }
    record.answeredAt = Date.now()
  }
  const run = async (until: () => boolean, pause: () => number) => {
    for (let n = 0; until(); n++) {
      await once(n, pause())
      await new Promise((resolve) => setTimeout(resolve, pause()))
    }
  }
  const readKv = async () => {
    const result = await call("py", "import json\nprint('KEYS' + json.dumps(sorted(kv.list())))")
    const structured = result.structuredContent as StructuredResult | undefined
    if (structured?.status !== "ok") return `reading kv failed: ${JSON.stringify(result.content).slice(0, 400)}`
    const text = structured.text ?? ""
    const at = text.indexOf("KEYS[")
    return at < 0 ? `reading kv printed ${JSON.stringify(text.slice(0, 400))}` : new Set(JSON.parse(text.slice(at + 4)) as Array<string>)
  }
  return { agent, run, readKv, close: () => client.close() }
}
