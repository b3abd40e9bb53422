/**
 * Cells that outlive their session's entity on this runner. When a session's shard leaves
 * the runner while the runner keeps running (the cluster rebalanced after a join, or the
 * runner's shard locks were dropped), the cell running there is not interrupted: its call
 * ends at once without a result (the caller sends it again, to the new owner, which waits
 * for this runner to finish it and answers with its kept result), the cell finishes here,
 * and the session's kernels end after it. So a shard is let go at once, and the other
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

/** The cells of this runner, by session. */
export interface CellHandOffService {
  /**
   * Runs a cell's `work` on the runner's scope, for as long as the calling scope lasts: when
   * it closes, the cell is interrupted, unless `movedAway` says the session's shard left
   * this runner (then the cell finishes here).
   */
  readonly start: (sessionId: string, callId: string, work: Effect.Effect<void>, movedAway: Effect.Effect<boolean>) => Effect.Effect<void, never, Scope.Scope>
  /** Completes once `movedAway` is true (checked every 100 ms): the moment a running cell's call lets go. */
  readonly whenMovedAway: (movedAway: Effect.Effect<boolean>) => Effect.Effect<void>
  /** The call id of the session's cell running on this runner, if one does. */
  readonly runningCall: (sessionId: string) => string | undefined
  /** Waits until the session's cell on this runner, if any, has ended, and what `afterCell` deferred after it. */
  readonly awaitCell: (sessionId: string) => Effect.Effect<void>
  /** Runs `effect` now, or once the session's cell on this runner has ended (then on the runner's scope, awaited by `awaitCell`). */
  readonly afterCell: (sessionId: string, effect: Effect.Effect<void>) => Effect.Effect<void>
}

/** Where a runner's cells run when they may outlive their entity. */
export class CellHandOff extends Context.Service<CellHandOff, CellHandOffService>()("veyyon-eval/CellHandOff") {
  /** The service; closing it waits for the cells still finishing (the runner's stop bounds that wait). */
  static readonly layer: Layer.Layer<CellHandOff> = Layer.effect(
    CellHandOff,
    Effect.gen(function*() {
      const scope = yield* Effect.scope
      const cells = new Map<string, Cell>()
      const deferred = new Map<string, Fiber.Fiber<void>>()
      const awaitFiber = (fiber: Fiber.Fiber<void> | undefined) => (fiber === undefined ? Effect.void : Effect.asVoid(Fiber.await(fiber)))
      const awaitCell = (sessionId: string) =>
        Effect.andThen(awaitFiber(cells.get(sessionId)?.fiber), Effect.suspend(() => awaitFiber(deferred.get(sessionId))))
      yield* Effect.addFinalizer(() => Effect.forEach([...new Set([...cells.keys(), ...deferred.keys()])], awaitCell, { discard: true }))
      return CellHandOff.of({
        start: (sessionId, callId, work, movedAway) =>
          Effect.gen(function*() {
            const cell: Cell = { callId }
            cells.set(sessionId, cell)
            const fiber = yield* Effect.forkIn(
              work.pipe(Effect.ensuring(Effect.sync(() => {
                if (cells.get(sessionId) === cell) cells.delete(sessionId)
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
        runningCall: (sessionId) => cells.get(sessionId)?.callId,
        awaitCell,
        afterCell: (sessionId, effect) =>
          Effect.suspend(() => {
            const cell = cells.get(sessionId)
            if (cell?.fiber === undefined) return effect
            const after = awaitFiber(cell.fiber).pipe(
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
