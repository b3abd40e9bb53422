/**
 * What every command that runs cells shares: the eval layer with the CLI's settings,
 * starting the kernel up front (with a spinner when that is slow), and running one cell
 * into a view with its images saved.
 */
import { Effect, type Layer, Option, Stream } from "effect"
import { Flag } from "effect/cli"
import { type BackendId, backendOf, defaultBackendId, registeredBackends } from "../backends/index.ts"
import { evalLayer, type EvalServices } from "../layers/EvalLive.ts"
import type { ArtifactStore } from "../services/output/ArtifactStore.ts"
import type { SettingsInput } from "../services/config/Settings.ts"
import { hostVariables } from "../services/config/ConfigSources.ts"
import { EvalTool, type EvalError, type EvalParams, type EvalResult } from "../services/tool/EvalTool.ts"
import { KernelRegistry, type RegistryError } from "../services/registry/KernelRegistry.ts"
import type { CellView } from "./cellView.ts"
import { type CliFailure, failureOf } from "./exitCodes.ts"
import { saveImages, type SavedImage } from "./images.ts"
import { mapLayerError } from "./layerFailure.ts"
import { withSpinner } from "./spinner.ts"

/**
 * How long a kernel nobody is using survives in a long-lived command (`repl`, `mcp`):
 * about 24 days, the longest a timer can wait, so in practice as long as the process.
 */
export const LONG_LIVED_IDLE_TTL_MS = 2 ** 31 - 1

/**
 * The spare kernels a door that serves many sessions keeps for its default backend (`py`),
 * so a new session's first cell, or the one after a reset, finds a started runner.
 */
export const DOOR_SPARES = 1

/**
 * The settings the CLI starts from, under the `VEYYON_*` variables (`VEYYON_KERNEL_SPARES`
 * overrides `spares`); `longLived` keeps idle kernels; `spares` keeps `DOOR_SPARES` spare
 * kernels for `py`; `language` (the `--language` a person chose) is enabled unless its
 * `VEYYON_<ID>` variable turns it off; `snapshots: false` saves and restores no session
 * state (unless `VEYYON_SESSION_SNAPSHOTS` says otherwise).
 */
export const cliSettings = (
  options: { readonly longLived?: boolean; readonly spares?: boolean; readonly language?: BackendId; readonly snapshots?: boolean } = {}
): SettingsInput => {
  const kernel = {
    ...(options.longLived === true ? { idleTtlMs: LONG_LIVED_IDLE_TTL_MS } : {}),
    ...(options.spares === true ? { backends: { py: { spares: DOOR_SPARES } } } : {})
  }
  return {
    ...(Object.keys(kernel).length === 0 ? {} : { kernel }),
    ...(options.language === undefined ? {} : { eval: { [options.language]: true } }),
    ...(options.snapshots === false ? { session: { snapshots: "off" as const } } : {})
  }
}

/**
 * The eval layer from the CLI's settings and `VEYYON_*`; `longLived` keeps idle kernels
 * for the life of the process; `python` (the `--python` flag) wins over `VEYYON_PYTHON_INTERPRETER`.
 */
export const cliEvalLayer = (
  options: { readonly longLived?: boolean; readonly python?: Option.Option<string>; readonly language?: BackendId; readonly snapshots?: boolean } = {}
): Layer.Layer<EvalServices, CliFailure> => {
  const python = options.python === undefined ? undefined : Option.getOrUndefined(options.python)
  const env = python === undefined ? hostVariables() : { ...hostVariables(), VEYYON_PYTHON_INTERPRETER: python }
  return mapLayerError(evalLayer({ settings: cliSettings(options), env }), failureOf)
}

/** The `--python PATH` option of the commands that run cells. */
export const pythonOption = Flag.String("python").pipe(
  Flag.withMetavar("PATH"),
  Flag.withDescription(
    "The Python interpreter for py cells (a path, relative to the cell's directory, or a command name); overrides VEYYON_PYTHON_INTERPRETER."
  ),
  Flag.optional
)

/** The name of a backend for people, e.g. `Python` for `py`. */
export const kernelName = (language: BackendId): string => backendOf(language)?.displayName ?? language

/** The `--language` option of the commands that run cells: one of the registered backends. */
export const languageOption = Flag.ChoiceWithValue("language", registeredBackends().map((backend) => [backend.id, backend.id] as const)).pipe(
  Flag.withDescription(
    `The cells' language: ${registeredBackends().map((backend) => `${backend.id} (${backend.displayName})`).join(", ")}; default py. ` +
      "Choosing one enables it unless its VEYYON_<ID> variable is 0."
  ),
  Flag.withDefault<BackendId>(defaultBackendId())
)

/** Who the cells run for, where, and in which language (Python unless said otherwise). */
export interface CellContext {
  readonly sessionId: string
  readonly cwd: string
  readonly language?: BackendId
}

/** Starts (or, with `reset`, restarts) the session's kernel before any cell, so a start failure surfaces first. */
export const startKernel = (
  context: CellContext,
  options: { readonly reset?: boolean } = {}
): Effect.Effect<void, RegistryError, KernelRegistry> =>
  Effect.flatMap(KernelRegistry, (registry) =>
    Stream.runDrain(
      registry.execute({
        language: context.language ?? defaultBackendId(),
        sessionId: context.sessionId,
        cwd: context.cwd,
        code: "",
        silent: true,
        storeHistory: false,
        reset: options.reset ?? false
      })
    )).pipe(withSpinner(`starting the ${kernelName(context.language ?? defaultBackendId())} kernel…`))

/** A finished cell and the files its images were written to. */
export interface CellRun {
  readonly result: EvalResult
  readonly images: ReadonlyArray<SavedImage>
  /** Why the images could not be written, when they could not. */
  readonly imageProblem?: string
}

/** Runs one cell into `view` (when given) and saves its images. */
export const runCell = (
  params: Omit<EvalParams, "language">,
  context: CellContext & { readonly signal?: AbortSignal },
  view?: CellView
): Effect.Effect<CellRun, EvalError, EvalTool | ArtifactStore> =>
  Effect.gen(function*() {
    const tool = yield* EvalTool
    const { language = defaultBackendId(), ...where } = context
    const result = yield* tool.run({ language, ...params }, {
      ...where,
      ...(view === undefined ? {} : { onEvent: view.onEvent })
    }).pipe(
      Effect.tapError(() => Effect.sync(() => view?.abandon())),
      Effect.onInterrupt(() => Effect.sync(() => view?.abandon()))
    )
    view?.finish(result)
    return yield* saveImages(context.sessionId, result.images).pipe(
      Effect.map((images): CellRun => ({ result, images })),
      Effect.catch((error) => Effect.succeed<CellRun>({ result, images: [], imageProblem: error.message }))
    )
  })
