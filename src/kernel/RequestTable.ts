/**
 * The requests a kernel has sent and not seen finish, and the routing of each runner frame
 * to the request it belongs to. A cell request carries one Deferred, `ended`: its `done`,
 * a reason to stop it (timeout, cancel), or the kernel's failure, whichever comes first.
 * Everything else about it (started, the `done` frame) is plain state set by the router,
 * with a wake-up signal made only when someone waits for it (the interrupt path).
 */
import { type Cause, Deferred, Effect, Exit, type FiberSet, type Scope } from "effect"
import type * as CellWatchdog from "./CellWatchdog.ts"
import {
  type CompleteReplyFrame,
  type DoneFrame,
  EGRESS_STATUS_OP,
  encodeHostLine,
  type InspectReplyFrame,
  type RestoreDoneFrame,
  type RunnerFrame,
  type SnapshotDoneFrame,
  STATUS_MIME
} from "./Frame.ts"
import type { KernelError } from "./KernelError.ts"
import { KernelOutput } from "./KernelOutput.ts"
import type { InterruptReason } from "./Lifecycle.ts"

/** How a cell's wait ended: its `done`, or a reason to stop it. */
export type CellEnding =
  | { readonly _tag: "finished"; readonly frame: DoneFrame }
  | { readonly _tag: "stop"; readonly reason: InterruptReason }

/** One request in flight. */
export interface CellRequest {
  readonly id: string
  /** Hands one output on (to the cell's handler). */
  readonly emit: (output: KernelOutput) => Effect.Effect<void>
  /** The cell handler's synchronous path (`OutputHandler.now`), when it has one; `offerNow` calls it. */
  now: ((output: KernelOutput) => boolean) | undefined
  /** Characters of stdout and stderr handed on so far. */
  textChars: number
  /** The first of: `done`, a reason to stop, a failure. */
  readonly ended: Deferred.Deferred<CellEnding, KernelError>
  /** The runner said the cell began; only then does SIGINT reach it. */
  started: boolean
  /** The cell's `done` frame, once it came. */
  done: DoneFrame | undefined
  /** Why the request failed, once it did. */
  failure: KernelError | undefined
  /** Completed at the next change of `started`, `done` or `failure`; made only while someone waits. */
  wake: Deferred.Deferred<void> | undefined
  /** The scope of the cell's bridge calls, made at the first one and closed when the cell ends. */
  bridgeScope: Scope.Closeable | undefined
  bridges: FiberSet.FiberSet | undefined
  watchdog: CellWatchdog.CellWatchdog | undefined
}

/** A request's ending as a stop for `reason`. */
export const stopBecause = (reason: InterruptReason): CellEnding => ({ _tag: "stop", reason })

const wakeUp = (request: CellRequest): void => {
  const wake = request.wake
  request.wake = undefined
  if (wake !== undefined) Deferred.doneUnsafe(wake, Exit.void)
}

/**
 * Hands stream text to the request's synchronous path: true when it took it, false when
 * there is none or it declined. A handler that throws ends the request with the defect.
 */
export const offerNow = (request: CellRequest, output: KernelOutput): boolean => {
  const now = request.now
  if (now === undefined) return false
  let taken: boolean
  try {
    taken = now(output)
  } catch (defect) {
    Deferred.doneUnsafe(request.ended, Exit.die(defect))
    return true
  }
  if (taken && (output._tag === "Stdout" || output._tag === "Stderr")) request.textChars += output.text.length
  return taken
}

/** Records that the runner began the request. */
export const markStarted = (request: CellRequest): void => {
  request.started = true
  wakeUp(request)
}

/** Records the request's `done` and wakes whoever waits on it. */
export const markDone = (request: CellRequest, frame: DoneFrame): void => {
  request.done = frame
  Deferred.doneUnsafe(request.ended, Exit.succeed({ _tag: "finished", frame }))
  wakeUp(request)
}

/** Ends a request with `error` (the kernel died or closed under it). */
export const failRequest = (request: CellRequest, error: KernelError): Effect.Effect<void> =>
  Effect.sync(() => {
    if (request.failure === undefined) request.failure = error
    Deferred.doneUnsafe(request.ended, Exit.fail(error))
    wakeUp(request)
  })

/** Ends a request's wait with a stop (timeout, cancel) now, from a callback; no effect once it ended. */
export const stopRequestNow = (request: CellRequest, reason: InterruptReason): void => {
  Deferred.doneUnsafe(request.ended, Exit.succeed(stopBecause(reason)))
}

/** Ends a request's wait with a stop (timeout, cancel); no effect once it ended. */
export const stopRequest = (request: CellRequest, reason: InterruptReason): Effect.Effect<void> =>
  Effect.sync(() => stopRequestNow(request, reason))

/** Ends a request's wait with the failure of its output handler. */
export const abortRequest = (request: CellRequest, cause: Cause.Cause<never>): Effect.Effect<void> =>
  Effect.sync(() => Deferred.doneUnsafe(request.ended, Exit.failCause(cause)))

/** Waits until `reached` holds of the request, failing with its failure if it fails first. */
export const awaitUntil = (request: CellRequest, reached: (request: CellRequest) => boolean): Effect.Effect<void, KernelError> =>
  Effect.suspend(() => {
    if (reached(request)) return Effect.void
    if (request.failure !== undefined) return Effect.fail(request.failure)
    const wake = request.wake ?? (request.wake = Deferred.makeUnsafe<void>())
    return Effect.andThen(Effect.interruptible(Deferred.await(wake)), awaitUntil(request, reached))
  })

/** The fields of an execute request line. */
export interface ExecuteFields {
  readonly code: string
  readonly silent?: boolean
  readonly storeHistory?: boolean
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string>>
}

/** The execute request line for request `id`. */
export const executeLine = (id: string, fields: ExecuteFields): string =>
  encodeHostLine({
    id,
    code: fields.code,
    silent: fields.silent ?? false,
    storeHistory: fields.storeHistory ?? true,
    ...(fields.cwd === undefined ? {} : { cwd: fields.cwd }),
    ...(fields.env === undefined ? {} : { env: { ...fields.env } })
  })

/** A reply to a complete or inspect request. */
export type QueryReply = CompleteReplyFrame | InspectReplyFrame

/** A snapshot or restore awaiting its end: the snapshot's chunks so far (decoded) and the deferred its end completes. */
export interface StateTransfer {
  readonly chunks: Array<Uint8Array>
  bytes: number
  /** The most payload bytes accepted before the transfer fails. */
  readonly maxBytes: number
  readonly ended: Deferred.Deferred<SnapshotDoneFrame | RestoreDoneFrame, string>
}

/** Requests sent and not finished, by id: the start-up requests go out together, cells one at a time. */
export class RequestTable {
  private readonly open = new Map<string, CellRequest>()
  /** Complete and inspect requests awaiting their reply, by id. */
  readonly queries = new Map<string, Deferred.Deferred<QueryReply>>()
  /** Snapshot and restore requests awaiting their end, by id. */
  readonly transfers = new Map<string, StateTransfer>()
  /** The newest open request: raw output of the process belongs to it. */
  current: CellRequest | undefined = undefined
  private nextId = 0

  /** A fresh id with `prefix` (`r` for cells, `q` for queries). */
  newId(prefix: string): string {
    return `${prefix}${++this.nextId}`
  }

  /** Opens a cell request whose outputs go to `emit`. */
  add(emit: (output: KernelOutput) => Effect.Effect<void>): CellRequest {
    const request: CellRequest = {
      id: this.newId("r"),
      emit,
      now: undefined,
      textChars: 0,
      ended: Deferred.makeUnsafe<CellEnding, KernelError>(),
      started: false,
      done: undefined,
      failure: undefined,
      wake: undefined,
      bridgeScope: undefined,
      bridges: undefined,
      watchdog: undefined
    }
    this.open.set(request.id, request)
    this.current = request
    return request
  }

  /** Closes a request: frames for it are dropped from now on. */
  remove(request: CellRequest): void {
    this.open.delete(request.id)
    if (this.current === request) this.current = undefined
  }

  /** The open request with `id`. */
  get(id: string): CellRequest | undefined {
    return this.open.get(id)
  }
}

/** What the router hands back to the kernel. */
export interface FrameHandlers {
  /** A cell's `done` arrived; runs before anyone waiting on the request wakes. */
  readonly onDone: (request: CellRequest, frame: DoneFrame) => Effect.Effect<void>
  /** A cell asked the host something. */
  readonly onBridge: (request: CellRequest, frame: Extract<RunnerFrame, { type: "bridge" }>) => Effect.Effect<void>
}

const statusOf = (bundle: Readonly<Record<string, unknown>>): { op: string; fields: Record<string, unknown> } | undefined => {
  const status = bundle[STATUS_MIME]
  if (typeof status !== "object" || status === null || Array.isArray(status)) return undefined
  const { op, ...fields } = status as Record<string, unknown>
  return typeof op === "string" ? { op, fields } : undefined
}

const watchdogControl = (request: CellRequest, fields: Record<string, unknown>): Effect.Effect<void> => {
  const watchdog = request.watchdog
  if (watchdog === undefined) return Effect.void
  return fields.action === "pause" ? watchdog.pause : fields.action === "resume" ? watchdog.resume : Effect.void
}

const routeTransfer = (
  table: RequestTable,
  frame: Extract<RunnerFrame, { type: "snapshot_chunk" | "snapshot_done" | "restore_done" }>
): Effect.Effect<void> => {
  const transfer = table.transfers.get(frame.id)
  if (transfer === undefined) return Effect.logDebug(`dropped a ${frame.type} for ${frame.id}, which nobody awaits`)
  if (frame.type !== "snapshot_chunk") return Effect.sync(() => Deferred.doneUnsafe(transfer.ended, Exit.succeed(frame)))
  return Effect.sync(() => {
    const chunk = Buffer.from(frame.data, "base64")
    transfer.bytes += chunk.length
    if (transfer.bytes > transfer.maxBytes) {
      transfer.chunks.length = 0
      Deferred.doneUnsafe(transfer.ended, Exit.fail(`the runner sent more than the ${transfer.maxBytes} bytes the snapshot may hold`))
    } else {
      transfer.chunks.push(chunk)
    }
  })
}

/** Routes each runner frame to its request (or query), dropping, with a log line, those nobody awaits. */
export const frameRouter = (table: RequestTable, handlers: FrameHandlers) => (frame: RunnerFrame): Effect.Effect<void> => {
  if (frame.type === "complete_reply" || frame.type === "inspect_reply") {
    const query = table.queries.get(frame.id)
    return query === undefined
      ? Effect.logDebug(`dropped a ${frame.type} for ${frame.id}, which nobody awaits`)
      : Effect.asVoid(Deferred.succeed(query, frame))
  }
  if (frame.type === "snapshot_chunk" || frame.type === "snapshot_done" || frame.type === "restore_done") {
    return routeTransfer(table, frame)
  }
  if ((frame.type === "error" || frame.type === "done") && typeof frame.id === "string" && table.transfers.has(frame.id)) {
    const transfer = table.transfers.get(frame.id)!
    return frame.type === "done"
      ? Effect.void
      : Effect.sync(() => Deferred.doneUnsafe(transfer.ended, Exit.fail(`${frame.ename}: ${frame.evalue}`)))
  }
  if (frame.type === "error" && (frame.id === undefined || frame.id === null)) {
    return Effect.logWarning(`runner reported an error outside any request: ${frame.ename}: ${frame.evalue}`)
  }
  const request = typeof frame.id === "string" ? table.get(frame.id) : undefined
  if (request === undefined) {
    return frame.type === "started"
      ? Effect.void
      : Effect.logDebug(`dropped a ${frame.type} frame for request ${frame.id}, which is not running`)
  }
  switch (frame.type) {
    case "started":
      return Effect.sync(() => markStarted(request))
    case "stdout":
      return request.emit(KernelOutput.Stdout({ text: frame.data }))
    case "stderr":
      return request.emit(KernelOutput.Stderr({ text: frame.data }))
    case "result":
      return request.emit(KernelOutput.Result({ bundle: frame.bundle }))
    case "error":
      return request.emit(KernelOutput.Error({ ename: frame.ename, evalue: frame.evalue, traceback: frame.traceback }))
    case "display": {
      const status = statusOf(frame.bundle)
      if (status === undefined) return request.emit(KernelOutput.Display({ bundle: frame.bundle }))
      if (status.op === EGRESS_STATUS_OP) {
        return Effect.logDebug(`dropped an egress status event the cell of request ${request.id} sent: only the egress proxy reports egress`)
      }
      const control = status.op === "timeout" ? watchdogControl(request, status.fields) : Effect.void
      return Effect.andThen(control, request.emit(KernelOutput.Status(status)))
    }
    case "done":
      return Effect.andThen(handlers.onDone(request, frame), Effect.sync(() => markDone(request, frame)))
    case "bridge":
      return handlers.onBridge(request, frame)
  }
}
