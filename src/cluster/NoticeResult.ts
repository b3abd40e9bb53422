/**
 * Results the cluster makes up itself: the answer to a call that must not run (its cell
 * was lost with its runner, or it already ran), a "busy" answer, and a notice added to a
 * real result (the session was re-homed).
 */
import { KernelOutput } from "../kernel/KernelOutput.ts"
import { SinkOutput, windowOutputs } from "../services/output/OutputSink.ts"
import type { WindowResult } from "../services/output/TextWindow.ts"
import { renderOutputsAsText } from "../render/ToolRenderer.ts"
import type { EvalResult } from "../services/tool/EvalTool.ts"
import type { EvalLanguage } from "../services/config/Settings.ts"
import { defaultBackendId } from "../backends/index.ts"

const paramsField = (params: unknown, key: string): string | undefined => {
  if (typeof params !== "object" || params === null) return undefined
  const value = (params as Record<string, unknown>)[key]
  return typeof value === "string" ? value : undefined
}

/** An error result carrying `notice` (and, when given, an error the agent reads as the cell's), for a cell that did not run. */
export const noticeResult = (
  params: unknown,
  notice: string,
  error?: { readonly ename: string; readonly evalue: string }
): EvalResult => {
  const title = paramsField(params, "title")
  const outcome = { status: "error" as const, executionCount: 0, cancelled: false, timedOut: false, killed: false, notice }
  const outputs = error === undefined ? [] : [KernelOutput.Error({ ename: error.ename, evalue: error.evalue, traceback: [] })]
  return {
    language: (paramsField(params, "language") ?? defaultBackendId()) as EvalLanguage,
    ...(title === undefined ? {} : { title }),
    status: "error",
    cancelled: false,
    timedOut: false,
    killed: false,
    executionCount: 0,
    outputs,
    text: renderOutputsAsText([...outputs, KernelOutput.Done(outcome)]),
    images: [],
    ...(error === undefined ? {} : { error: { ...error, traceback: [] } }),
    artifactIds: [],
    notice,
    durationMs: 0
  }
}

/** The sentence of a call refused because the session runs another cell of its language. */
export const BUSY_NOTICE =
  "this session is busy: another cell of this language is still running in it. Wait for that cell's result (or cancel it) and send this cell again; it did not run."

/** The answer to an `Execute` while another cell of the session in the same language runs. */
export const busyResult = (params: unknown): EvalResult =>
  noticeResult(params, BUSY_NOTICE, { ename: "SessionBusy", evalue: "another cell of this language is running in this session" })

/** `result` with `notice` put first (in `notice` and at the head of `text`). */
export const withNotice = (result: EvalResult, notice: string): EvalResult => ({
  ...result,
  notice: result.notice === undefined ? notice : `${notice} ${result.notice}`,
  text: result.text.length === 0 ? notice : `${notice}\n${result.text}`
})

/**
 * `result` (a lost cell's answer, which has no outputs of its own) with the outputs the
 * caller saw stream before the loss, bounded like any result: past the budgets a head and
 * a tail with a marker between them, since the rest was only on the lost runner.
 */
export const withStreamedOutputs = (result: EvalResult, streamed: WindowResult<SinkOutput>): EvalResult => {
  const outputs: Array<SinkOutput> = []
  if (streamed._tag === "Whole") windowOutputs(streamed.entries, outputs)
  else {
    windowOutputs(streamed.head, outputs)
    outputs.push(SinkOutput.TextOmitted({
      text: `… [${streamed.cut.omittedBytes} bytes omitted; the full output was lost with its runner]`,
      omittedBytes: streamed.cut.omittedBytes,
      omittedLines: streamed.cut.omittedLines,
      artifactUri: ""
    }))
    windowOutputs(streamed.rest, outputs)
  }
  if (outputs.length === 0) return result
  const all = [...outputs, ...result.outputs]
  const outcome = { status: result.status, executionCount: result.executionCount, cancelled: false, timedOut: false, killed: false, notice: result.notice ?? "" }
  return { ...result, outputs: all, text: renderOutputsAsText([...all, KernelOutput.Done(outcome)]) }
}
