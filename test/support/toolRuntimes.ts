/**
 * Eval tools built from layer options for one test file, under one temp artifacts dir:
 * each `make` gives `run` (the exit), `ok` (the result, or a throw with the cause) and
 * `definition`; `disposeAll` ends every tool's kernels and removes the dir. The tools share
 * the dir and a session name, so session snapshots are off unless the options set them:
 * one tool's session state would otherwise be restored into another tool's kernels.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Exit, ManagedRuntime } from "effect"
import { evalLayer, type EvalLayerOptions } from "../../src/layers/EvalLive.ts"
import { EvalTool, type EvalResult } from "../../src/services/tool/EvalTool.ts"

/** A factory of tools whose cells run in `cwd` (this process's unless given), sessions named `defaultSession` unless given. */
export const toolRuntimes = (prefix: string, defaultSession: string) => {
  const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  const runtimes: Array<ManagedRuntime.ManagedRuntime<EvalTool, unknown>> = []
  const make = (options: EvalLayerOptions, cwd = process.cwd()) => {
    const runtime = ManagedRuntime.make(evalLayer({
      ...options,
      settings: { ...options.settings, session: { snapshots: "off", ...options.settings?.session } }
    }))
    runtimes.push(runtime)
    const run = (params: unknown, sessionId = defaultSession) =>
      runtime.runPromiseExit(EvalTool.use((tool) => tool.run(params, { sessionId, cwd })))
    const ok = async (params: unknown, sessionId?: string): Promise<EvalResult> => {
      const exit = await run(params, sessionId)
      if (Exit.isFailure(exit)) throw new Error(String(exit.cause))
      return exit.value
    }
    const definition = () => runtime.runPromise(EvalTool.useSync((tool) => tool.definition))
    return { run, ok, definition }
  }
  const disposeAll = async () => {
    for (const runtime of runtimes) await runtime.dispose()
    fs.rmSync(artifactsDir, { recursive: true, force: true })
  }
  return { artifactsDir, make, disposeAll }
}
