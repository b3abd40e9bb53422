/**
 * Sessions as notebooks: every cell a session runs (source, outputs, execution count,
 * language, and the destinations its sandbox's egress proxy allowed or refused, as the
 * cell's `veyyon.egress` metadata in the notebook) is kept in the session's state directory, one JSON file per cell, and a
 * session exports as a valid nbformat 4 notebook (images as PNG/JPEG outputs, cut text
 * with the artifact:// link that holds all of it).
 *
 * Cells live in `<session dir>/cells/` (the directory `sessionArtifactsDir` names), mode
 * 0700, checked to be ours and not a symlink. Each process appends a session's cells, one
 * JSON line each, to a journal of its own there (`cells-….jsonl`, created exclusively,
 * 0600, without following links, replaced by a fresh one past 8 MiB), kept open. Lines are
 * built and written together at most `RECORD_FLUSH_MS` after the first of them was
 * recorded, one write per journal, so a cell's result does not wait for its line (a cell
 * holding 32 MiB of images took about 185 ms) and cells back to back share a write instead
 * of paying one each; reading, closing and the layer's end write what is waiting first. A line cut short by a crash is
 * skipped when reading. Older `cell-….json` files (one cell each) are
 * still read.
 */
import { Context, Data, Effect, Layer, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { STATUS_MIME } from "../../kernel/Frame.ts"
import { sessionArtifactsDir } from "./ArtifactStore.ts"
import { EXCLUSIVE_CREATE, writeFileAtomically } from "../storage/AtomicFile.ts"
import type { EgressRecord } from "../isolation/egress/EgressReport.ts"
import type { SinkOutput } from "./OutputSink.ts"
import { ensurePrivateDirSync, PRIVATE_FILE_MODE } from "../storage/PrivateDir.ts"
import { backendOf, defaultBackendId } from "../../backends/index.ts"
import { type EvalLanguage, Settings } from "../config/Settings.ts"

/** One nbformat 4 output, as stored and exported. */
export type NotebookOutput = Readonly<Record<string, unknown>>

/** One cell as the session ran it. */
export interface RecordedCell {
  readonly language: EvalLanguage
  readonly source: string
  readonly executionCount: number | null
  readonly outputs: ReadonlyArray<NotebookOutput>
  /** The destinations the cell's kernel asked the egress proxy for (`sandbox.network: allowlist`), in order. */
  readonly egress?: ReadonlyArray<EgressRecord>
}

const RecordedCellSchema = Schema.Struct({
  language: Schema.String.pipe(
    Schema.refine((id): id is EvalLanguage => backendOf(id) !== undefined, { message: "not a registered backend" })
  ),
  source: Schema.String,
  executionCount: Schema.NullOr(Schema.Number),
  outputs: Schema.Array(Schema.Record(Schema.String, Schema.Unknown)),
  egress: Schema.optionalKey(Schema.Array(Schema.Struct({
    outcome: Schema.Literals(["allowed", "refused", "failed"]),
    host: Schema.String,
    port: Schema.Number,
    via: Schema.String,
    reason: Schema.optionalKey(Schema.String)
  })))
})
const decodeCell = Schema.decodeUnknownResult(Schema.fromJsonString(RecordedCellSchema))
const decodeJournalLine = Schema.decodeUnknownResult(
  Schema.fromJsonString(RecordedCellSchema.pipe(Schema.fieldsAssign({ at: Schema.Number, n: Schema.Number })))
)

/** The session's record could not be read or written. */
export class SessionRecordError extends Data.TaggedError("SessionRecordError")<{ readonly path: string; readonly reason: string }> {
  override get message(): string {
    return `cannot use the session record at ${this.path}: ${this.reason}`
  }
}

/** The directory a session's cells are kept in. */
export const sessionCellsDir = (artifactsRoot: string, sessionId: string): string =>
  path.join(sessionArtifactsDir(artifactsRoot, sessionId), "cells")

const isJsonMime = (mime: string) => /^application\/(.*\+)?json$/.test(mime)

const mimeData = (bundle: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const data: Record<string, unknown> = {}
  for (const [mime, value] of Object.entries(bundle)) {
    if (mime === STATUS_MIME) continue
    data[mime] = isJsonMime(mime) || typeof value === "string" ? value : JSON.stringify(value)
  }
  return data
}

const stream = (name: "stdout" | "stderr", text: string): NotebookOutput => ({ output_type: "stream", name, text })

/** A cell's outputs as nbformat outputs: streams merged, status events dropped, cut text with its artifact link. */
export const notebookOutputs = (
  outputs: ReadonlyArray<SinkOutput>,
  executionCount: number | null,
  notice?: string
): Array<NotebookOutput> => {
  const result: Array<NotebookOutput> = []
  const push = (output: NotebookOutput) => {
    const last = result[result.length - 1]
    if (output.output_type === "stream" && last?.output_type === "stream" && last.name === output.name) {
      result[result.length - 1] = { ...last, text: String(last.text) + String(output.text) }
    } else result.push(output)
  }
  for (const output of outputs) {
    switch (output._tag) {
      case "Stdout":
        push(stream("stdout", output.text))
        break
      case "Stderr":
        push(stream("stderr", output.text))
        break
      case "Display": {
        const data = mimeData(output.bundle)
        if (Object.keys(data).length > 0) push({ output_type: "display_data", data, metadata: {} })
        break
      }
      case "Result":
        push({ output_type: "execute_result", execution_count: executionCount, data: mimeData(output.bundle), metadata: {} })
        break
      case "Error":
        push({ output_type: "error", ename: output.ename, evalue: output.evalue, traceback: [...output.traceback] })
        break
      case "TextOmitted":
      case "OutputsOmitted":
        push(stream("stdout", output.text.endsWith("\n") ? output.text : output.text + "\n"))
        break
      case "Status":
        break
    }
  }
  if (notice !== undefined) push(stream("stderr", notice + "\n"))
  return result
}

const cellId = () => randomBytes(4).toString("hex")

/**
 * An nbformat 4.5 notebook of the cells. Its kernel is `language`'s (default: the first
 * cell's); cells in another language become raw cells that keep their source and say
 * their language in their metadata.
 */
export const notebookOf = (cells: ReadonlyArray<RecordedCell>, language?: EvalLanguage): Record<string, unknown> => {
  const kernel = language ?? cells[0]?.language ?? defaultBackendId()
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { ...backendOf(kernel)?.notebook, veyyon: { exported: new Date().toISOString() } },
    cells: cells.map((cell) =>
      cell.language === kernel
        ? {
          cell_type: "code",
          id: cellId(),
          metadata: cell.egress === undefined ? {} : { veyyon: { egress: cell.egress } },
          execution_count: cell.executionCount,
          source: cell.source,
          outputs: cell.outputs
        }
        : { cell_type: "raw", id: cellId(), metadata: { veyyon: { language: cell.language } }, source: cell.source }
    )
  }
}

const failWith = (where: string) => (error: unknown) =>
  new SessionRecordError({ path: where, reason: error instanceof Error ? error.message : String(error) })

const CELL_FILE = /^cell-(\d{15})-(\d{6})-[0-9a-f]{8}\.json$/
const JOURNAL_FILE = /^cells-\d{15}-\d+-[0-9a-f]{8}\.jsonl$/
/** A journal past this size is left for a fresh one. */
const JOURNAL_ROTATE_BYTES = 8 * 1024 * 1024
/** The largest cell file read back (a cell's retained output is bounded far below it). */
const MAX_CELL_FILE_BYTES = 64 * 1024 * 1024

/** A regular file's text, read without following a link; undefined when it is not one or is too large to be ours. */
const readCellFile = (file: string): string | undefined => {
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
  try {
    const stat = fs.fstatSync(fd)
    return !stat.isFile() || stat.size > MAX_CELL_FILE_BYTES ? undefined : fs.readFileSync(fd, "utf8")
  } finally {
    fs.closeSync(fd)
  }
}

/** The session record service. */
export interface SessionRecordService {
  /** Keeps one finished cell of a session (appended to its journal right after the caller's turn, in order; `cells` sees it). */
  readonly record: (sessionId: string, cell: RecordedCell) => Effect.Effect<void, SessionRecordError>
  /** The session's cells in the order they ran (none for a session that ran nothing). */
  readonly cells: (sessionId: string) => Effect.Effect<ReadonlyArray<RecordedCell>, SessionRecordError>
  /** The session as an nbformat 4 notebook (see `notebookOf`). */
  readonly notebook: (sessionId: string, language?: EvalLanguage) => Effect.Effect<Record<string, unknown>, SessionRecordError>
  /** Writes the session's notebook to `file` (created, or replaced atomically). */
  readonly exportNotebook: (sessionId: string, file: string, language?: EvalLanguage) => Effect.Effect<void, SessionRecordError>
  /** Closes the session's journal (the cells stay on disk; a later cell opens a new journal). */
  readonly close: (sessionId: string) => Effect.Effect<void>
}

/** One session's journal in this process: its open file and how much it holds. */
interface Journal {
  readonly dir: string
  fd: number | undefined
  size: number
}

/** How long a recorded cell's line may wait, in milliseconds, for the lines of the cells after it. */
export const RECORD_FLUSH_MS = 10

const journalName = () =>
  `cells-${String(Date.now()).padStart(15, "0")}-${process.pid}-${randomBytes(4).toString("hex")}.jsonl`

/** Appends `lines` to the journal, opening a fresh file first when it has none or the one it has is full. */
const append = (journal: Journal, lines: string): void => {
  if (journal.fd !== undefined && journal.size >= JOURNAL_ROTATE_BYTES) closeJournalFile(journal)
  if (journal.fd === undefined) {
    journal.fd = fs.openSync(path.join(journal.dir, journalName()), EXCLUSIVE_CREATE | fs.constants.O_APPEND, PRIVATE_FILE_MODE)
    journal.size = 0
  }
  const data = Buffer.from(lines, "utf8")
  for (let at = 0; at < data.length;) at += fs.writeSync(journal.fd, data, at)
  journal.size += data.length
}

const closeJournalFile = (journal: Journal): void => {
  const fd = journal.fd
  journal.fd = undefined
  if (fd !== undefined) {
    try {
      fs.closeSync(fd)
    } catch {
      // nothing more to do with it
    }
  }
}

const makeSessionRecord = Effect.gen(function*() {
  const settings = yield* Settings
  /** When the last cell was recorded (never earlier than the one before) and how many were: a line's place in the order. */
  let lastAt = 0
  let recorded = 0
  /** Directories already made and checked, so a cell costs no directory probes. */
  const readyDirs = new Set<string>()
  const journals = new Map<string, Journal>()
  const failures = new Map<string, string>()

  const closeJournal = (sessionId: string) => {
    const journal = journals.get(sessionId)
    journals.delete(sessionId)
    if (journal !== undefined) closeJournalFile(journal)
  }
  /** Cells to append, in the order they were recorded, and the timer that will write them. */
  let waiting: Array<{ readonly sessionId: string; readonly journal: Journal; readonly entry: object }> = []
  let flushTimer: ReturnType<typeof setTimeout> | undefined
  const writeWaiting = () => {
    const entries = waiting
    waiting = []
    if (flushTimer !== undefined) clearTimeout(flushTimer)
    flushTimer = undefined
    const byJournal = new Map<Journal, { sessionId: string; lines: string }>()
    for (const { sessionId, journal, entry } of entries) {
      const line = JSON.stringify(entry) + "\n"
      const known = byJournal.get(journal)
      if (known === undefined) byJournal.set(journal, { sessionId, lines: line })
      else known.lines += line
    }
    for (const [journal, { sessionId, lines }] of byJournal) {
      try {
        append(journal, lines)
      } catch (error) {
        closeJournalFile(journal)
        failures.set(sessionId, error instanceof Error ? error.message : String(error))
      }
    }
  }
  yield* Effect.addFinalizer(() => Effect.sync(() => {
    writeWaiting()
    ;[...journals.keys()].forEach(closeJournal)
  }))

  /** Queues the cell's line for the session's journal: written with the lines recorded in the next `RECORD_FLUSH_MS`. */
  const record = (sessionId: string, cell: RecordedCell) =>
    Effect.suspend(() => {
      const known = journals.get(sessionId)
      const dir = known?.dir ?? sessionCellsDir(settings.artifactsDir, sessionId)
      try {
        if (!readyDirs.has(dir)) {
          ensurePrivateDirSync(dir)
          readyDirs.add(dir)
        }
      } catch (error) {
        return Effect.fail(failWith(dir)(error))
      }
      const journal = known ?? { dir, fd: undefined, size: 0 }
      if (known === undefined) journals.set(sessionId, journal)
      lastAt = Math.max(lastAt, Date.now())
      const entry = { at: lastAt, n: ++recorded, ...cell }
      if (flushTimer === undefined) {
        flushTimer = setTimeout(writeWaiting, RECORD_FLUSH_MS)
      }
      waiting.push({ sessionId, journal, entry })
      return Effect.void
    })

  const cells = (sessionId: string) => {
    const dir = sessionCellsDir(settings.artifactsDir, sessionId)
    const failed = Effect.suspend(() => {
      writeWaiting()
      const reason = failures.get(sessionId)
      return reason === undefined ? Effect.void : Effect.fail(new SessionRecordError({ path: dir, reason: `a cell could not be recorded: ${reason}` }))
    })
    return Effect.andThen(failed, Effect.try({
      try: () => {
        if (!fs.existsSync(dir)) return []
        ensurePrivateDirSync(dir)
        const found: Array<{ readonly at: number; readonly n: number; readonly cell: RecordedCell }> = []
        const names = fs.readdirSync(dir).filter((name) => CELL_FILE.test(name) || JOURNAL_FILE.test(name)).sort()
        for (const name of names) {
          const text = readCellFile(path.join(dir, name))
          if (text === undefined) continue
          const single = CELL_FILE.exec(name)
          if (single !== null) {
            const decoded = decodeCell(text)
            if (decoded._tag === "Success") found.push({ at: Number(single[1]), n: Number(single[2]), cell: decoded.success })
            continue
          }
          for (const line of text.split("\n")) {
            if (line.length === 0) continue
            const decoded = decodeJournalLine(line)
            if (decoded._tag === "Success") {
              const { at, n, ...cell } = decoded.success
              found.push({ at, n, cell })
            }
          }
        }
        return found.sort((a, b) => a.at - b.at || a.n - b.n).map((entry) => entry.cell)
      },
      catch: failWith(dir)
    }))
  }

  const notebook = (sessionId: string, language?: EvalLanguage) => Effect.map(cells(sessionId), (all) => notebookOf(all, language))

  const exportNotebook = (sessionId: string, file: string, language?: EvalLanguage) =>
    Effect.flatMap(notebook(sessionId, language), (document) =>
      Effect.try({
        try: () => writeFileAtomically(path.resolve(file), JSON.stringify(document, null, 1) + "\n", { mode: 0o644, sync: true }),
        catch: failWith(path.resolve(file))
      }))

  return {
    record,
    cells,
    notebook,
    exportNotebook,
    close: (sessionId) => Effect.sync(() => {
      writeWaiting()
      closeJournal(sessionId)
    })
  } satisfies SessionRecordService
})

/** Each session's cells, kept and exported as a notebook. */
export class SessionRecord extends Context.Service<SessionRecord, SessionRecordService>()("veyyon-eval/SessionRecord") {
  /** The record under the settings' artifacts directory. */
  static readonly layer: Layer.Layer<SessionRecord, never, Settings> = Layer.effect(SessionRecord, makeSessionRecord)
}
