/**
 * The part of `veyyon setup python --check` that proves cells run: a real kernel started
 * as `veyyon eval` starts one (same settings, runner, sandbox and registry), a trivial
 * cell run through it, and the kernel shut down again. Resolving an interpreter is not
 * enough: a package whose runner is missing or broken resolves fine and fails every cell.
 */
import { Duration, Effect, Stream } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import type { BackendId } from "../backends/index.ts"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { evalLayer } from "../layers/EvalLive.ts"
import { sessionArtifactsDir } from "../services/output/ArtifactStore.ts"
import { KernelRegistry } from "../services/registry/KernelRegistry.ts"
import { Settings } from "../services/config/Settings.ts"
import { CliFailure, ExitCode, failureOf } from "./exitCodes.ts"
import { mapLayerError } from "./layerFailure.ts"
import { cliSettings, kernelName } from "./session.ts"
import { withSpinner } from "./spinner.ts"

/** The cell the check runs, and what it must print. */
export const CHECK_CELLS: Readonly<Partial<Record<BackendId, { readonly code: string; readonly prints: string }>>> = {
  py: { code: "print(6 * 7)", prints: "42" }
}

/** How long the check waits for a kernel to start and answer. */
export const KERNEL_CHECK_TIMEOUT = Duration.seconds(60)

/** What a passed check measured: how long the kernel took to start and run the cell. */
export interface KernelCheck {
  readonly millis: number
}

/** Why a finished check cell did not pass, from its outputs; undefined when it printed what it should. */
export const checkCellProblem = (outputs: ReadonlyArray<KernelOutput>, prints: string): string | undefined => {
  const error = outputs.find((output) => output._tag === "Error")
  if (error !== undefined && error._tag === "Error") {
    return `a trivial cell failed in it: ${error.evalue.length > 0 ? `${error.ename}: ${error.evalue}` : error.ename}`
  }
  const done = outputs.find((output) => output._tag === "Done")
  if (done === undefined) return "the kernel ended the cell without an outcome"
  if (done._tag === "Done" && (done.cancelled || done.timedOut || done.killed)) {
    return `the trivial cell did not finish: ${done.notice ?? "it was stopped"}`
  }
  const printed = outputs.flatMap((output) => (output._tag === "Stdout" ? [output.text] : [])).join("")
  return printed.trim() === prints ? undefined : `a trivial cell printed ${JSON.stringify(printed.slice(0, 200))} instead of ${prints}`
}

const removeIfEmpty = (dir: string) =>
  Effect.sync(() => {
    try {
      fs.rmdirSync(dir)
    } catch {
      // not empty, or gone: either way nothing of ours to remove
    }
  })

/**
 * Starts a `language` kernel in `cwd` under the environment `env`, runs the check cell and
 * ends the kernel; fails with exit 3 and the reason when any of it does not work.
 */
export const checkKernel = (
  language: BackendId,
  cwd: string,
  env: Readonly<Record<string, string | undefined>>
): Effect.Effect<KernelCheck, CliFailure> => {
  const cell = CHECK_CELLS[language]
  if (cell === undefined) return Effect.die(new Error(`no check cell for ${language}`))
  const sessionId = `setup-check-${randomBytes(8).toString("hex")}`
  const name = kernelName(language)
  const unavailable = (reason: string) =>
    new CliFailure({ code: ExitCode.BackendUnavailable, sentence: `the ${name} kernel does not work here: ${reason}.` })
  return Effect.gen(function*() {
    const registry = yield* KernelRegistry
    const settings = yield* Settings
    yield* Effect.addFinalizer(() => removeIfEmpty(sessionArtifactsDir(settings.artifactsDir, sessionId)))
    yield* Effect.addFinalizer(() => registry.reset(sessionId))
    const started = Date.now()
    const outputs = yield* registry.execute({ language, sessionId, cwd, code: cell.code, silent: false, storeHistory: false }).pipe(
      Stream.runCollect,
      Effect.mapError(failureOf),
      Effect.timeoutOrElse({
        duration: KERNEL_CHECK_TIMEOUT,
        orElse: () => Effect.fail(unavailable(`it did not start and run a cell within ${Duration.toSeconds(KERNEL_CHECK_TIMEOUT)} s`))
      }),
      withSpinner(`starting a ${name} kernel to check it…`)
    )
    const problem = checkCellProblem([...outputs], cell.prints)
    if (problem !== undefined) return yield* unavailable(problem)
    return { millis: Date.now() - started }
  }).pipe(
    Effect.scoped,
    Effect.mapError((error) =>
      error.code === ExitCode.BackendUnavailable && error.sentence !== undefined && !error.sentence.startsWith(`the ${name} kernel`)
        ? unavailable(error.sentence.replace(/\.$/, ""))
        : error
    ),
    Effect.provide(mapLayerError(evalLayer({ settings: cliSettings({ language, snapshots: false }), env }), failureOf))
  )
}
