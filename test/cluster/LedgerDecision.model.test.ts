/**
 * The ledger's decisions as a cluster lives them: one session, a client that sends calls
 * of two languages, each language's one after another (resending the current one until it
 * is answered) and beside the other language's, three runners that
 * run, finish, release, crash and come back, in random order. What must hold whatever
 * happens: no call's cell runs twice; a call is answered "lost" only when its cell ran on
 * a runner that is gone, or that lost the session, without its finish recorded; "already ran" or a replayed result only for
 * a call that finished; and the first cell on a new runner carries the re-home notice
 * unless the session was never run, was ended on purpose, or the client was just told
 * its variables are gone (the lost-cell notice).
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Schema } from "effect"
import {
  ALREADY_RAN_NOTICE,
  decideExecute,
  endedRow,
  finishedRow,
  type LedgerRow,
  LOST_CELL_NOTICE,
  REHOMED_NOTICE,
  releasedRow
} from "../../src/cluster/LedgerDecision.ts"

type Runner = "A" | "B" | "C"
type Language = "py" | "js"
type Step =
  | { readonly _tag: "deliver"; readonly runner: Runner; readonly language: Language }
  | { readonly _tag: "finish"; readonly runner: Runner; readonly language: Language; readonly keep: boolean }
  | { readonly _tag: "crash"; readonly runner: Runner }
  | { readonly _tag: "release"; readonly runner: Runner }
  | { readonly _tag: "end" }

const runners = Arbitrary.schema(Schema.Literals(["A", "B", "C"]))
const languages = Arbitrary.schema(Schema.Literals(["py", "js"]))

/** A step's kind drawn in proportion 5:4:1:1:1 (deliver, finish, crash, release, end). */
const stepOf = (weight: number, runner: Runner, language: Language, keep: boolean): Step =>
  weight < 5
    ? { _tag: "deliver", runner, language }
    : weight < 9
    ? { _tag: "finish", runner, language, keep }
    : weight === 9
    ? { _tag: "crash", runner }
    : weight === 10
    ? { _tag: "release", runner }
    : { _tag: "end" }

const steps: Arbitrary.Arbitrary<Array<Step>> = Arbitrary.array(
  Arbitrary.map(
    Arbitrary.all([Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: 11 }))), runners, languages, Arbitrary.schema(Schema.Boolean)]),
    ([weight, runner, language, keep]) => stepOf(weight, runner, language, keep)
  ),
  { maxLength: 80 }
)

describe("the ledger over a session's life", () => {
  it.prop("no cell runs twice, and every notice tells the truth", [steps], ([life]) => {
    let row: LedgerRow | undefined
    let incarnation = { A: 0, B: 0, C: 0 }
    const me = (runner: Runner) => `${runner}#${incarnation[runner]}`
    /** The call each live runner is running, by language. */
    const running = new Map<Runner, Map<Language, string>>()
    const runningOn = (runner: Runner) => running.get(runner) ?? new Map<Language, string>()
    const runs = new Map<string, number>()
    /** Calls whose finish the ledger recorded. */
    const finished = new Set<string>()
    /** Calls whose cell ran on an incarnation that is gone, or that lost the session, without a recorded finish. */
    const orphaned = new Set<string>()
    const current = { py: 1, js: 1 }
    const call = (language: Language) => `${language}${current[language]}`
    let everRan = false
    let endedSinceLastRun = false
    /** The incarnation holding the session's variables, as far as the client knows. */
    let lastRunner: string | undefined

    for (const step of life) {
      switch (step._tag) {
        case "deliver": {
          if (runningOn(step.runner).has(step.language)) break // the entity answers "busy": nothing is decided
          const id = call(step.language)
          const owner = row?.owner
          const decision = decideExecute(row, "s", me(step.runner), `${step.runner}:1`, step.language, id)
          if (decision.next !== undefined && owner !== undefined && owner !== null && decision.next.owner !== owner) {
            // The session was taken over: the old owner's cells no longer reach the ledger.
            for (const [runner, calls] of running) if (me(runner) === owner) for (const callId of calls.values()) orphaned.add(callId)
          }
          if (decision._tag === "Run") {
            runs.set(id, (runs.get(id) ?? 0) + 1)
            expect(runs.get(id), `${id} ran twice`).toBe(1)
            const moved = everRan && lastRunner !== me(step.runner)
            if (decision.notice !== undefined) {
              expect(decision.notice).toBe(REHOMED_NOTICE)
              expect(moved).toBe(true)
            } else if (moved) {
              expect(endedSinceLastRun).toBe(true)
            }
            everRan = true
            endedSinceLastRun = false
            lastRunner = me(step.runner)
            running.set(step.runner, new Map(runningOn(step.runner)).set(step.language, id))
            row = decision.next
          } else if (decision._tag === "Answer") {
            if (decision.notice === LOST_CELL_NOTICE) {
              expect(runs.get(id) ?? 0, `${id} called lost without having run`).toBe(1)
              expect(finished.has(id)).toBe(false)
              expect(orphaned.has(id) || [...running.values()].some((calls) => [...calls.values()].includes(id))).toBe(true)
              lastRunner = me(step.runner) // the notice told the client its variables are gone
            } else {
              expect(decision.notice).toBe(ALREADY_RAN_NOTICE)
              expect(finished.has(id)).toBe(true)
            }
            row = decision.next ?? row
            current[step.language]++
          } else {
            expect(finished.has(id)).toBe(true)
            current[step.language]++
          }
          break
        }
        case "finish": {
          const id = runningOn(step.runner).get(step.language)
          if (id === undefined) break
          const calls = new Map(runningOn(step.runner))
          calls.delete(step.language)
          running.set(step.runner, calls)
          if (row !== undefined && row.owner === me(step.runner)) {
            row = finishedRow(row, step.language, id, step.keep ? `{"id":"${id}"}` : null)
            finished.add(id)
          }
          if (id === call(step.language)) current[step.language]++
          break
        }
        case "crash": {
          for (const id of runningOn(step.runner).values()) orphaned.add(id)
          running.delete(step.runner)
          incarnation = { ...incarnation, [step.runner]: incarnation[step.runner] + 1 }
          break
        }
        case "release": {
          if (runningOn(step.runner).size > 0 || row === undefined) break
          if (row.owner === me(step.runner) && lastRunner === me(step.runner)) lastRunner = undefined // its kernels are gone
          row = releasedRow(row, me(step.runner))
          break
        }
        case "end": {
          if ([...running.values()].some((calls) => calls.size > 0) || row === undefined) break
          row = endedRow(row)
          endedSinceLastRun = true
          break
        }
      }
    }
  }, { arbitrary: { runs: 1000 } })
})
