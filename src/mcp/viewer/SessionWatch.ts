/**
 * The viewer's picture of a door's sessions, kept as the cells happen: each open
 * session's client, languages, last activity and cells (code, output so far, how it
 * ended, its timing), and the people watching it. It is the door's `CellObserver`: a
 * cell's events are held while it runs and handed to every watcher at once; a finished
 * cell keeps its outputs as the notebook export writes them. What is held is bounded:
 * a session's newest `MAX_CELLS` cells, and outputs up to `MAX_SESSION_BYTES` per
 * session (older cells' outputs give way first and say so; the `.ipynb` export has them).
 */
import type { CellEventSchema, KernelOutput } from "../../kernel/KernelOutput.ts"
import { notebookOutputs, type NotebookOutput } from "../../services/output/SessionRecord.ts"
import type { EvalResult } from "../../services/tool/EvalTool.ts"
import type { CellObserver, CellWatch } from "../CellObserver.ts"
import { SOLE_TOKEN, type TokenIdentity } from "./ViewerAccess.ts"

/** One event of a running cell (every kernel event but its end). */
export type CellEvent = typeof CellEventSchema.Type

/** The most cells kept per session. */
export const MAX_CELLS = 200

/** The most output bytes (as JSON) kept per session, running cells' events included. */
export const MAX_SESSION_BYTES = 32 * 1024 * 1024

/** The most output bytes (as JSON) of one running cell held and streamed to its pages; the rest shows when it ends. */
export const MAX_LIVE_CELL_BYTES = 4 * 1024 * 1024

/** How a watched cell stands. */
export type CellState = "running" | "ok" | "error" | "cancelled" | "interrupted" | "timed out" | "killed" | "failed"

/** One cell as the viewer knows it. */
export interface WatchedCell {
  readonly n: number
  readonly language: string
  readonly title: string | undefined
  readonly code: string
  readonly startedAt: number
  endedAt: number | undefined
  state: CellState
  executionCount: number | undefined
  notice: string | undefined
  /** While running: its events so far. */
  events: Array<CellEvent>
  /** Once finished: its outputs as the notebook holds them. */
  outputs: ReadonlyArray<NotebookOutput>
  /** Its outputs were let go to keep the session within its budget. */
  dropped: boolean
  bytes: number
  readonly controller: AbortController
}

/** What a watcher of one session hears. */
export type WatchEvent =
  | { readonly _tag: "CellStarted"; readonly cell: WatchedCell }
  | { readonly _tag: "CellEvent"; readonly cell: WatchedCell; readonly event: CellEvent }
  | { readonly _tag: "CellOverflowed"; readonly cell: WatchedCell }
  | { readonly _tag: "CellEnded"; readonly cell: WatchedCell }
  | { readonly _tag: "SessionEnded" }

/** One open session as the viewer knows it. */
export interface WatchedSession {
  readonly id: string
  readonly client: string
  readonly owner: TokenIdentity
  readonly openedAt: number
  lastActivity: number
  readonly languages: Set<string>
  readonly cells: Array<WatchedCell>
  bytes: number
  nextCell: number
  readonly listeners: Set<(event: WatchEvent) => void>
}

/** The door's sessions as the viewer sees them, and the observer that keeps them current. */
export interface SessionWatch {
  readonly observer: CellObserver
  /** The open sessions, newest first. */
  readonly sessions: () => ReadonlyArray<WatchedSession>
  readonly session: (id: string) => WatchedSession | undefined
  /** Starts hearing a session's events; returns what stops it (undefined when the session is not open). */
  readonly listen: (id: string, listener: (event: WatchEvent) => void) => (() => void) | undefined
  /** Stops a running cell from the page (SIGINT; the agent's result says a person did it). Whether there was one to stop. */
  readonly interrupt: (sessionId: string, n: number) => boolean
}

const sizeOf = (value: unknown): number => JSON.stringify(value)?.length ?? 0

const paramsOf = (params: unknown): { readonly language: string; readonly code: string; readonly title: string | undefined } => {
  const record = typeof params === "object" && params !== null ? params as Record<string, unknown> : {}
  return {
    language: typeof record.language === "string" ? record.language.slice(0, 32) : "?",
    code: typeof record.code === "string" ? record.code : "",
    title: typeof record.title === "string" ? record.title.slice(0, 200) : undefined
  }
}

/** How a finished cell stands, from its result. */
export const stateOf = (result: EvalResult, byPerson: boolean): CellState => {
  if (result.killed) return "killed"
  if (result.timedOut) return "timed out"
  if (result.cancelled) return byPerson ? "interrupted" : "cancelled"
  return result.status
}

/** Lets go of the oldest finished cells' outputs until the session is within its budget. */
const trim = (session: WatchedSession) => {
  while (session.cells.length > MAX_CELLS && session.cells[0]!.state !== "running") {
    session.bytes -= session.cells.shift()!.bytes
  }
  for (const cell of session.cells) {
    if (session.bytes <= MAX_SESSION_BYTES) return
    if (cell.state === "running" || cell.dropped) continue
    session.bytes -= cell.bytes
    cell.bytes = 0
    cell.outputs = []
    cell.dropped = true
  }
}

/** A session watch; `now` is its clock, `ownerOf` the token identity that created a session. */
export const makeSessionWatch = (options: { readonly now?: () => number; readonly ownerOf?: (sessionId: string) => TokenIdentity } = {}): SessionWatch => {
  const now = options.now ?? Date.now
  const ownerOf = options.ownerOf ?? (() => SOLE_TOKEN)
  const open = new Map<string, WatchedSession>()

  const tell = (session: WatchedSession, event: WatchEvent) => {
    for (const listener of [...session.listeners]) listener(event)
  }

  const sessionFor = (id: string, client: string): WatchedSession => {
    let session = open.get(id)
    if (session === undefined) {
      session = { id, client: client.slice(0, 100), owner: ownerOf(id), openedAt: now(), lastActivity: now(), languages: new Set(), cells: [], bytes: 0, nextCell: 1, listeners: new Set() }
      open.set(id, session)
    }
    return session
  }

  const cell = (sessionId: string, params: unknown): CellWatch => {
    const session = sessionFor(sessionId, "unknown")
    const { language, code, title } = paramsOf(params)
    const controller = new AbortController()
    const watched: WatchedCell = {
      n: session.nextCell++,
      language,
      title,
      code,
      startedAt: now(),
      endedAt: undefined,
      state: "running",
      executionCount: undefined,
      notice: undefined,
      events: [],
      outputs: [],
      dropped: false,
      bytes: code.length,
      controller
    }
    session.languages.add(language)
    session.lastActivity = watched.startedAt
    session.cells.push(watched)
    session.bytes += watched.bytes
    trim(session)
    tell(session, { _tag: "CellStarted", cell: watched })
    return {
      signal: controller.signal,
      onEvent: (output: KernelOutput) => {
        if (output._tag === "Done") return
        const event: CellEvent = output
        session.lastActivity = now()
        if (watched.dropped) return
        const size = sizeOf(event)
        if (session.bytes + size > MAX_SESSION_BYTES || watched.bytes + size > MAX_LIVE_CELL_BYTES) {
          watched.dropped = true
          return tell(session, { _tag: "CellOverflowed", cell: watched })
        }
        watched.events.push(event)
        watched.bytes += size
        session.bytes += size
        tell(session, { _tag: "CellEvent", cell: watched, event })
      },
      finished: (ending) => {
        watched.endedAt = now()
        session.lastActivity = watched.endedAt
        session.bytes -= watched.bytes
        watched.events = []
        watched.dropped = false
        if ("result" in ending) {
          const result = ending.result
          watched.state = stateOf(result, controller.signal.aborted)
          watched.executionCount = result.executionCount > 0 ? result.executionCount : undefined
          watched.notice = result.notice
          watched.outputs = notebookOutputs(result.outputs, watched.executionCount ?? null)
        } else {
          watched.state = "failed"
          watched.notice = ending.failure
          watched.outputs = []
        }
        watched.bytes = code.length + sizeOf(watched.outputs)
        session.bytes += watched.bytes
        trim(session)
        tell(session, { _tag: "CellEnded", cell: watched })
      }
    }
  }

  return {
    observer: {
      opened: (sessionId, client) => void sessionFor(sessionId, client),
      ended: (sessionId) => {
        const session = open.get(sessionId)
        open.delete(sessionId)
        if (session !== undefined) tell(session, { _tag: "SessionEnded" })
      },
      cell
    },
    sessions: () => [...open.values()].reverse(),
    session: (id) => open.get(id),
    listen: (id, listener) => {
      const session = open.get(id)
      if (session === undefined) return undefined
      session.listeners.add(listener)
      return () => void session.listeners.delete(listener)
    },
    interrupt: (sessionId, n) => {
      const found = open.get(sessionId)?.cells.find((cell) => cell.n === n)
      if (found === undefined || found.state !== "running") return false
      found.controller.abort()
      return true
    }
  }
}
