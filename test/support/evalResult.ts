/**
 * EvalResult values for tests of what consumes them (renderers, CLI views, MCP results).
 */
import type { EvalResult } from "../../src/services/tool/EvalTool.ts"

/** A finished, clean Python cell with nothing in it, with `over` applied. */
export const evalResult = (over: Partial<EvalResult> = {}): EvalResult => ({
  language: "py",
  status: "ok",
  cancelled: false,
  timedOut: false,
  killed: false,
  executionCount: 1,
  outputs: [],
  text: "",
  images: [],
  artifactIds: [],
  durationMs: 1,
  ...over
})

/** What a cell printed on stdout (a result's `text` also carries its notices). */
export const printed = (result: Pick<EvalResult, "outputs">): string =>
  result.outputs.flatMap((output) => (output._tag === "Stdout" ? [output.text] : [])).join("").trim()
