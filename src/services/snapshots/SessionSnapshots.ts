/**
 * Saving a session's state after its cells and restoring it into the next fresh kernel.
 *
 * After a finished cell the request for a snapshot is sent once the session has had no
 * new cell for a moment (`every-cell`: `SNAPSHOT_SETTLE_MS`; `idle`: `SNAPSHOT_IDLE_MS`): a
 * session whose cells come back to back is saved when they pause, not after each (a request
 * per cell costs a write to the runner and the runner's work, which the next cell would
 * only make it drop). A cell that starts drops the request waiting; one already sent is
 * yielded by the runner to that cell. The wait for the payload and the write to the store
 * go on in the background, off the answer's path. Writes of one session and language
 * happen in the order their snapshots were asked for; an older one never replaces a
 * newer, and none lands after the session's snapshots were forgotten. Shutting down sends
 * the requests still waiting. A fresh kernel of a session with a stored snapshot gets it
 * before its first cell, when its seal holds (see `SnapshotSeal`); the notice says what
 * came back, as of which cell, and what did not.
 */
import { Duration, Effect, Fiber, FiberSet, Result, type Scope, Semaphore } from "effect"
import { inFlight } from "../../kernel/Lifecycle.ts"
import type * as Kernel from "../../kernel/Kernel.ts"
import { SNAPSHOT_IDLE_MS, SNAPSHOT_SETTLE_MS, type SnapshotMode } from "../config/Settings.ts"
import { cellTitleOf, failedNotice, refusedNotice, restoredNotice } from "./SnapshotNotice.ts"
import { openMeta, payloadProblem, sealMeta, SNAPSHOT_FORMAT, type SnapshotMeta } from "./SnapshotSeal.ts"
import type { SnapshotStoreService } from "./SnapshotStore.ts"

/** Whose state: a session's kernels of one language share one snapshot. */
export interface SnapshotPlace {
  readonly sessionId: string
  readonly language: string
}

/** What a restore into a fresh kernel came to: the notice for the next cell, and whether the kernel must be replaced by an empty one. */
export interface RestoreResult {
  readonly notice: string | undefined
  readonly replace: boolean
}

/** The cell a snapshot follows. */
export interface FinishedCell {
  readonly executionCount: number
  readonly code: string
}

/** A session's snapshots, for the registry. */
export interface SessionSnapshots {
  /** A cell of `place` is about to run (a snapshot request waiting for the session to settle is dropped). */
  readonly cellStarting: (place: SnapshotPlace) => void
  /** Asks `kernel` for a snapshot after `cell` once the session settles; returns at once. */
  readonly afterCell: (place: SnapshotPlace, kernel: Kernel.Kernel, cell: FinishedCell) => Effect.Effect<void>
  /** Restores `place`'s stored snapshot into a fresh `kernel`, if there is one. */
  readonly restoreInto: (place: SnapshotPlace, kernel: Kernel.Kernel) => Effect.Effect<RestoreResult>
  /** Forgets `sessionId`'s snapshots (of `language`, or all), and any still being saved. */
  readonly forget: (sessionId: string, language?: string) => Effect.Effect<void>
  /** Sends a session's snapshot requests still waiting and waits (bounded) for its saves under way, before its kernels are shut down. */
  readonly flush: (sessionId: string) => Effect.Effect<void>
  /** Sends the snapshot requests still waiting and waits (bounded) for every save under way. */
  readonly drain: Effect.Effect<void>
}

/** How long shutting down waits for the saves under way. */
export const DRAIN_TIMEOUT = Duration.seconds(60)

interface PlaceState {
  /** Bumped by each snapshot asked for and by `forget`; a save writes only while its number is the newest written. */
  asked: number
  written: number
  /** One store write of the place at a time, so a payload and the metadata naming it land together. */
  readonly writing: Semaphore.Semaphore
  /** The digest and length of the snapshot stored, when this process knows them. */
  known: string | undefined
  knownBytes: number
  /** The snapshot request waiting for the session to settle, when its last cell ended, and the timer that will look. */
  idle: { readonly kernel: Kernel.Kernel; readonly cell: FinishedCell; readonly number: number } | undefined
  idleSince: number
  timer: ReturnType<typeof setTimeout> | undefined
}

const placeId = (place: SnapshotPlace): string => `${place.language}\u0000${place.sessionId}`

const MIB = 1024 * 1024

/** The snapshots of sessions kept in `store`, saved by `mode` within the budgets (MiB). */
export const makeSessionSnapshots = (
  store: SnapshotStoreService,
  options: { readonly mode: Exclude<SnapshotMode, "off">; readonly budgetMb: number; readonly valueBudgetMb: number }
): Effect.Effect<SessionSnapshots, never, Scope.Scope> =>
  Effect.gen(function*() {
    const saves = yield* FiberSet.make<void, never>()
    const places = new Map<string, PlaceState>()
    const stateOf = (place: SnapshotPlace): PlaceState => {
      const id = placeId(place)
      let state = places.get(id)
      if (state === undefined) places.set(id, state = { asked: 0, written: 0, writing: Semaphore.makeUnsafe(1), known: undefined, knownBytes: 0, idle: undefined, idleSince: 0, timer: undefined })
      return state
    }

    /** Writes a snapshot; `payload` undefined renews the metadata of the payload stored (a later cell, the same state). */
    const write = (place: SnapshotPlace, state: PlaceState, number: number, meta: SnapshotMeta, payload: Uint8Array | undefined) =>
      state.writing.withPermits(1)(Effect.suspend(() => {
        if (number <= state.written || (payload === undefined && state.known !== meta.digest)) return Effect.void
        state.written = number
        if (meta.names.length === 0 && meta.skipped.length === 0) {
          state.known = undefined
          return store.remove(place.sessionId, place.language)
        }
        state.known = meta.digest
        state.knownBytes = meta.bytes
        return store.write(place.sessionId, place.language, sealMeta(store.key, meta), meta.digest, payload)
      })).pipe(Effect.catch((error) => Effect.logWarning(`the snapshot of session ${place.sessionId} (${place.language}) was not kept: ${error.message}`)))

    /** The saves waiting on a kernel's snapshot, with their kernel: shutting down does not wait for one whose kernel is busy with a cell. */
    const waiting = new Set<{ readonly sessionId: string; readonly kernel: Kernel.Kernel; fiber: Fiber.Fiber<void> | undefined }>()

    const request = (place: SnapshotPlace, state: PlaceState, kernel: Kernel.Kernel, cell: FinishedCell, number: number) => {
      const entry: { readonly sessionId: string; readonly kernel: Kernel.Kernel; fiber: Fiber.Fiber<void> | undefined } = { sessionId: place.sessionId, kernel, fiber: undefined }
      return kernel.snapshot({ budget: options.budgetMb * MIB, valueBudget: options.valueBudgetMb * MIB, known: state.known }).pipe(
        Effect.flatMap((awaitSnapshot) =>
          FiberSet.run(saves, Effect.gen(function*() {
            const taken = yield* Effect.orElseSucceed(awaitSnapshot, () => undefined)
            if (taken === undefined || number <= state.written) return
            if (taken.status === "failed") {
              return yield* Effect.logWarning(`the snapshot of session ${place.sessionId} (${place.language}) after cell ${cell.executionCount} failed: ${taken.error ?? "no reason given"}`)
            }
            const unchanged = taken.status === "unchanged" && state.known !== undefined && (taken.digest ?? state.known) === state.known
            if (!unchanged && (taken.status !== "saved" || taken.payload === undefined || taken.digest === undefined)) return
            yield* write(place, state, number, {
              format: SNAPSHOT_FORMAT,
              sessionId: place.sessionId,
              language: place.language,
              asOfCell: cell.executionCount,
              cellTitle: cellTitleOf(cell.code),
              digest: unchanged ? state.known! : taken.digest!,
              bytes: unchanged ? state.knownBytes : taken.payload!.length,
              names: taken.names,
              skipped: taken.skipped,
              savedAt: Date.now()
            }, unchanged ? undefined : taken.payload)
          }).pipe(Effect.ensuring(Effect.sync(() => waiting.delete(entry)))))
        ),
        Effect.tap((fiber) =>
          Effect.sync(() => {
            entry.fiber = fiber
            waiting.add(entry)
          })
        ),
        Effect.asVoid,
        Effect.catch(() => Effect.void)
      )
    }

    const sendIdle = (place: SnapshotPlace, state: PlaceState) =>
      Effect.suspend(() => {
        const idle = state.idle
        state.idle = undefined
        if (state.timer !== undefined) clearTimeout(state.timer)
        state.timer = undefined
        return idle === undefined || idle.number !== state.asked ? Effect.void : request(place, state, idle.kernel, idle.cell, idle.number)
      })

    const settleMs = options.mode === "every-cell" ? SNAPSHOT_SETTLE_MS : SNAPSHOT_IDLE_MS

    /**
     * Sends the requests waiting of the places `matches` names and waits (bounded) for their
     * saves, except those of kernels busy with a cell (answered only after it): interrupted.
     */
    const settle = (matches: (sessionId: string) => boolean): Effect.Effect<void> =>
      Effect.suspend(() =>
        Effect.forEach([...places], ([id, state]) => {
          const [language, sessionId] = id.split("\u0000") as [string, string]
          return matches(sessionId) ? sendIdle({ sessionId, language }, state) : Effect.void
        }, { discard: true })
      ).pipe(
        Effect.andThen(Effect.suspend(() =>
          Effect.forEach([...waiting].filter((entry) => matches(entry.sessionId)), ({ kernel, fiber }) =>
            fiber === undefined
              ? Effect.void
              : Effect.flatMap(kernel.state, (lifecycle) => inFlight(lifecycle) === undefined ? Effect.asVoid(Fiber.await(fiber)) : Fiber.interrupt(fiber)), { discard: true })
        )),
        Effect.timeoutOrElse({ duration: DRAIN_TIMEOUT, orElse: () => Effect.logWarning("stopped waiting for session snapshots still being saved") })
      )
    const runInSaves = yield* FiberSet.runtime(saves)<never>()

    /**
     * Arms the place's timer for `delay`. It is not moved per cell: when it fires it asks for
     * the snapshot if the session has been settled for `settleMs`, waits out the rest if a
     * later cell ended since, and does nothing while a cell runs (its end arms it again).
     */
    const arm = (place: SnapshotPlace, state: PlaceState, delay: number) => {
      state.timer = setTimeout(() => {
        state.timer = undefined
        if (state.idle === undefined) return
        const left = state.idleSince + settleMs - performance.now()
        if (left > 0) arm(place, state, left)
        else runInSaves(sendIdle(place, state))
      }, delay)
      state.timer.unref?.()
    }

    return {
      cellStarting: (place) => {
        const state = places.get(placeId(place))
        if (state !== undefined) state.idle = undefined
      },
      afterCell: (place, kernel, cell) =>
        Effect.sync(() => {
          const state = stateOf(place)
          state.idle = { kernel, cell, number: ++state.asked }
          state.idleSince = performance.now()
          if (state.timer === undefined) arm(place, state, settleMs)
        }),
      restoreInto: (place, kernel) =>
        Effect.gen(function*() {
          const stored = yield* Effect.orElseSucceed(store.read(place.sessionId, place.language), () => undefined)
          if (stored === undefined) return { notice: undefined, replace: false }
          const opened = openMeta(store.key, stored.sealed, place.sessionId, place.language)
          const refusal = Result.isFailure(opened) ? opened.failure : payloadProblem(opened.success, stored.payload)
          if (refusal !== undefined || Result.isFailure(opened)) {
            const reason = refusal ?? "it could not be read"
            yield* Effect.logWarning(`refused the snapshot of session ${place.sessionId} (${place.language}): ${reason}`)
            yield* Effect.ignore(store.remove(place.sessionId, place.language))
            return { notice: refusedNotice(place.language, reason), replace: false }
          }
          const meta = opened.success
          const outcome = yield* Effect.orElseSucceed(kernel.restore(stored.payload, meta.asOfCell), () => ({
            restored: [],
            skipped: [],
            error: "the kernel ended during the restore"
          }))
          if (outcome.error !== undefined) return { notice: failedNotice(meta, outcome.error), replace: true }
          const restored = stateOf(place)
          restored.known = meta.digest
          restored.knownBytes = meta.bytes
          return { notice: restoredNotice(meta, outcome.restored, outcome.skipped), replace: false }
        }),
      forget: (sessionId, language) =>
        Effect.suspend(() => {
          const affected: Array<PlaceState> = []
          for (const [id, state] of places) {
            const [placeLanguage, placeSession] = id.split("\u0000") as [string, string]
            if (placeSession !== sessionId || (language !== undefined && placeLanguage !== language)) continue
            state.written = state.asked = state.asked + 1
            state.idle = undefined
            clearTimeout(state.timer)
            state.timer = undefined
            state.known = undefined
            affected.push(state)
          }
          // A write already under way lands first; none starts after the bump above.
          return Effect.forEach(affected, (state) => state.writing.withPermits(1)(Effect.void), { discard: true }).pipe(
            Effect.andThen(Effect.catch(store.remove(sessionId, language), (error) => Effect.logWarning(error.message)))
          )
        }),
      flush: (sessionId) => settle((placeSession) => placeSession === sessionId),
      drain: settle(() => true)
    } satisfies SessionSnapshots
  })
