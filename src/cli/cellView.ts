/**
 * How a running cell reaches the terminal. The cell's own output (its stdout, displays,
 * results) goes to stdout; what says it went wrong (its stderr, its traceback) and the
 * notices (error summary, cancellation, timeout, truncation) go to the error target,
 * stderr, as a Unix program's diagnostics do. On a terminal the interactive renderer's
 * streaming view is redrawn in place on stdout (its last lines, at most the screen's
 * height) and, once the cell ends, replaced by the cell's full retained output, its
 * errors and notices following on stderr. Anywhere else (a pipe, a file) text is written
 * to its stream as it arrives, and the notices follow at the end; nothing is ever redrawn.
 */
import stripAnsi from "strip-ansi"
import { colorAllowed, dumbTerminal } from "./color.ts"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { KernelOutput as Output } from "../kernel/KernelOutput.ts"
import { EXECUTION_PREVIEW_LINES } from "../render/Columns.ts"
import {
  type ExecutionView,
  finishExecution,
  pushExecutionOutput,
  renderExecutionView,
  startExecution
} from "../render/InteractiveRenderer.ts"
import type { TruncationInfo } from "../render/Notices.ts"
import { outputChunk, type RenderableOutput } from "../render/OutputText.ts"
import { renderStreamingView } from "../render/StreamingView.ts"
import type { EvalResult } from "../services/tool/EvalTool.ts"

/** Where a view writes, and what it knows about it. */
export interface ViewTarget {
  readonly write: (text: string) => void
  /** Redraw in place (an interactive terminal); otherwise append only. */
  readonly live: boolean
  readonly color: boolean
  /** The terminal's size, for the live region. */
  readonly columns?: number
  readonly rows?: number
}

/** Where a cell's stderr, traceback and notices go. */
export interface ErrorTarget {
  readonly write: (text: string) => void
  readonly color: boolean
}

/** Shows one cell: events while it runs, then its result. */
export interface CellView {
  readonly onEvent: (output: KernelOutput) => void
  /** Draws the finished cell; the live region, if any, is replaced. */
  readonly finish: (result: EvalResult) => void
  /** Removes the live region of a cell that ended without a result. */
  readonly abandon: () => void
}

/** The target for this process's stdout: live when it is a terminal, coloured unless `NO_COLOR` is set. */
export const stdoutTarget = (): ViewTarget => {
  const stdout = process.stdout
  const live = stdout.isTTY === true && !dumbTerminal()
  return {
    write: (text) => {
      stdout.write(text)
    },
    live,
    color: live && colorAllowed(stdout),
    ...(live ? { columns: stdout.columns, rows: stdout.rows } : {})
  }
}

/** The target for this process's stderr, coloured only on a terminal that allows it. */
export const stderrTarget = (): ErrorTarget => ({
  write: (text) => {
    process.stderr.write(text)
  },
  color: colorAllowed(process.stderr)
})

/** Whether an event belongs on the error target: the cell's stderr and its errors. */
export const isErrorOutput = (output: RenderableOutput): boolean => output._tag === "Stderr" || output._tag === "Error"

const REDRAW_INTERVAL_MS = 50
const EXPAND_HINT = /^… (\d+) more lines? \(ctrl\+o to expand\)$/

/** The renderer's expand hint, reworded for a terminal where the full output follows by itself. */
const cliHint = (line: string): string => {
  const match = EXPAND_HINT.exec(stripAnsi(line))
  if (match === null) return line
  const hidden = Number(match[1])
  return line.replace(/\(ctrl\+o to expand\)/, hidden === 1 ? "(shown when the cell ends)" : "(all shown when the cell ends)")
}

/** The `Done` event of a result, so the renderer sees how the cell ended. */
export const resultOutputs = (result: EvalResult): ReadonlyArray<RenderableOutput> => [
  ...result.outputs,
  Output.Done({
    status: result.status,
    executionCount: result.executionCount,
    cancelled: result.cancelled,
    timedOut: result.timedOut,
    killed: result.killed,
    ...(result.notice === undefined ? {} : { notice: result.notice })
  })
]

const truncationOf = (result: EvalResult): { readonly truncation?: TruncationInfo } =>
  result.truncation === undefined ? {} : { truncation: result.truncation }

/** A finished cell's lines for each stream: its own output for stdout; its stderr, traceback and notices for the error target. */
export interface FinishedLines {
  readonly out: ReadonlyArray<string>
  readonly err: ReadonlyArray<string>
}

const expandedBody = (outputs: ReadonlyArray<RenderableOutput>, color: boolean): ReadonlyArray<string> =>
  renderStreamingView(finishExecution(startExecution({ color }), outputs).view, { expanded: true, color })

/** The notices the interactive renderer draws under a finished cell (error summary, stop, truncation when `withTruncation`). */
export const noticeLines = (result: EvalResult, color: boolean, withTruncation: boolean): ReadonlyArray<string> => {
  const finished = finishExecution(startExecution({ color }), resultOutputs(result))
  const all = renderExecutionView(finished, { expanded: true, ...(withTruncation ? truncationOf(result) : {}) })
  return all.slice(renderStreamingView(finished.view, { expanded: true, color }).length)
}

/** The finished cell as the interactive renderer draws it, expanded and split by stream. */
export const finishedLines = (result: EvalResult, color: { readonly out: boolean; readonly err: boolean }): FinishedLines => ({
  out: expandedBody(result.outputs.filter((output) => !isErrorOutput(output)), color.out),
  err: [
    ...expandedBody(result.outputs.filter(isErrorOutput), color.err),
    ...noticeLines(result, color.err, true)
  ]
})

const writeLines = (write: (text: string) => void, lines: ReadonlyArray<string>) => {
  if (lines.length > 0) write(lines.join("\n") + "\n")
}

const liveView = (target: ViewTarget, errors: ErrorTarget): CellView => {
  let execution: ExecutionView = startExecution({ color: target.color })
  let drawn = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  const rows = Math.max(3, target.rows ?? EXECUTION_PREVIEW_LINES + 4)
  const previewLines = Math.min(EXECUTION_PREVIEW_LINES, rows - 3)
  const maxColumns = Math.max(20, (target.columns ?? 80) - 1)

  const erase = () => {
    if (drawn > 0) target.write(`\r\u001b[${drawn}A\u001b[J`)
    drawn = 0
  }
  const draw = () => {
    timer = undefined
    const lines = renderExecutionView(execution, { previewLines, maxColumns }).map(cliHint)
    erase()
    if (lines.length > 0) target.write(lines.join("\n") + "\n")
    drawn = lines.length
  }
  const cancelDraw = () => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
  }

  return {
    onEvent: (output) => {
      execution = pushExecutionOutput(execution, output)
      timer ??= setTimeout(draw, REDRAW_INTERVAL_MS)
    },
    finish: (result) => {
      cancelDraw()
      erase()
      const lines = finishedLines(result, { out: target.color, err: errors.color })
      writeLines(target.write, lines.out)
      writeLines(errors.write, lines.err)
    },
    abandon: () => {
      cancelDraw()
      erase()
    }
  }
}

/** Appends text to one stream, knowing whether it ends at a line start. */
const appender = (write: (text: string) => void, color: boolean) => {
  let atLineStart = true
  return {
    push: (output: RenderableOutput) => {
      const chunk = outputChunk(output, atLineStart, { color })
      if (chunk.length === 0) return
      write(chunk)
      atLineStart = chunk.endsWith("\n")
    },
    endLine: () => {
      if (!atLineStart) write("\n")
      atLineStart = true
    }
  }
}

const appendingView = (target: ViewTarget, errors: ErrorTarget): CellView => {
  const out = appender(target.write, target.color)
  const err = appender(errors.write, errors.color)
  return {
    onEvent: (output) => (isErrorOutput(output) ? err : out).push(output),
    finish: (result) => {
      out.endLine()
      err.endLine()
      writeLines(errors.write, noticeLines(result, errors.color, false))
    },
    abandon: () => {
      out.endLine()
      err.endLine()
    }
  }
}

/** A view of one cell: its output on `target`, its stderr, traceback and notices on `errors`. */
export const makeCellView = (target: ViewTarget, errors: ErrorTarget): CellView =>
  target.live ? liveView(target, errors) : appendingView(target, errors)
