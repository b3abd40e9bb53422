/**
 * The displays, results and status events of one cell past its result's count, saved as
 * JSON lines to one `outputs-….jsonl` artifact. Writing it can fail (a full disk): nothing
 * more is written then, and the note says why.
 */
import { Effect } from "effect"
import type { KernelOutput } from "../../kernel/KernelOutput.ts"
import type { ArtifactWriter } from "./ArtifactStore.ts"

/** What the result says where the omitted outputs were. */
export interface OmittedNote {
  readonly text: string
  readonly count: number
  /** The artifact's URI, or "" when it could not be created. */
  readonly artifactUri: string
}

/** The omitted outputs of one cell. */
export interface OmittedOutputs {
  /** Saves one more output; the first opens the artifact. */
  readonly add: (output: KernelOutput) => Effect.Effect<void>
  /** Closes the artifact; a failure then shows in the note too. */
  readonly close: Effect.Effect<void>
  /** The note that stands in the result where they were, for a result keeping at most `kept`. */
  readonly note: (kept: number) => OmittedNote
}

/** The omitted outputs of one cell, written to the artifact `open` creates; `opened` hears its id. */
export const makeOmittedOutputs = (
  open: Effect.Effect<ArtifactWriter, { readonly message: string }>,
  opened: (id: string) => void
): OmittedOutputs => {
  let count = 0
  let writer: ArtifactWriter | undefined
  let uri = ""
  let error: string | undefined

  const fail = (failure: { readonly message: string }) =>
    Effect.suspend(() => {
      error = failure.message
      const failed = writer
      writer = undefined
      return failed === undefined ? Effect.void : Effect.ignore(failed.close)
    })

  const lineOf = (output: KernelOutput): string => {
    try {
      return JSON.stringify(output)
    } catch (cause) {
      return JSON.stringify({ _tag: output._tag, unserializable: String(cause) })
    }
  }

  const add = Effect.fnUntraced(function*(output: KernelOutput) {
    if (count++ === 0) {
      const created = yield* Effect.result(open)
      if (created._tag === "Failure") return yield* fail(created.failure)
      writer = created.success
      uri = writer.uri
      opened(writer.id)
    }
    if (writer === undefined) return
    yield* Effect.catch(writer.append(`${lineOf(output)}\n`), fail)
  })

  const close = Effect.suspend(() => {
    const open = writer
    writer = undefined
    return open === undefined ? Effect.void : Effect.catch(open.close, (failure) => Effect.sync(() => (error = failure.message)))
  })

  const note = (kept: number): OmittedNote => {
    const where = error === undefined ? `omitted outputs: ${uri}` : `they could not be saved: ${error}`
    return {
      text: `… [${count} more output${count === 1 ? "" : "s"} omitted: a result keeps at most ${kept} displays and status events; ${where}]`,
      count,
      artifactUri: uri
    }
  }

  return { add, close, note }
}
