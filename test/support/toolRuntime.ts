/**
 * An eval tool over a real Python (and this process's Node) whose artifacts and cells live
 * in a temp dir of its own; `close` disposes the runtime and removes the dir.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { ManagedRuntime } from "effect"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { tempDir } from "./tempDirs.ts"

/** Builds the tool under a fresh temp dir named by `prefix`, kernels spawned with `python`. */
export const makeToolRuntime = (prefix: string, python: string) => {
  const root = tempDir(prefix)
  const runtime = ManagedRuntime.make(evalLayer({ env: false, settings: { artifactsDir: path.join(root, "artifacts"), python: { interpreter: python } } }))
  /** Runs one cell through the tool, with the temp dir as cwd. */
  const run = (language: "py" | "js", code: string, sessionId: string) =>
    runtime.runPromise(EvalTool.use((tool) => tool.run({ language, code }, { sessionId, cwd: root })))
  /** Ends every kernel and removes the temp dir. */
  const close = async () => {
    await runtime.dispose()
    fs.rmSync(root, { recursive: true, force: true })
  }
  return { root, runtime, run, close }
}
