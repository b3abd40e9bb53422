/**
 * The viewer's pages as HTML, built on the server. Everything a cell or a client sent is
 * escaped; a `text/html` output goes into an `<iframe sandbox>` (no scripts, no same
 * origin) through `srcdoc`; an SVG is shown as an image, so its scripts never run; PNG
 * and JPEG data is shown only when it is plain base64.
 */
import { escapeUTF8 as escape } from "entities"
import stripAnsi from "strip-ansi"
import type { NotebookOutput } from "../../services/output/SessionRecord.ts"
import type { WatchedCell, WatchedSession } from "./SessionWatch.ts"

/** The path the viewer is served under. */
export const VIEWER_PATH = "/viewer"

/** What a sandboxed HTML output starts with: the viewer's stylesheet for outputs. */
const FRAME_HEAD = `<!doctype html><meta charset="utf-8"><link rel="stylesheet" href="${VIEWER_PATH}/frame.css">`

/** The URL of a session's page. */
export const sessionPath = (id: string): string => `${VIEWER_PATH}/s/${encodeURIComponent(id)}`

const BASE64 = /^[A-Za-z0-9+/\s]*={0,2}\s*$/

/** A duration as a person reads it: `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 10 min`. */
export const duration = (ms: number): string => {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`
  const seconds = Math.floor(ms / 1000)
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${String(seconds % 60).padStart(2, "0")} s`
  return `${Math.floor(seconds / 3600)} h ${String(Math.floor(seconds / 60) % 60).padStart(2, "0")} min`
}

/** A size as a person reads it: `812 KiB`, `143 MiB`, `2.1 GiB`. */
export const size = (bytes: number): string => {
  if (bytes < 1024 * 1024) return `${Math.max(0, Math.round(bytes / 1024))} KiB`
  if (bytes < 1024 ** 3) return `${Math.round(bytes / 1024 / 1024)} MiB`
  return `${(bytes / 1024 ** 3).toFixed(1)} GiB`
}

const ago = (ms: number): string => (ms < 1000 ? "just now" : `${duration(ms)} ago`)

const textOf = (value: unknown): string =>
  typeof value === "string" ? value : Array.isArray(value) ? value.join("") : JSON.stringify(value, null, 1) ?? ""

const pre = (className: string, text: string) => `<pre class="${className}">${escape(stripAnsi(text))}</pre>`

const image = (mime: string, base64: string, alt: string) => `<img class="figure" alt="${escape(alt)}" src="data:${mime};base64,${base64.replace(/\s/g, "")}">`

const LINE_TAGS = /<(tr|p|br|li|h[1-6]|div)\b/gi

/** A sandboxed frame cannot size itself (no scripts): its height in pixels is guessed from the lines its HTML would take, within bounds (a person can drag it taller). */
export const frameHeight = (html: string): number => {
  const head = html.slice(0, 200_000)
  const lines = head.match(LINE_TAGS)?.length ?? head.split("\n").length
  return Math.min(480, Math.max(60, 32 + 26 * lines))
}

/** One rich bundle as HTML: the richest representation the page shows safely. */
const bundleHtml = (data: Readonly<Record<string, unknown>>): string => {
  for (const mime of ["image/png", "image/jpeg"]) {
    const value = data[mime]
    if (typeof value === "string" && BASE64.test(value)) return image(mime, value, textOf(data["text/plain"] ?? "figure"))
  }
  const svg = data["image/svg+xml"]
  if (svg !== undefined) return image("image/svg+xml", Buffer.from(textOf(svg), "utf8").toString("base64"), "SVG figure")
  const html = data["text/html"]
  if (html !== undefined) {
    const source = textOf(html)
    return `<iframe class="html" sandbox="" referrerpolicy="no-referrer" title="HTML output" height="${frameHeight(source)}" srcdoc="${escape(FRAME_HEAD + source)}"></iframe>`
  }
  for (const mime of ["text/markdown", "text/latex", "text/plain"]) {
    if (data[mime] !== undefined) return pre("plain", textOf(data[mime]))
  }
  const json = Object.keys(data).find((mime) => mime.endsWith("json"))
  if (json !== undefined) return pre("plain", JSON.stringify(data[json], null, 2) ?? "")
  const kinds = Object.keys(data).map((mime) => mime.slice(0, 80)).join(", ")
  return `<p class="muted">(an output of a kind this page does not show: ${escape(kinds)})</p>`
}

/** One notebook output as HTML. */
export const outputHtml = (output: NotebookOutput): string => {
  switch (output.output_type) {
    case "stream":
      return pre(output.name === "stderr" ? "stderr" : "stdout", textOf(output.text))
    case "display_data":
    case "execute_result":
      return `<div class="rich">${bundleHtml((output.data ?? {}) as Record<string, unknown>)}</div>`
    case "error": {
      const traceback = Array.isArray(output.traceback) ? output.traceback.map(String).join("\n") : ""
      return `<div class="error">${pre("traceback", traceback.length > 0 ? traceback : `${textOf(output.ename)}: ${textOf(output.evalue)}`)}</div>`
    }
    default:
      return ""
  }
}

const STATE_LABEL: Readonly<Record<WatchedCell["state"], string>> = {
  running: "running",
  ok: "ok",
  error: "error",
  cancelled: "cancelled",
  interrupted: "interrupted from this page",
  "timed out": "timed out",
  killed: "kernel killed",
  failed: "could not run"
}

/** The interrupt button of a running cell (a form, so it works without the script too). */
const interruptForm = (sessionId: string, cell: WatchedCell) =>
  `<form method="post" action="${escape(sessionPath(sessionId))}/interrupt/${cell.n}" class="interrupt"><button type="submit">Interrupt</button></form>`

/** One cell: its header (number, language, state, timing), its code and its outputs (for a running cell, its events so far as outputs). */
export const cellHtml = (sessionId: string, cell: WatchedCell, now: number, runningOutputs: ReadonlyArray<NotebookOutput> = []): string => {
  const running = cell.state === "running"
  const count = cell.executionCount === undefined ? "" : ` [${cell.executionCount}]`
  const timing = running
    ? `<span class="elapsed" data-started="${cell.startedAt}">${duration(now - cell.startedAt)}</span>`
    : duration((cell.endedAt ?? now) - cell.startedAt)
  const outputs = running ? runningOutputs : cell.outputs
  return [
    `<section class="cell state-${cell.state.replace(" ", "-")}" id="cell-${cell.n}" data-n="${cell.n}" data-state="${cell.state}">`,
    `<header><span class="n">#${cell.n}${count}</span> <span class="lang">${escape(cell.language)}</span>`,
    cell.title === undefined ? "" : ` <span class="title">${escape(cell.title)}</span>`,
    ` <span class="state">${STATE_LABEL[cell.state]}</span> <span class="timing">${timing}</span>`,
    running ? interruptForm(sessionId, cell) : "",
    `</header>`,
    pre("code", cell.code),
    `<div class="outputs">${outputs.map(outputHtml).join("")}</div>`,
    !cell.dropped ? "" : running
      ? `<p class="muted">More output follows; it shows here when the cell ends.</p>`
      : `<p class="muted">Some of this cell's output is no longer held here; the .ipynb export has it.</p>`,
    cell.notice === undefined ? "" : `<p class="notice">${escape(cell.notice)}</p>`,
    `</section>`
  ].join("")
}

/** A whole page: the stylesheet and the script from this server only. */
export const page = (title: string, body: string, bodyAttributes = ""): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">` +
  `<title>${escape(title)}</title><link rel="stylesheet" href="${VIEWER_PATH}/app.css"><script src="${VIEWER_PATH}/app.js" defer></script></head>` +
  `<body${bodyAttributes}>${body}</body></html>`

/** A page that only says something (a refusal, a missing session). */
export const messagePage = (title: string, sentence: string): string =>
  page(title, `<main><h1>${escape(title)}</h1><p>${escape(sentence)}</p></main>`)

/** What a session is doing now, in a few words. */
export const sessionState = (session: WatchedSession, now: number): string => {
  const running = session.cells.filter((cell) => cell.state === "running")
  if (running.length === 0) return "idle"
  return running.map((cell) => `running #${cell.n} for <span class="elapsed" data-started="${cell.startedAt}">${duration(now - cell.startedAt)}</span>`).join(", ")
}

const memoryText = (bytes: number | undefined): string => (bytes === undefined ? `<span class="muted">–</span>` : size(bytes))

/** The table of sessions (the list page's body, refreshed by the script). */
export const sessionsTable = (sessions: ReadonlyArray<WatchedSession>, now: number, memory: ReadonlyMap<string, number> = new Map()): string => {
  if (sessions.length === 0) return `<p class="muted">No sessions are open. An MCP client's session appears here once it connects.</p>`
  const rows = sessions.map((session) =>
    `<tr><td><a href="${escape(sessionPath(session.id))}">${escape(session.client)}</a><div class="id">${escape(session.id)}</div></td>` +
    `<td>${escape([...session.languages].join(", ") || "none yet")}</td><td>${sessionState(session, now)}</td>` +
    `<td>${session.cells.length}</td><td>${memoryText(memory.get(session.id))}</td><td>${ago(now - session.lastActivity)}</td></tr>`
  )
  return `<table class="sessions"><thead><tr><th>Session</th><th>Languages</th><th>State</th><th>Cells</th><th>Kernel memory</th><th>Last activity</th></tr></thead><tbody>${rows.join("")}</tbody></table>`
}

/** The list of sessions. */
export const sessionsPage = (sessions: ReadonlyArray<WatchedSession>, now: number, memory: ReadonlyMap<string, number> = new Map()): string =>
  page(
    "veyyon sessions",
    `<header class="top"><h1>veyyon</h1><span class="muted">sessions of this server</span></header><main><div id="sessions" data-refresh="${VIEWER_PATH}/list">${sessionsTable(sessions, now, memory)}</div></main>`,
    ` data-now="${now}"`
  )

/** One session: its cells in order, streaming while they run. */
export const sessionPage = (
  session: WatchedSession,
  now: number,
  runningOutputs: (cell: WatchedCell) => ReadonlyArray<NotebookOutput>,
  memory?: number
): string => {
  const base = sessionPath(session.id)
  const cells = session.cells.map((cell) => cellHtml(session.id, cell, now, runningOutputs(cell))).join("")
  return page(
    `${session.client} · veyyon`,
    `<header class="top"><a href="${VIEWER_PATH}/">← sessions</a><h1>${escape(session.client)}</h1>` +
      `<span class="muted id">${escape(session.id)}</span>` +
      (memory === undefined ? "" : `<span class="muted">kernel memory ${size(memory)}</span>`) +
      `<a class="export" href="${escape(base)}/notebook.ipynb" download>Download .ipynb</a></header>` +
      `<main><div id="cells">${cells.length > 0 ? cells : `<p class="muted empty">No cells yet.</p>`}</div>` +
      `<p id="live" class="muted">connecting…</p></main>`,
    ` data-events="${escape(base)}/events" data-now="${now}"`
  )
}
