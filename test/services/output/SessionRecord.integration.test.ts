/**
 * Sessions as notebooks: cells run through `EvalTool` (real Python and Node) are kept in
 * the session's state directory and export as notebooks that Jupyter's own `nbformat`
 * validates, with kernelspec and language_info for the cells' language, PNG outputs, and
 * cut text carrying its artifact link.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, ManagedRuntime } from "effect"
import { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import { evalLayer } from "../../../src/layers/EvalLive.ts"
import { EvalTool } from "../../../src/services/tool/EvalTool.ts"
import { notebookOf, notebookOutputs, SessionRecord, sessionCellsDir } from "../../../src/services/output/SessionRecord.ts"
import { findPythonWith, integrationEnabled } from "../../support/python.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"

const nbformatPython = findPythonWith(["nbformat"])
const python = findPythonWith(["matplotlib"])

/** Validates a notebook file with nbformat; returns what it read (cell types, counts, output types). */
const validate = (file: string) =>
  JSON.parse(
    execFileSync(nbformatPython!, ["-c", [
      "import json, sys, nbformat",
      "nb = nbformat.read(sys.argv[1], as_version=4)",
      "nbformat.validate(nb)",
      "print(json.dumps({'kernel': nb.metadata.kernelspec.name, 'language': nb.metadata.language_info.name,",
      " 'cells': [[c.cell_type, c.get('execution_count'), [o.output_type for o in c.get('outputs', [])]] for c in nb.cells]}))"
    ].join("\n"), file], { encoding: "utf8" })
  ) as { kernel: string; language: string; cells: Array<[string, number | null, Array<string>]> }

const artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-record-"))
const runtime = ManagedRuntime.make(evalLayer({
  env: false,
  settings: {
    artifactsDir,
    eval: { js: true },
    output: { maxBytes: 2000, maxLines: 50 },
    ...(python === undefined ? {} : { python: { interpreter: python } })
  }
}))
afterAll(async () => {
  await runtime.dispose()
  fs.rmSync(artifactsDir, { recursive: true, force: true })
})
const run = (sessionId: string, language: "py" | "js", code: string) =>
  runtime.runPromise(Effect.flatMap(EvalTool, (tool) => tool.run({ language, code }, { sessionId, cwd: process.cwd() })))
const exportTo = (sessionId: string, file: string, language?: "py" | "js") =>
  runtime.runPromise(Effect.flatMap(SessionRecord, (record) => record.exportNotebook(sessionId, file, language)))

describe("notebook outputs", () => {
  it("merge adjacent streams, drop status events, keep errors, results and the cut-text marker", () => {
    const outputs = notebookOutputs([
      KernelOutput.Stdout({ text: "a" }),
      KernelOutput.Stdout({ text: "b\n" }),
      KernelOutput.Status({ op: "cd", fields: {} }),
      KernelOutput.Display({ bundle: { "image/png": "iVBOR", "text/plain": "<Figure>", "application/json": { a: 1 } } }),
      KernelOutput.Result({ bundle: { "text/plain": "3" } }),
      KernelOutput.Error({ ename: "E", evalue: "v", traceback: ["E: v"] })
    ], 4, "eval cell timed out")
    expect(outputs).toEqual([
      { output_type: "stream", name: "stdout", text: "ab\n" },
      { output_type: "display_data", data: { "image/png": "iVBOR", "text/plain": "<Figure>", "application/json": { a: 1 } }, metadata: {} },
      { output_type: "execute_result", execution_count: 4, data: { "text/plain": "3" }, metadata: {} },
      { output_type: "error", ename: "E", evalue: "v", traceback: ["E: v"] },
      { output_type: "stream", name: "stderr", text: "eval cell timed out\n" }
    ])
    const notebook = notebookOf([
      { language: "py", source: "1", executionCount: 1, outputs: [] },
      { language: "js", source: "2", executionCount: 1, outputs: [] }
    ]) as { metadata: { kernelspec: { name: string } }; cells: Array<{ cell_type: string }> }
    expect(notebook.metadata.kernelspec.name).toBe("python3")
    expect(notebook.cells.map((cell) => cell.cell_type)).toEqual(["code", "raw"])
  })
})

describe.skipIf(!integrationEnabled() || python === undefined || nbformatPython === undefined)(titled("sessions as notebooks", skipReason(integrationOff(), python === undefined && "no python3 imports matplotlib", nbformatPython === undefined && "python3-nbformat is not installed")), () => {
  it("a Python session exports as a valid notebook with its streams, results, errors, figures and cut text", async () => {
    await run("nb-py", "py", "x = 41\nprint('hello')")
    await run("nb-py", "py", "x + 1")
    await run("nb-py", "py", "1/0")
    await run("nb-py", "py", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);")
    const long = await run("nb-py", "py", "for i in range(500): print('line', i)")
    expect(long.truncation).toBeDefined()
    const file = path.join(artifactsDir, "py.ipynb")
    await exportTo("nb-py", file)
    const read = validate(file)
    expect(read.kernel).toBe("python3")
    expect(read.language).toBe("python")
    expect(read.cells).toEqual([
      ["code", 1, ["stream"]],
      ["code", 2, ["execute_result"]],
      ["code", 3, ["error"]],
      ["code", 4, ["display_data"]],
      ["code", 5, ["stream"]]
    ])
    const notebook = JSON.parse(fs.readFileSync(file, "utf8"))
    expect(Object.keys(notebook.cells[3].outputs[0].data)).toContain("image/png")
    expect(notebook.cells[4].outputs[0].text).toContain(long.truncation!.artifactUri)
    expect(notebook.cells[1].outputs[0].data["text/plain"]).toBe("42")
    const dir = sessionCellsDir(artifactsDir, "nb-py")
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
    for (const name of fs.readdirSync(dir)) expect(fs.statSync(path.join(dir, name)).mode & 0o777).toBe(0o600)
  })

  it("a JavaScript session exports with the JavaScript kernelspec; cells of another language become raw cells", async () => {
    await run("nb-js", "js", "const n = 20")
    await run("nb-js", "js", "n * 2 + 2")
    await run("nb-js", "py", "'a python cell'")
    const file = path.join(artifactsDir, "js.ipynb")
    await exportTo("nb-js", file)
    const read = validate(file)
    expect(read.kernel).toBe("javascript")
    expect(read.language).toBe("javascript")
    expect(read.cells).toEqual([["code", 1, []], ["code", 2, ["execute_result"]], ["raw", null, []]])
    const asPython = path.join(artifactsDir, "js-as-py.ipynb")
    await exportTo("nb-js", asPython, "py")
    expect(validate(asPython).cells.map((cell) => cell[0])).toEqual(["raw", "raw", "code"])
  })
})
