/**
 * Room `tool`: the `eval` tool agents call: this service, its params and result schemas,
 * its timeout clamping and params sentences. It uses every other room of `services/`, the
 * backends, the kernel and rendering; the doors use it.
 *
 * The agent-facing `eval` tool: validates the seed's params (a bad call is answered at
 * once, whatever is running), runs one cell of an enabled backend through the registry
 * with a session's calls for one language never overlapping (they queue for its kernel;
 * another language's kernel runs beside it, and a backend whose interpreter is missing
 * only fails its own cells), bounds the output through the
 * output sink, and returns an `EvalResult` with the text an agent reads.
 */
import { Context, Effect, Layer, Result, Schema, Semaphore } from "effect"
import { type CellOutcome, KernelOutput } from "../../kernel/KernelOutput.ts"
import { type Completion, type Inspection, IntrospectionFailed } from "../../kernel/Introspection.ts"
import { backendOf, registeredBackends } from "../../backends/index.ts"
import { cellSpanFailure, withCurrentSpan, withSpanWhenTraced } from "../../kernel/Spans.ts"
import { outputImages } from "../../render/OutputText.ts"
import { renderOutputsAsText } from "../../render/ToolRenderer.ts"
import { ArtifactStore, type ArtifactDirUnavailable, type ArtifactStoreService } from "../output/ArtifactStore.ts"
import { clampTimeoutSeconds, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, DEFAULT_TIMEOUT_SECONDS, type InvalidTimeout } from "./CellTimeout.ts"
import { EVAL_PARAM_HINTS, EvalParamsInput, type EvalParamsSchema, evalParamsJsonSchema } from "./EvalSchema.ts"
import type { EvalResult } from "./EvalResult.ts"
import { type KernelPlace, KernelRegistry, type RegistryError } from "../registry/KernelRegistry.ts"
import { PARAMS_PARSE_OPTIONS, paramsProblem } from "./ParamsProblem.ts"
import type { SinkResult } from "../output/OutputSink.ts"
import { OutputSink } from "../output/OutputSink.ts"
import { notebookOutputs, SessionRecord } from "../output/SessionRecord.ts"
import { destinations, type EgressRecord, egressRecords } from "../isolation/egress/EgressReport.ts"
import { enabledLanguages, type EvalLanguage, Settings, type SettingsValues } from "../config/Settings.ts"

/** A finished cell (defined beside its schema's source, re-exported here for callers of the tool). */
export type { EvalResult } from "./EvalResult.ts"

/** The tool's name as agents see it. */
export const EVAL_TOOL_NAME = "eval"

/** The params of one call, as the seed defines them (`timeout`: seconds, clamped to 1..3600, default 30). */
export type EvalParams = Omit<typeof EvalParamsSchema.Type, "language"> & { readonly language: EvalLanguage }

/** Who is calling and how to stream. */
export interface EvalContext {
  readonly sessionId: string
  readonly cwd: string
  /** Called with every event as it happens, before the result exists. */
  readonly onEvent?: (output: KernelOutput) => void
  /** Aborting it stops the cell (SIGINT); the result then says it was cancelled. */
  readonly signal?: AbortSignal
}

/** The params do not fit the tool's schema. */
export class InvalidEvalParams extends Schema.TaggedError<InvalidEvalParams>()("InvalidEvalParams", { problem: Schema.String }) {
  override get message(): string {
    return `invalid eval params: ${this.problem}`
  }
}

/** The requested language's backend is disabled or not available. */
export class BackendUnavailable extends Schema.TaggedError<BackendUnavailable>()("BackendUnavailable", {
  language: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `the ${this.language} eval backend is not available: ${this.reason}`
  }
}

/** Anything `EvalTool.run` can fail with. */
export type EvalError = InvalidEvalParams | BackendUnavailable | RegistryError | ArtifactDirUnavailable

/** The tool as an agent framework registers it. */
export interface EvalToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: Readonly<Record<string, unknown>>
}

const WORKSPACE_GUIDANCE =
  "Treat the kernel as your workspace: keep large intermediate results in variables instead of printing them, transform them in the kernel, reuse the helpers you defined earlier, and display only compact conclusions."

const enabledBackends = (settings: SettingsValues) => registeredBackends().filter((backend) => settings.eval[backend.id] === true)

/**
 * The tool description over `backends`: `workspace` adds the keep-it-in-the-kernel advice,
 * `enabledByHost` says the host decides which of them a call may use.
 */
export const describeEval = (
  backends: ReadonlyArray<ReturnType<typeof registeredBackends>[number]>,
  options: { readonly workspace?: boolean; readonly enabledByHost?: boolean } = {}
): string => {
  const languages = backends.map((backend) => `${backend.id} (${backend.displayName})`).join(", ") || "none enabled"
  const lines = [
    `Run one code cell in a persistent kernel and get its output. Languages: ${languages}${options.enabledByHost === true ? ", those the host enabled" : ""}.`,
    "State persists between calls: names defined in one cell are available in the next. A failing cell keeps earlier state.",
    ...backends.flatMap((backend) => backend.guidance),
    `timeout is the cell's budget in seconds (${MIN_TIMEOUT_SECONDS}..${MAX_TIMEOUT_SECONDS}, default ${DEFAULT_TIMEOUT_SECONDS}); a cell that runs out is interrupted and the kernel keeps running. reset: true starts a fresh kernel for that language before the cell.`,
    "Large output is truncated and saved; the result names the artifact:// holding all of it."
  ]
  if (options.workspace === true) lines.push(WORKSPACE_GUIDANCE)
  return lines.join("\n")
}

/** The tool description for the enabled languages. */
export const evalDescription = (settings: SettingsValues): string =>
  describeEval(enabledBackends(settings), { workspace: settings.eval.pyWorkspace })

/** The JSON Schema of the params, with `language` narrowed to the enabled backends. */
export const evalParametersSchema = (settings: SettingsValues): Readonly<Record<string, unknown>> =>
  evalParamsJsonSchema(enabledLanguages(settings))

const decodeParamsInput = Schema.decodeUnknownResult(EvalParamsInput, PARAMS_PARSE_OPTIONS)

/** Validated params with the timeout clamped. */
export interface CheckedParams {
  readonly language: EvalLanguage
  readonly code: string
  readonly title?: string
  readonly timeoutSeconds: number
  readonly reset: boolean
}

/** Validates raw params against the schema and the enabled languages; pure. */
export const checkParams = (
  raw: unknown,
  settings: SettingsValues
): Result.Result<CheckedParams, InvalidEvalParams | BackendUnavailable | InvalidTimeout> => {
  const decoded = decodeParamsInput(raw)
  if (Result.isFailure(decoded)) return Result.fail(new InvalidEvalParams({ problem: paramsProblem(decoded.failure, EVAL_TOOL_NAME, EVAL_PARAM_HINTS) }))
  const params = decoded.success
  const enabled = enabledLanguages(settings)
  if (backendOf(params.language) === undefined) {
    return Result.fail(
      new InvalidEvalParams({ problem: `language must be one of ${enabled.join(", ") || "(none enabled)"}, got ${JSON.stringify(params.language)}` })
    )
  }
  const language = params.language as EvalLanguage
  if (!enabled.includes(language)) {
    return Result.fail(
      new BackendUnavailable({ language, reason: `it is disabled (enable eval.${language} or set VEYYON_${language.toUpperCase()}=1)` })
    )
  }
  const timeoutSeconds = clampTimeoutSeconds(params.timeout)
  if (Result.isFailure(timeoutSeconds)) return Result.fail(timeoutSeconds.failure)
  return Result.succeed({
    language,
    code: params.code,
    ...(params.title === undefined ? {} : { title: params.title }),
    timeoutSeconds: timeoutSeconds.success,
    reset: params.reset ?? false
  })
}

/** The outcome of a cell that ended without one (its kernel could not be started). */
const NO_OUTCOME = { status: "error", executionCount: 0, cancelled: false, timedOut: false, killed: false } as const

/** The tool's result for a cell's sink result; pure. */
const evalResultOf = (params: CheckedParams, result: SinkResult, outcome: CellOutcome, durationMs: number): EvalResult => {
  const rendered = [...result.outputs, KernelOutput.Done(outcome)]
  const failed = result.outputs.find((o) => o._tag === "Error")
  return {
    language: params.language,
    ...(params.title === undefined ? {} : { title: params.title }),
    status: outcome.status,
    cancelled: outcome.cancelled,
    timedOut: outcome.timedOut,
    killed: outcome.killed,
    executionCount: outcome.executionCount,
    outputs: result.outputs,
    text: renderOutputsAsText(rendered),
    images: outputImages(rendered),
    ...(failed?._tag === "Error" ? { error: { ename: failed.ename, evalue: failed.evalue, traceback: failed.traceback } } : {}),
    ...(result.truncation === undefined ? {} : { truncation: result.truncation }),
    artifactIds: result.artifactIds,
    ...(outcome.notice === undefined ? {} : { notice: outcome.notice }),
    ...(outcome.retried === true ? { retried: true as const } : {}),
    ...(outcome.kernelExit === undefined ? {} : { kernelExit: outcome.kernelExit }),
    durationMs
  }
}

/** A completion or inspection request: the cell being typed and where the cursor is in it. */
export interface IntrospectParams {
  readonly language: EvalLanguage
  readonly code: string
  /** UTF-16 offset into `code`; default its end. */
  readonly cursorPos?: number
  /** Inspection only: 1 adds the source (`obj??`). */
  readonly detailLevel?: 0 | 1
}

/** Anything `EvalTool.complete` and `EvalTool.inspect` can fail with. */
export type IntrospectError = InvalidEvalParams | BackendUnavailable | RegistryError | IntrospectionFailed

/** The eval tool service. */
export interface EvalToolService {
  /** The tool's name, description and JSON Schema. */
  readonly definition: EvalToolDefinition
  /** Runs one cell. Interrupting the effect also interrupts the cell (without a result). */
  readonly run: (params: unknown, context: EvalContext) => Effect.Effect<EvalResult, EvalError>
  /**
   * Completions for the token before the cursor, from the session's kernel for the
   * language and cwd (Jupyter's complete_request). Does not wait for a running cell,
   * count as a cell or change its state.
   */
  readonly complete: (params: IntrospectParams, context: Pick<EvalContext, "sessionId" | "cwd">) => Effect.Effect<Completion, IntrospectError>
  /** What the name at the cursor is, as IPython's `obj?` text (Jupyter's inspect_request); as `complete`, beside any cell. */
  readonly inspect: (params: IntrospectParams, context: Pick<EvalContext, "sessionId" | "cwd">) => Effect.Effect<Inspection, IntrospectError>
  /**
   * Ends a session: shuts its kernels down and drops what the tool keeps for it (its locks,
   * its store); kv, artifacts and its saved state stay, unless `forget` also forgets its
   * saved state (its snapshots), as an explicit delete does.
   */
  readonly endSession: (sessionId: string, options?: { readonly forget?: boolean }) => Effect.Effect<void>
}

/** Puts the destinations the cell's egress proxy allowed, refused and failed to reach on the current span (`eval.egress.*`). */
const annotateEgress = (records: ReadonlyArray<EgressRecord>) =>
  withCurrentSpan((span) => {
    for (const outcome of ["allowed", "refused", "failed"] as const) {
      const found = destinations(records, outcome)
      if (found.length > 0) span.attribute(`eval.egress.${outcome}`, found)
    }
  })

const makeEvalTool = Effect.gen(function*() {
  const settings = yield* Settings
  const registry = yield* KernelRegistry
  const sinks = yield* OutputSink
  const artifacts = yield* ArtifactStore
  const records = yield* SessionRecord
  const sessionStores = new Map<string, ArtifactStoreService>()
  /** Opens a session's artifact store and keeps it for the session's later cells. */
  const openSessionStore = (sessionId: string) =>
    Effect.tap(artifacts.forSession(sessionId), (store) => Effect.sync(() => sessionStores.set(sessionId, store)))
  const sessionLocks = new Map<string, Map<EvalLanguage, Semaphore.Semaphore>>()
  const lockFor = (sessionId: string, language: EvalLanguage) => {
    let locks = sessionLocks.get(sessionId)
    if (locks === undefined) {
      locks = new Map()
      sessionLocks.set(sessionId, locks)
    }
    let lock = locks.get(language)
    if (lock === undefined) {
      lock = Semaphore.makeUnsafe(1)
      locks.set(language, lock)
    }
    return lock
  }

  const runCell = (params: CheckedParams, context: EvalContext, push: (output: KernelOutput) => Effect.Effect<void>): Effect.Effect<void, EvalError> =>
    registry.run({
      language: params.language,
      sessionId: context.sessionId,
      cwd: context.cwd,
      code: params.code,
      timeoutSeconds: params.timeoutSeconds,
      reset: params.reset,
      ...(context.signal === undefined ? {} : { signal: context.signal })
    }, push).pipe(Effect.flatMap((outcome) => push(KernelOutput.Done(outcome))))

  const recordCell = (sessionId: string, params: CheckedParams, result: SinkResult, outcome: CellOutcome, egress: ReadonlyArray<EgressRecord>) => {
    const count = outcome.executionCount > 0 ? outcome.executionCount : null
    return records.record(sessionId, {
      language: params.language,
      source: params.code,
      executionCount: count,
      outputs: notebookOutputs(result.outputs, count, outcome.notice),
      ...(egress.length === 0 ? {} : { egress })
    }).pipe(Effect.catch((problem) => Effect.logWarning(`the cell was not recorded for export: ${problem.message}`)))
  }

  /** One checked cell, run while its session's lock for the language is held. */
  const runChecked = (params: CheckedParams, context: EvalContext): Effect.Effect<EvalResult, EvalError> =>
    Effect.suspend(() => {
      const started = Date.now()
      const onEvent = context.onEvent
      const collect = (store: ArtifactStoreService) =>
        Effect.flatMap(
          sinks.collectPushed((push) => runCell(params, context, push), { store, ...(onEvent === undefined ? {} : { onEvent }) }),
          (result) => {
            const outcome = result.outcome ?? NO_OUTCOME
            const egress = egressRecords(result.outputs)
            const kept = recordCell(context.sessionId, params, result, outcome, egress)
            const pruned = result.artifactIds.length > 0 ? Effect.andThen(store.prune, kept) : kept
            return Effect.map(egress.length === 0 ? pruned : Effect.andThen(annotateEgress(egress), pruned), () =>
              evalResultOf(params, result, outcome, Date.now() - started))
          }
        )
      const known = sessionStores.get(context.sessionId)
      return known !== undefined ? collect(known) : Effect.flatMap(openSessionStore(context.sessionId), collect)
    })

  const run = (raw: unknown, context: EvalContext): Effect.Effect<EvalResult, EvalError> =>
    Effect.suspend(() => {
      const checked = checkParams(raw, settings)
      if (Result.isFailure(checked)) {
        const error = checked.failure
        return Effect.fail(error._tag === "InvalidTimeout" ? new InvalidEvalParams({ problem: error.message }) : error)
      }
      const params = checked.success
      return lockFor(context.sessionId, params.language).withPermits(1)(runChecked(params, context))
    }).pipe(
      (effect) => withSpanWhenTraced(() => effect, "eval.run", { attributes: { "eval.session": context.sessionId }, captureStackTrace: false }, cellSpanFailure)
    )

  const placeOf = (
    params: IntrospectParams,
    context: Pick<EvalContext, "sessionId" | "cwd">
  ): Effect.Effect<KernelPlace, InvalidEvalParams | BackendUnavailable | IntrospectionFailed> =>
    Effect.suspend((): Effect.Effect<KernelPlace, InvalidEvalParams | BackendUnavailable | IntrospectionFailed> => {
      const language = params.language
      if (!enabledLanguages(settings).includes(language)) {
        return Effect.fail(new BackendUnavailable({ language, reason: `it is disabled (enable eval.${language} or set VEYYON_${language.toUpperCase()}=1)` }))
      }
      const backend = backendOf(language)
      if (backend !== undefined && !backend.introspects) {
        return Effect.fail(new IntrospectionFailed({ reason: `the ${backend.displayName} kernel does not answer completions or inspections` }))
      }
      if (typeof params.code !== "string") return Effect.fail(new InvalidEvalParams({ problem: "code must be a string" }))
      if (params.cursorPos !== undefined && !Number.isFinite(params.cursorPos)) {
        return Effect.fail(new InvalidEvalParams({ problem: "cursorPos must be a number" }))
      }
      return Effect.succeed({ language, sessionId: context.sessionId, cwd: context.cwd })
    })

  return {
    definition: { name: EVAL_TOOL_NAME, description: evalDescription(settings), parameters: evalParametersSchema(settings) },
    run,
    complete: (params, context) =>
      Effect.flatMap(placeOf(params, context), (place) => registry.complete(place, params.code, params.cursorPos)),
    inspect: (params, context) =>
      Effect.flatMap(placeOf(params, context), (place) =>
        registry.inspect(place, params.code, params.cursorPos, params.detailLevel === 1 ? 1 : 0)),
    endSession: (sessionId, options) =>
      Effect.andThen(
        Effect.andThen(options?.forget === true ? registry.forget(sessionId) : registry.reset(sessionId), records.close(sessionId)),
        Effect.sync(() => {
          sessionStores.delete(sessionId)
          sessionLocks.delete(sessionId)
        })
      )
  } satisfies EvalToolService
})

/** The `eval` tool. */
export class EvalTool extends Context.Service<EvalTool, EvalToolService>()("veyyon-eval/EvalTool") {
  /** The tool over the registry, output sink, artifact store and settings in context. */
  static readonly layer: Layer.Layer<EvalTool, never, Settings | KernelRegistry | OutputSink | ArtifactStore | SessionRecord> = Layer.effect(
    EvalTool,
    makeEvalTool
  )
}
