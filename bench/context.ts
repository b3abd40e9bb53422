/**
 * What every figure gets: the interpreters, the scratch directories, the veyyon
 * runtime, a logger, and the results shape a figure returns.
 */
import type { Interpreter, JupyterInterpreter } from "./python.ts"
import type { Row } from "./table.ts"
import type { VeyyonRuntime } from "./veyyon.ts"

/** Shared state of one bench run. */
export interface BenchContext {
  readonly python: Interpreter
  /** The Jupyter interpreter, or why the Jupyter column is skipped. */
  readonly jupyter: JupyterInterpreter | { readonly missing: string }
  /** Where cells run. */
  readonly workDir: string
  /** The eval layer's artifacts root. */
  readonly artifactsDir: string
  /** Jupyter's runtime dir (connection files). */
  readonly jupyterRuntimeDir: string
  readonly veyyon: VeyyonRuntime
  /** Smaller sample counts, for the smoke test. */
  readonly quick: boolean
  readonly log: (line: string) => void
}

/** What one figure reports. */
export interface FigureResult {
  readonly id: string
  readonly title: string
  readonly rows: ReadonlyArray<Row>
  /** Raw numbers behind the rows, for results.json. */
  readonly details: Readonly<Record<string, unknown>>
  /** Why a column is missing, when one is. */
  readonly notes: ReadonlyArray<string>
}

/** A figure of the bench. */
export type Figure = (context: BenchContext) => Promise<FigureResult>

/** Whether the Jupyter column can be measured. */
export const hasJupyter = (context: BenchContext): context is BenchContext & { readonly jupyter: JupyterInterpreter } =>
  !("missing" in context.jupyter)

/** Why the Jupyter column is skipped (empty when it is not). */
export const jupyterSkipReason = (context: BenchContext): string =>
  "missing" in context.jupyter ? context.jupyter.missing : ""
