/**
 * Completion and inspection (Jupyter's `complete_request` and `inspect_request`): what
 * they answer, their bounds, and the translation between the host's UTF-16 offsets and
 * the code-point offsets the runners count in.
 */
import { Duration, Schema } from "effect"
import { MimeBundle } from "./Frame.ts"

/** The longest code a request may carry, in UTF-16 units (the runners also cap it). */
export const MAX_INTROSPECT_CODE = 1 << 20
/** The most matches a completion returns. */
export const MAX_COMPLETIONS = 500
/** The longest match kept. */
export const MAX_MATCH_CHARS = 1000
/** The longest inspection text kept. */
export const MAX_INSPECT_CHARS = 65536
/** How long the host waits for an answer (a `__dir__` or getter that never returns). */
export const INTROSPECT_TIMEOUT = Duration.seconds(10)

/** Completions for the token before the cursor; a match replaces `code.slice(cursorStart, cursorEnd)`. */
export const Completion = Schema.Struct({
  matches: Schema.Array(Schema.String),
  /** UTF-16 offsets into the request's code. */
  cursorStart: Schema.Finite,
  cursorEnd: Schema.Finite
})

/** Completions for the token before the cursor. */
export type Completion = typeof Completion.Type

/** What the name at the cursor is; `bundle["text/plain"]` is the runner's help text (`obj?`) when `found`. */
export const Inspection = Schema.Struct({ found: Schema.Boolean, bundle: MimeBundle })

/** What the name at the cursor is. */
export type Inspection = typeof Inspection.Type

/** A completion or inspection could not be answered. */
export class IntrospectionFailed extends Schema.TaggedError<IntrospectionFailed>()("IntrospectionFailed", { reason: Schema.String }) {
  override get message(): string {
    return `completion/inspection failed: ${this.reason}`
  }
}

/** The code-point offset of UTF-16 offset `utf16` in `text` (clamped to the text). */
export const toCodePoints = (text: string, utf16: number): number => {
  const end = Math.max(0, Math.min(text.length, Math.trunc(utf16)))
  let points = 0
  for (let index = 0; index < end; index++) {
    const unit = text.charCodeAt(index)
    if (unit < 0xdc00 || unit > 0xdfff || index === 0 || text.charCodeAt(index - 1) < 0xd800 || text.charCodeAt(index - 1) > 0xdbff) points++
  }
  return points
}

/** The UTF-16 offset of code-point offset `points` in `text` (clamped to the text). */
export const toUtf16 = (text: string, points: number): number => {
  let index = 0
  for (let seen = 0; seen < points && index < text.length; seen++) {
    const unit = text.charCodeAt(index)
    index += unit >= 0xd800 && unit <= 0xdbff && index + 1 < text.length ? 2 : 1
  }
  return index
}

const clip = (text: string, limit: number): string => (text.length <= limit ? text : text.slice(0, limit - 1) + "…")

/** A runner's completion reply, bounded and in the host's offsets. */
export const completionOf = (
  code: string,
  reply: { readonly matches: ReadonlyArray<string>; readonly cursorStart: number; readonly cursorEnd: number }
): Completion => {
  const end = toUtf16(code, reply.cursorEnd)
  return {
    matches: reply.matches.slice(0, MAX_COMPLETIONS).map((match) => clip(match, MAX_MATCH_CHARS)),
    cursorStart: Math.min(toUtf16(code, reply.cursorStart), end),
    cursorEnd: end
  }
}

/** A runner's inspection reply, bounded to its text. */
export const inspectionOf = (reply: { readonly found: boolean; readonly bundle: MimeBundle }): Inspection => {
  const text = reply.bundle["text/plain"]
  return reply.found && typeof text === "string"
    ? { found: true, bundle: { "text/plain": clip(text, MAX_INSPECT_CHARS) } }
    : { found: false, bundle: {} }
}
