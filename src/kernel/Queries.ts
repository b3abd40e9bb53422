/**
 * Completion and inspection requests: answered by the runner beside a running cell, which
 * they neither wait for nor count as one. Each waits for its reply, the kernel's death or
 * the introspection timeout, whichever comes first.
 */
import { Deferred, Duration, Effect } from "effect"
import type { HostFrame } from "./Frame.ts"
import {
  type Completion,
  completionOf,
  type Inspection,
  inspectionOf,
  INTROSPECT_TIMEOUT,
  IntrospectionFailed,
  MAX_INTROSPECT_CODE,
  toCodePoints
} from "./Introspection.ts"
import { KernelClosed } from "./KernelError.ts"
import type { DeathCause } from "./Lifecycle.ts"
import type { QueryReply, RequestTable } from "./RequestTable.ts"

/** What queries need from their kernel. */
export interface QueryContext {
  readonly table: RequestTable
  readonly write: (frame: HostFrame) => Effect.Effect<void, KernelClosed>
  /** Writes an encoded line (a large one as bytes, built without a string). */
  readonly writeLine?: ((line: string | Uint8Array) => Effect.Effect<void, KernelClosed>) | undefined
  /** Whether the kernel can no longer answer. */
  readonly closed: () => boolean
  /** Completes when the kernel is dead. */
  readonly dead: Effect.Effect<DeathCause>
}

/** A kernel's `complete` and `inspect`. */
export interface Queries {
  readonly complete: (code: string, cursor?: number) => Effect.Effect<Completion, KernelClosed | IntrospectionFailed>
  readonly inspect: (code: string, cursor?: number, detailLevel?: 0 | 1) => Effect.Effect<Inspection, KernelClosed | IntrospectionFailed>
}

/** The queries of the kernel `context` describes. */
export const queries = (context: QueryContext): Queries => {
  const ask = <F extends QueryReply>(code: string, frame: (id: string) => HostFrame): Effect.Effect<F, KernelClosed | IntrospectionFailed> =>
    Effect.gen(function*() {
      if (code.length > MAX_INTROSPECT_CODE) {
        return yield* new IntrospectionFailed({ reason: `the code is longer than ${MAX_INTROSPECT_CODE} characters` })
      }
      if (context.closed()) return yield* new KernelClosed({ reason: "it was shut down" })
      const id = context.table.newId("q")
      const reply = yield* Deferred.make<QueryReply>()
      context.table.queries.set(id, reply)
      const ended = Effect.flatMap(context.dead, () => new KernelClosed({ reason: "it ended before answering" }))
      const answer = yield* context.write(frame(id)).pipe(
        Effect.andThen(Effect.raceFirst(Deferred.await(reply), ended)),
        Effect.timeoutOrElse({
          duration: INTROSPECT_TIMEOUT,
          orElse: () => Effect.fail(new IntrospectionFailed({ reason: `the kernel did not answer within ${Duration.format(INTROSPECT_TIMEOUT)}` }))
        }),
        Effect.ensuring(Effect.sync(() => context.table.queries.delete(id)))
      )
      if (answer.error !== undefined) return yield* new IntrospectionFailed({ reason: answer.error })
      return answer as F
    })

  return {
    complete: (code, cursor = code.length) =>
      ask<Extract<QueryReply, { type: "complete_reply" }>>(code, (id) => ({ type: "complete", id, code, cursorPos: toCodePoints(code, cursor) })).pipe(
        Effect.map((reply) => completionOf(code, reply))
      ),
    inspect: (code, cursor = code.length, detailLevel = 0) =>
      ask<Extract<QueryReply, { type: "inspect_reply" }>>(code, (id) => ({
        type: "inspect",
        id,
        code,
        cursorPos: toCodePoints(code, cursor),
        detailLevel
      })).pipe(Effect.map(inspectionOf))
  }
}
