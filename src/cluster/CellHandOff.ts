/**
 * Cells that outlive their session's entity on this runner, one per language of a session.
 * When a session's shard leaves
 * the runner while the runner keeps running (the cluster rebalanced after a join, or the
 * runner's shard locks were dropped), a cell running there is not interrupted: its call
 * ends at once without a result (the caller sends it again, to the new owner, which waits
 * for this runner to finish it and answers with its kept result), the cell finishes here,
 * and the session's kernels end after its cells. So a shard is let go at once, and the other
 * sessions of the shard, new ones included, move without waiting for a neighbour's cell.
 * A stopping runner is different: its cells finish within its stop grace, answered directly.
 */
import { Context, Effect, Fiber, Layer, Scope } from "effect"

/** How often a running cell checks whether its session's shard is still on this runner. */
const MOVE_POLL_MS = 100

interface Cell {
  readonly callId: string
  fiber?: Fiber.Fiber<void>
}

const none = (): boolean => false

/** The cells of this runner, by session. */
export interface CellHandOffService {
  /**
   * Runs the session's cell of `language` (its `work`) on the runner's scope, for as long as
   * the calling scope lasts: when it closes, the cell is interrupted, unless `movedAway` says
   * the session's shard left this runner (then the cell finishes here).
   */
  readonly start: (sessionId: string, language: string, callId: string, work: Effect.Effect<void>, movedAway: Effect.Effect<boolean>) => Effect.Effect<void, never, Scope.Scope>
  /** Completes once `movedAway` is true (checked every 100 ms): the moment a running cell's call lets go. */
  readonly whenMovedAway: (movedAway: Effect.Effect<boolean>) => Effect.Effect<void>
  /** The call id of the session's cell of `language` running on this runner, if one does. */
  readonly runningCall: (sessionId: string, language: string) => string | undefined
  /**
   * Waits until the session's cells on this runner, if any, have ended, and what `afterCell`
   * deferred after them; cells of calls `ours` names (the waiting entity's own) are not waited for.
   */
  readonly awaitCell: (sessionId: string, ours?: (callId: string) => boolean) => Effect.Effect<void>
  /** Runs `effect` now, or once the session's cells on this runner have ended (then on the runner's scope, awaited by `awaitCell`). */
  readonly afterCell: (sessionId: string, effect: Effect.Effect<void>) => Effect.Effect<void>
}

/** Where a runner's cells run when they may outlive their entity. */
export class CellHandOff extends Context.Service<CellHandOff, CellHandOffService>()("veyyon-eval/CellHandOff") {
  /** The service; closing it waits for the cells still finishing (the runner's stop bounds that wait). */
  static readonly layer: Layer.Layer<CellHandOff> = Layer.effect(
    CellHandOff,
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      /** The running cells, by session and language. */
      const cells = new Map<string, Map<string, Cell>>()
      const deferred = new Map<string, Fiber.Fiber<void>>()
      const awaitFiber = (fiber: Fiber.Fiber<void> | undefined) => (fiber === undefined ? Effect.void : Effect.asVoid(Fiber.await(fiber)))
      const fibersOf = (sessionId: string, ours: (callId: string) => boolean = none) =>
        [...(cells.get(sessionId)?.values() ?? [])].flatMap((cell) => (cell.fiber === undefined || ours(cell.callId) ? [] : [cell.fiber]))
      const awaitCell = (sessionId: string, ours?: (callId: string) => boolean) =>
        Effect.andThen(
          Effect.suspend(() => Effect.forEach(fibersOf(sessionId, ours), awaitFiber, { discard: true })),
          Effect.suspend(() => awaitFiber(deferred.get(sessionId)))
        )
      yield* Effect.addFinalizer(() => Effect.forEach([...new Set([...cells.keys(), ...deferred.keys()])], (sessionId) => awaitCell(sessionId), { discard: true }))
      return CellHandOff.of({
        start: (sessionId, language, callId, work, movedAway) =>
          Effect.gen(function*() {
            const cell: Cell = { callId }
            const ofSession = cells.get(sessionId) ?? new Map<string, Cell>()
            cells.set(sessionId, ofSession)
            ofSession.set(language, cell)
            const fiber = yield* Effect.forkIn(
              work.pipe(Effect.ensuring(Effect.sync(() => {
                if (ofSession.get(language) === cell) ofSession.delete(language)
                if (ofSession.size === 0 && cells.get(sessionId) === ofSession) cells.delete(sessionId)
              }))),
              scope
            )
            cell.fiber = fiber
            yield* Effect.addFinalizer(() =>
              Effect.flatMap(movedAway, (moved) =>
                moved
                  ? Effect.logInfo(`session ${sessionId} moved while call ${callId} ran; the cell finishes here and its result is kept for the new owner`)
                  : Fiber.interrupt(fiber)))
          }),
        whenMovedAway: (movedAway) => {
          const loop: Effect.Effect<void> = Effect.flatMap(movedAway, (moved) => (moved ? Effect.void : Effect.andThen(Effect.sleep(MOVE_POLL_MS), loop)))
          return loop
        },
        runningCall: (sessionId, language) => cells.get(sessionId)?.get(language)?.callId,
        awaitCell,
        afterCell: (sessionId, effect) =>
          Effect.suspend(() => {
            const running = fibersOf(sessionId)
            if (running.length === 0) return effect
            const after = Effect.forEach(running, awaitFiber, { discard: true }).pipe(
              Effect.andThen(effect),
              Effect.ensuring(Effect.sync(() => {
                if (deferred.get(sessionId) === fiber) deferred.delete(sessionId)
              }))
            )
            let fiber: Fiber.Fiber<void> | undefined
            return Effect.flatMap(Effect.forkIn(after, scope, { startImmediately: false }), (forked) =>
              Effect.sync(() => {
                fiber = forked
                deferred.set(sessionId, forked)
              }))
          })
      })
    })
  )
}
