/**
 * The viewer's HTTP routes under `/viewer`, handed to the HTTP door as a route prefix.
 *
 * `GET /viewer/?code=…` exchanges a valid link code for a viewer session cookie
 * (HttpOnly, SameSite=Strict, Path=/viewer) and moves the browser to the clean URL;
 * `POST /viewer/link` with the bearer token answers a fresh link. Every page, fragment,
 * event stream and export needs the cookie (401 with how to get in otherwise), and every
 * state-changing request an `Origin` exactly equal to the door's own (403 otherwise):
 * cookies are not port-scoped, so another localhost port is another origin here. Every
 * response carries a strict Content-Security-Policy and is never cached.
 */
import { Effect, Queue, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import stripAnsi from "strip-ansi"
import { notebookOutputs, type NotebookOutput } from "../../services/output/SessionRecord.ts"
import { mayView, type TokenIdentity } from "./ViewerAccess.ts"
import { FRAME_CSS, VIEWER_CSS, VIEWER_JS } from "./ViewerAssets.ts"
import { LINK_LIFETIME_TEXT, type ViewerAuth } from "./ViewerAuth.ts"
import { cellHtml, messagePage, outputHtml, sessionPage, sessionPath, sessionsPage, sessionsTable, VIEWER_PATH } from "./ViewerHtml.ts"
import type { CellEvent, SessionWatch, WatchedCell, WatchedSession, WatchEvent } from "./SessionWatch.ts"

/** The cookie holding a browser's viewer session. */
export const VIEWER_COOKIE = "veyyon_viewer"

/** The Content-Security-Policy of every viewer response. */
export const VIEWER_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/** The most events a slow page may have waiting before its stream is closed (its browser reconnects and catches up). */
const STREAM_BUFFER = 4096

/** How often an idle event stream says it is alive. */
const HEARTBEAT_MS = 15_000

/** What the viewer is built from. */
export interface ViewerOptions {
  /** The door's exact `scheme://host:port`, the one `Origin` a state-changing request may carry. */
  readonly origin: string
  readonly watch: SessionWatch
  readonly auth: ViewerAuth
  /** The token identity an `Authorization` header proves, if any. */
  readonly authenticate: (authorization: string | undefined) => TokenIdentity | undefined
  /** The memory a session's kernels hold now, in bytes, when it can be measured. */
  readonly memoryOf?: (sessionId: string) => Effect.Effect<number | undefined>
  /** A session as an nbformat 4 notebook. */
  readonly notebook: (sessionId: string) => Effect.Effect<Record<string, unknown>, { readonly message: string }>
  readonly now?: () => number
}

const SECURITY_HEADERS = {
  "content-security-policy": VIEWER_CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "cache-control": "no-store"
}

const htmlResponse = (status: number, html: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.text(html, { status, contentType: "text/html; charset=utf-8", headers: { ...SECURITY_HEADERS, ...headers } })

const GET_IN = `Open the viewer link the server printed at start, or get a fresh one: curl -X POST -H "Authorization: Bearer $VEYYON_MCP_TOKEN" <server>${VIEWER_PATH}/link`

const unauthorized = () => htmlResponse(401, messagePage("Sign-in needed", `This page needs a viewer session. ${GET_IN}`))

/** The URL of a viewer link. */
export const linkUrl = (origin: string, code: string): string => `${origin}${VIEWER_PATH}/?code=${code}`

/** The origin the page is served from for a door listening on `host`:`port` (a wildcard host is browsed as loopback). */
export const viewerOrigin = (host: string, port: number): string => {
  const browsed = host === "0.0.0.0" || host === "" ? "127.0.0.1" : host === "::" || host === "[::]" ? "::1" : host
  return `http://${browsed.includes(":") && !browsed.startsWith("[") ? `[${browsed}]` : browsed}:${port}`
}

/** A server-sent event. */
const sse = (event: string, data: unknown): Uint8Array => new TextEncoder().encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)

const OVERFLOW_HTML = `<p class="muted">More output follows; it shows here when the cell ends.</p>`

/** A running cell's events so far as notebook outputs. */
const runningOutputs = (cell: WatchedCell): ReadonlyArray<NotebookOutput> => (cell.state === "running" ? notebookOutputs(cell.events, null) : [])

/** One live event as what the page does with it: text appended, or a rich output added. */
const liveEvent = (cell: WatchedCell, event: CellEvent): Uint8Array | undefined => {
  if (event._tag === "Stdout" || event._tag === "Stderr") {
    return sse("text", { n: cell.n, stream: event._tag === "Stdout" ? "stdout" : "stderr", text: stripAnsi(event.text) })
  }
  const html = notebookOutputs([event], null).map(outputHtml).join("")
  return html.length === 0 ? undefined : sse("output", { n: cell.n, html })
}

/** The viewer's app: answers every request under `VIEWER_PATH`. */
export const makeViewer = (options: ViewerOptions) => {
  const now = options.now ?? Date.now
  const { watch, auth } = options

  const viewerOf = (request: HttpServerRequest.HttpServerRequest) => {
    const id = request.cookies[VIEWER_COOKIE]
    return id === undefined ? undefined : auth.viewerOf(id)
  }
  const sameOrigin = (request: HttpServerRequest.HttpServerRequest) => request.headers["origin"] === options.origin
  const foreignOrigin = () =>
    htmlResponse(403, messagePage("Refused", `This action is taken only from the viewer's own page (${options.origin}); the request came from another origin.`))
  const visible = (viewer: TokenIdentity, id: string) => {
    const session = watch.session(id)
    return session !== undefined && mayView(viewer, session.owner) ? session : undefined
  }
  const noSession = () => htmlResponse(404, messagePage("No such session", "That session has ended, or it is not one you may see."))

  const redeem = (code: string) => {
    const id = auth.redeem(code)
    if (id === undefined) {
      return Effect.succeed(htmlResponse(401, messagePage("Link expired", `This viewer link has expired or is not valid (a link works for ${LINK_LIFETIME_TEXT}). ${GET_IN}`)))
    }
    // A page of our own moves the browser on, so the SameSite=Strict cookie goes with it even when the link was opened from another site.
    const body = messagePage("Signed in", "Opening the sessions…").replace(
      "</head>",
      `<meta http-equiv="refresh" content="0;url=${VIEWER_PATH}/"></head>`
    )
    return HttpServerResponse.setCookie(htmlResponse(200, body), VIEWER_COOKIE, id, { httpOnly: true, sameSite: "strict", path: VIEWER_PATH }).pipe(
      Effect.orDie
    )
  }

  const newLink = (request: HttpServerRequest.HttpServerRequest) => {
    if (request.headers["origin"] !== undefined && !sameOrigin(request)) return foreignOrigin()
    const owner = options.authenticate(request.headers["authorization"])
    if (owner === undefined) {
      return HttpServerResponse.jsonUnsafe(
        { error: "Unauthorized: send Authorization: Bearer <token> (VEYYON_MCP_TOKEN, or the token the server printed at start)." },
        { status: 401, headers: { ...SECURITY_HEADERS, "www-authenticate": "Bearer" } }
      )
    }
    const minted = auth.mint(owner)
    return HttpServerResponse.jsonUnsafe(
      { url: linkUrl(options.origin, minted.code), expiresAt: new Date(minted.expiresAt).toISOString() },
      { headers: SECURITY_HEADERS }
    )
  }

  const events = (viewer: TokenIdentity, id: string) => {
    const session = visible(viewer, id)
    if (session === undefined) return noSession()
    const stream = Stream.callback<Uint8Array>((queue) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const send = (chunk: Uint8Array | undefined) => {
            if (chunk !== undefined && !Queue.offerUnsafe(queue, chunk)) Queue.endUnsafe(queue)
          }
          send(sse("index", session.cells.map((cell) => ({ n: cell.n, state: cell.state }))))
          for (const cell of session.cells) {
            if (cell.state === "running") send(sse("cell", { n: cell.n, html: cellHtml(id, cell, now(), runningOutputs(cell)) }))
          }
          const stop = watch.listen(id, (event: WatchEvent) => {
            switch (event._tag) {
              case "CellStarted":
              case "CellEnded":
                return send(sse("cell", { n: event.cell.n, html: cellHtml(id, event.cell, now(), runningOutputs(event.cell)) }))
              case "CellEvent":
                return send(liveEvent(event.cell, event.event))
              case "CellOverflowed":
                return send(sse("output", { n: event.cell.n, html: OVERFLOW_HTML }))
              case "SessionEnded":
                send(sse("ended", {}))
                return Queue.endUnsafe(queue)
            }
          })
          if (stop === undefined) {
            send(sse("ended", {}))
            Queue.endUnsafe(queue)
          }
          const heartbeat = setInterval(() => send(new TextEncoder().encode(": alive\n\n")), HEARTBEAT_MS)
          return () => {
            clearInterval(heartbeat)
            stop?.()
          }
        }),
        (release) => Effect.sync(release)
      ), { bufferSize: STREAM_BUFFER, strategy: "dropping" })
    return HttpServerResponse.stream(stream, { contentType: "text/event-stream", headers: { ...SECURITY_HEADERS, "x-accel-buffering": "no" } })
  }

  const exportNotebook = (viewer: TokenIdentity, id: string) =>
    Effect.suspend(() => {
      if (visible(viewer, id) === undefined) return Effect.succeed(noSession())
      return options.notebook(id).pipe(
        Effect.map((notebook) =>
          HttpServerResponse.text(JSON.stringify(notebook, null, 1) + "\n", {
            contentType: "application/x-ipynb+json",
            headers: { ...SECURITY_HEADERS, "content-disposition": `attachment; filename="${id.replace(/[^A-Za-z0-9_-]/g, "")}.ipynb"` }
          })
        ),
        Effect.catch((error) => Effect.succeed(htmlResponse(500, messagePage("Export failed", error.message))))
      )
    })

  const interrupt = (request: HttpServerRequest.HttpServerRequest, viewer: TokenIdentity, id: string, n: number) => {
    if (!sameOrigin(request)) return foreignOrigin()
    if (visible(viewer, id) === undefined) return noSession()
    watch.interrupt(id, n)
    return HttpServerResponse.redirect(sessionPath(id), { status: 303, headers: SECURITY_HEADERS })
  }

  const memoryOf = options.memoryOf ?? (() => Effect.succeed(undefined))
  /** The memory of each of `sessions`, by id (measured ones only). */
  const memories = (sessions: ReadonlyArray<WatchedSession>) =>
    Effect.map(Effect.forEach(sessions, (session) => Effect.map(memoryOf(session.id), (bytes) => [session.id, bytes] as const)), (pairs) =>
      new Map(pairs.filter((pair): pair is readonly [string, number] => pair[1] !== undefined)))
  const visibleSessions = (viewer: TokenIdentity) => watch.sessions().filter((session) => mayView(viewer, session.owner))

  /** Routes that need a viewer session: the lists and a session's page measure memory, the export reads the record; the rest answer at once. */
  const signedIn = (request: HttpServerRequest.HttpServerRequest, path: string, viewer: TokenIdentity): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    if (request.method !== "GET") return Effect.succeed(answerNow(request, path, viewer))
    if (path === "/" || path === "/list") {
      const sessions = visibleSessions(viewer)
      return Effect.map(memories(sessions), (memory) =>
        htmlResponse(200, path === "/" ? sessionsPage(sessions, now(), memory) : sessionsTable(sessions, now(), memory)))
    }
    const page = /^\/s\/([A-Za-z0-9_-]{1,128})$/.exec(path)
    const session = page === null ? undefined : visible(viewer, page[1]!)
    if (session !== undefined) {
      return Effect.map(memoryOf(session.id), (bytes) => htmlResponse(200, sessionPage(session, now(), runningOutputs, bytes)))
    }
    const notebook = /^\/s\/([A-Za-z0-9_-]{1,128})\/notebook\.ipynb$/.exec(path)
    return notebook !== null ? exportNotebook(viewer, notebook[1]!) : Effect.succeed(answerNow(request, path, viewer))
  }

  /** The routes that need a viewer session and answer at once. */
  const answerNow = (request: HttpServerRequest.HttpServerRequest, path: string, viewer: TokenIdentity) => {
    const method = request.method
    const match = /^\/s\/([A-Za-z0-9_-]{1,128})(\/events|\/interrupt\/(\d{1,9}))?$/.exec(path)
    if (match === null) return htmlResponse(404, messagePage("Not found", "The viewer has no such page."))
    const id = match[1]!
    const rest = match[2]
    if (rest === undefined && method === "GET") return noSession()
    if (rest === "/events" && method === "GET") return events(viewer, id)
    if (match[3] !== undefined && method === "POST") return interrupt(request, viewer, id, Number(match[3]))
    return htmlResponse(405, messagePage("Not allowed", `${method.slice(0, 16)} is not answered here.`))
  }

  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const url = new URL(request.url, "http://viewer")
    const path = url.pathname.slice(VIEWER_PATH.length)
    if (path === "") return HttpServerResponse.redirect(`${VIEWER_PATH}/${url.search}`, { status: 308, headers: SECURITY_HEADERS })
    if (request.method === "GET" && path === "/app.css") {
      return HttpServerResponse.text(VIEWER_CSS, { contentType: "text/css; charset=utf-8", headers: SECURITY_HEADERS })
    }
    if (request.method === "GET" && path === "/frame.css") {
      return HttpServerResponse.text(FRAME_CSS, { contentType: "text/css; charset=utf-8", headers: SECURITY_HEADERS })
    }
    if (request.method === "GET" && path === "/app.js") {
      return HttpServerResponse.text(VIEWER_JS, { contentType: "text/javascript; charset=utf-8", headers: SECURITY_HEADERS })
    }
    if (request.method === "POST" && path === "/link") return newLink(request)
    const code = url.searchParams.get("code")
    if (request.method === "GET" && path === "/" && code !== null) return yield* redeem(code)
    const viewer = viewerOf(request)
    if (viewer === undefined) return unauthorized()
    return yield* signedIn(request, path, viewer)
  })
}
