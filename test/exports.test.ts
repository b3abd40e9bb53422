/**
 * The package's public surface: each entry package.json exports has a barrel in src/ of
 * the same name, exports exactly the names listed here (adding one is a decision made in
 * this file too), and gives every export a one-line doc comment.
 */
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const root = path.resolve(import.meta.dirname, "..")
const packageJson = JSON.parse(NodeFs.readFileSync(path.join(root, "package.json"), "utf8")) as {
  readonly exports: Record<string, string | { readonly types: string; readonly default: string }>
}

/** The runtime names each entry exports (type-only exports are checked by the doc test below). */
const expected: Record<string, ReadonlyArray<string>> = {
  ".": [
    "AgentBridge", "AgentBridgeError", "AgentBridgeNotConfigured", "ArtifactDirUnavailable", "ArtifactStore",
    "BackendUnavailable", "EVAL_TOOL_NAME", "EvalLive", "EvalOutputSchema", "EvalParamsSchema", "EvalTool", "INTERRUPT_ESCALATION_MS", "IntrospectionFailed", "Kernel",
    "InvalidCwd", "InvalidEvalParams", "InvalidSettings", "InvalidTimeout", "KernelClosed", "KernelDied", "KernelKey",
    "KernelOutput", "KernelRegistry", "KernelSpawner", "KernelStartError", "KernelTimings", "KvRefused", "KvStore",
    "LimitsUnavailable", "NodeKernelSpawnerLive", "OutputSink", "PrivateDirRefused", "PythonRuntime",
    "PythonUnavailable", "RESTART_STATUS_OP", "RuntimeUnavailable", "SHUTDOWN_GRACE_MS", "Sandbox", "SandboxUnavailable", "SessionRecord",
    "SessionRecordError", "Settings", "artifactUri", "checkParams", "clampTimeoutSeconds", "defaultSandboxMode",
    "enabledLanguages", "evalDescription", "evalLayer", "evalParametersSchema", "notebookOf", "notebookOutputs",
    "registeredBackends", "structuredResult"
  ],
  "./ai": ["EvalAiTool", "EvalCallFailed", "EvalSession", "EvalToolkit", "EvalToolkitLive", "languageModelBridge"],
  "./cluster": ["InvalidClusterSettings", "evalClusterLayer", "resolveClusterSettings", "runnerLayer"],
  "./render": [
    "EXECUTION_MAX_DISPLAY_COLUMNS", "EXECUTION_PREVIEW_LINES", "EXECUTION_STREAMING_LINE_CAP", "TOOL_PREVIEW_LINES",
    "clampLine", "displayColumns", "finishExecution", "htmlToMarkdown", "pushExecutionOutput", "renderBundle",
    "renderExecution", "renderExecutionView", "renderOutputsAsText", "renderToolCell", "startExecution"
  ],
  "./testing": ["allExited", "lastSpawn", "makeScriptedSpawner"],
  "./tracing": ["TracingLive"]
}

const entries = Object.entries(packageJson.exports).flatMap(([subpath, target]) =>
  typeof target === "string" ? [] : [{ subpath, target }]
)

/** The source barrel an entry is built from: `./dist/render.js` -> `src/render.ts`. */
const sourceOf = (built: string): string => path.join(root, built.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts"))

/** What `import("veyyon-eval/<subpath>")` loads; the test config resolves each to its source barrel. */
const importEntry = (subpath: string): Promise<Record<string, unknown>> => {
  switch (subpath) {
    case ".":
      return import("veyyon-eval")
    case "./ai":
      return import("veyyon-eval/ai")
    case "./cluster":
      return import("veyyon-eval/cluster")
    case "./render":
      return import("veyyon-eval/render")
    case "./testing":
      return import("veyyon-eval/testing")
    case "./tracing":
      return import("veyyon-eval/tracing")
    default:
      throw new Error(`no import written for ${subpath}: add it here and to \`expected\``)
  }
}

describe("package entries", () => {
  it("exports exactly the entries listed here", () => {
    expect(entries.map((e) => e.subpath).sort()).toEqual(Object.keys(expected).sort())
  })

  it.each(entries)("$subpath is built from a barrel of its own name, with matching types, for import and require alike", ({ subpath, target }) => {
    const name = subpath === "." ? "index" : subpath.slice(2)
    expect(Object.keys(target)).toEqual(["types", "default"])
    expect(target.default).toBe(`./dist/${name}.js`)
    expect(target.types).toBe(`./dist/${name}.d.ts`)
    expect(NodeFs.existsSync(sourceOf(target.default))).toBe(true)
  })

  it.each(entries)("$subpath exports exactly its listed names", async ({ subpath }) => {
    const module = await importEntry(subpath)
    expect(Object.keys(module).sort()).toEqual([...expected[subpath]!].sort())
    for (const name of Object.keys(module)) expect(module[name]).toBeDefined()
  })

  it.each(entries)("$subpath gives every export a one-line doc comment", ({ target }) => {
    const lines = NodeFs.readFileSync(sourceOf(target.default), "utf8").split("\n")
    const undocumented = lines.flatMap((line, index) =>
      line.startsWith("export ") && !/^\/\*\* .+ \*\/$/.test(lines[index - 1] ?? "") ? [line] : []
    )
    expect(undocumented).toEqual([])
    expect(lines.filter((line) => line.startsWith("export ")).every((line) => line.includes(" from \"./"))).toBe(true)
  })

  it("keeps cluster mode, renderers and fakes out of the root entry", async () => {
    const rootNames = new Set(Object.keys(await importEntry(".")))
    for (const subpath of ["./cluster", "./render", "./testing"]) {
      for (const name of expected[subpath]!) expect({ subpath, name, inRoot: rootNames.has(name) }).toEqual({ subpath, name, inRoot: false })
    }
  })
})
