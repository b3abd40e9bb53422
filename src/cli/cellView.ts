/**
 * How a running cell reaches the terminal. On a terminal the interactive renderer's
 * streaming view is redrawn in place (its last lines, at most the screen's height) and,
 * once the cell ends, replaced by the cell's full retained output and its notices.
 * Anywhere else (a pipe, a file) text is written as it arrives, and the notices follow
 * at the end; nothing is ever redrawn.
 */
import stripAnsi from "strip-ansi"
import { colorAllowed } from "./color.ts"
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
import type { EvalResult } from "../services/EvalTool.ts"

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
  const live = stdout.isTTY === true && process.env.TERM !== "dumb"
  return {
    write: (text) => {
      stdout.write(text)
    },
    live,
    color: live && colorAllowed(stdout),
    ...(live ? { columns: stdout.columns, rows: stdout.rows } : {})
  }
}

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

/** The finished cell as the interactive renderer draws it, expanded: every retained line, then the notices. */
export const finishedLines = (result: EvalResult, color: boolean): ReadonlyArray<string> =>
  renderExecutionView(finishExecution(startExecution({ color }), resultOutputs(result)), {
    expanded: true,
    ...truncationOf(result)
  })

const liveView = (target: ViewTarget): CellView => {
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
      const lines = finishedLines(result, target.color)
      if (lines.length > 0) target.write(lines.join("\n") + "\n")
    },
    abandon: () => {
      cancelDraw()
      erase()
    }
  }
}

const appendingView = (target: ViewTarget): CellView => {
  let atLineStart = true
  return {
    onEvent: (output) => {
      const chunk = outputChunk(output, atLineStart, { color: target.color })
      if (chunk.length === 0) return
      target.write(chunk)
      atLineStart = chunk.endsWith("\n")
    },
    finish: (result) => {
      if (!atLineStart) target.write("\n")
      atLineStart = true
      const finished = finishExecution(startExecution({ color: target.color }), resultOutputs(result))
      const body = renderStreamingView(finished.view, { expanded: true, color: target.color })
      const notices = renderExecutionView(finished, { expanded: true }).slice(body.length)
      if (notices.length > 0) target.write(notices.join("\n") + "\n")
    },
    abandon: () => {
      if (!atLineStart) target.write("\n")
      atLineStart = true
    }
  }
}

/** A view of one cell on `target`. */
export const makeCellView = (target: ViewTarget): CellView => (target.live ? liveView(target) : appendingView(target))
