/**
 * What a watcher of a door's sessions sees (the viewer page): sessions opening and
 * ending, and each cell as it starts, streams and finishes, with a way to stop it.
 * `serveMcp` calls it when given one; the door's behaviour is unchanged without it.
 */
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import type { EvalResult } from "../services/tool/EvalTool.ts"

/** One cell as the watcher follows it. */
export interface CellWatch {
  /** Every event of the cell, as it happens. */
  readonly onEvent: (output: KernelOutput) => void
  /** Aborted when a person stops the cell from the watcher. */
  readonly signal: AbortSignal
  /** The cell ended: with its result, or with the sentence of a call that could not run. */
  readonly finished: (ending: { readonly result: EvalResult } | { readonly failure: string }) => void
}

/** A watcher of one door's sessions. */
export interface CellObserver {
  /** A client started a session (its kernel session id, the client's name). */
  readonly opened: (sessionId: string, client: string) => void
  /** The session ended (its kernels are shut down). */
  readonly ended: (sessionId: string) => void
  /** A cell of the session starts with these params (as the client sent them). */
  readonly cell: (sessionId: string, params: unknown) => CellWatch
}

/** The notice an agent's result carries when a person stopped its cell from the viewer page. */
export const PERSON_INTERRUPTED_NOTICE =
  "A person interrupted this cell from the viewer page; the kernel keeps running and keeps its state."

/** `result` with the notice that a person interrupted it, in its text and its `notice`. */
export const personInterrupted = (result: EvalResult): EvalResult => ({
  ...result,
  notice: PERSON_INTERRUPTED_NOTICE,
  text: result.text.length > 0 ? `${result.text}\n${PERSON_INTERRUPTED_NOTICE}` : PERSON_INTERRUPTED_NOTICE
})
