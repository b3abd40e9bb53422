/**
 * Fidelity of sessions that outlive their kernels, on real notebooks not written here: the
 * example notebooks Debian ships in python-nbsphinx-doc and python-notebook-doc. Each
 * notebook's code cells run in order through the real eval tool twice: once in a session
 * left alone, once in a session whose kernel is killed with SIGKILL after every cell (so
 * every cell after the first runs in a new kernel, into which the session's snapshot was
 * restored first). Cell by cell, the two runs must agree on status, execution count (a
 * restore carries the count its snapshot was saved at), error class and message, stdout,
 * stderr, and every display and result (kind, MIME types, each type's content, images by
 * their bytes' digest), except the cells this file lists: each with the fields that differ
 * and why, citing what docs/sessions.md lists as not carried (the phrase must be there), or
 * naming a defect of the restore. A listed cell that no longer differs, or differs in other
 * fields, fails too, so the list stays true. The comparison is printed, naming those cells.
 *
 * Both sessions run the same small cell after each notebook cell: it prints the kernel's pid
 * and sets `_nbfidelity_tick` to the notebook cell's number, the same in both sessions. A
 * namespace a cell left as it was is not saved again (the snapshot stays as of the last cell
 * that changed it, and a restore sets the execution count back to that cell's), and then
 * nothing on disk says the snapshot after a cell is done; the tick makes every one new. The
 * killed session waits until the snapshot as of that small cell is saved, kills the kernel
 * and waits until it is reaped. Each of its cells after the first must say it was restored
 * as of the cell just before it.
 *
 * Normalised on both sides, as they vary between any two runs: object addresses (`0x…`),
 * durations, and the ids and date matplotlib writes into an SVG. The restore notice is not
 * an output (it is the result's `notice`), so it needs no normalising.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { gunzipSync } from "node:zlib"
import { createHash } from "node:crypto"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ManagedRuntime } from "effect"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import type { EvalResult } from "../../src/services/tool/EvalTool.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { sessionArtifactsDir } from "../../src/services/output/ArtifactStore.ts"
import { snapshotsRoot } from "../../src/services/snapshots/FileSnapshotStore.ts"
import { procStat, waitUntil } from "../support/process.ts"
import { findPythonWith, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { tempDir } from "../support/tempDirs.ts"

const MODULES = ["matplotlib", "pandas", "numpy", "PIL", "IPython", "nbformat", "pygments", "jupyter_core"]
const NBSPHINX = "/usr/share/doc/python-nbsphinx/html"
const NOTEBOOK_DOC = "/usr/share/doc/python-notebook-doc/html/examples/Notebook"

/** A compared field of a cell. */
type Field = "status" | "executionCount" | "error" | "stdout" | "stderr" | "outputs"

/**
 * A cell that differs after a restore: the fields, why, and either the words of
 * docs/sessions.md that say that state is not carried (`docs`), or a defect of the restore.
 */
type Difference =
  & { readonly fields: ReadonlyArray<Field>; readonly because: string }
  & ({ readonly docs: string } | { readonly defect: string })

/** One notebook: where Debian puts it, what its cells read from their directory, and what this test knows of its cells. */
interface Notebook {
  readonly name: string
  /** The `.ipynb` path; Debian gzips the larger ones (`.ipynb.gz`), either is read. */
  readonly file: string
  readonly apt: string
  /** Files the cells read, relative to the working directory, each copied from a path Debian installs. */
  readonly files?: Readonly<Record<string, string>>
  /** Code cells (numbered from 1 in the notebook's order) not run, with why. */
  readonly skip?: Readonly<Record<number, string>>
  /** Why the whole notebook cannot run on this interpreter ([major, minor]), if it cannot. */
  readonly unfit?: (version: readonly [number, number]) => string | false
  /** Code cells whose output differs after a restore. */
  readonly differs?: Readonly<Record<number, Difference>>
}

const META_PATH = "the NotebookFinder cell 6 appended to sys.meta_path is not in the new kernel's sys.meta_path"
const PYGMENTS =
  "the pygments PythonLexer `lexer` of cell 9 comes back unusable (AttributeError: '_tokens'): pickle recreates it without " +
  "calling its class, and pygments builds a lexer class's token tables in its metaclass's __call__, so the new process's " +
  "class never has them; the notice counts `lexer` among the names that came back, and docs/sessions.md does not say this"

const NOTEBOOKS: ReadonlyArray<Notebook> = [
  {
    name: "nbsphinx code-cells",
    file: `${NBSPHINX}/code-cells.ipynb`,
    apt: "python-nbsphinx-doc",
    files: { "images/notebook_icon.png": `${NBSPHINX}/_images/notebook_icon.png`, "images/python_logo.svg": `${NBSPHINX}/_images/python_logo.svg` },
    skip: { 13: "fetches an image from the network (embed=True)" },
    differs: {
      30: {
        fields: ["stderr", "outputs"],
        because: "cells 27-29's pd.set_option('display.latex.repr', True) (and the longtable and escape options) are not carried: " +
          "the DataFrame has no text/latex, and pandas' FutureWarning about to_latex is not printed",
        docs: "pandas options"
      }
    }
  },
  {
    name: "nbsphinx gallery/cell-metadata",
    file: `${NBSPHINX}/gallery/cell-metadata.ipynb`,
    apt: "python-nbsphinx-doc",
    differs: {
      5: {
        fields: ["outputs"],
        because: "cell 2's plt.rcParams['image.cmap'] and ['image.origin'] are not carried: the image is drawn with the default colormap and origin",
        docs: "changes to imported modules' globals"
      }
    }
  },
  {
    name: "nbsphinx gallery/thumbnail-from-conf-py",
    file: `${NBSPHINX}/gallery/thumbnail-from-conf-py.ipynb`,
    apt: "python-nbsphinx-doc"
  },
  { name: "nbsphinx allow-errors", file: `${NBSPHINX}/allow-errors.ipynb`, apt: "python-nbsphinx-doc" },
  { name: "nbsphinx hidden-cells", file: `${NBSPHINX}/hidden-cells.ipynb`, apt: "python-nbsphinx-doc" },
  {
    name: "notebook Running Code",
    file: `${NOTEBOOK_DOC}/Running Code.ipynb`,
    apt: "python-notebook-doc",
    skip: { 3: "sleeps 10 s (the notebook's demonstration of an interrupt)" }
  },
  {
    name: "notebook Importing Notebooks",
    file: `${NOTEBOOK_DOC}/Importing Notebooks.ipynb`,
    apt: "python-notebook-doc",
    files: {
      "nbpackage/mynotebook.ipynb": `${NOTEBOOK_DOC}/nbpackage/mynotebook.ipynb`,
      "nbpackage/nbs/other.ipynb": `${NOTEBOOK_DOC}/nbpackage/nbs/other.ipynb`
    },
    skip: {
      17: "copies a notebook into IPython's installed package directory",
      18: "imports the notebook the skipped cell 17 copied"
    },
    // Its NotebookFinder has only find_module, which the import system stopped calling in Python 3.12: there every
    // import of a notebook fails in both runs, and the differences listed below would not be there.
    unfit: ([major, minor]) => (major > 3 || (major === 3 && minor >= 12)) && "its notebook finder has no find_spec, which Python 3.12 requires",
    differs: {
      8: { fields: ["status", "error", "stdout"], because: `${META_PATH}: ModuleNotFoundError`, docs: "changes to imported modules' globals" },
      10: { fields: ["status", "error", "stdout"], because: PYGMENTS, defect: "pickled objects whose class is prepared by its metaclass's __call__" },
      11: { fields: ["status", "error"], because: `${META_PATH}: ImportError`, docs: "changes to imported modules' globals" },
      12: { fields: ["status", "error", "outputs"], because: `uses mynotebook, which cell 11 could not import (${META_PATH})`, docs: "changes to imported modules' globals" },
      13: { fields: ["status", "error", "outputs"], because: `uses mynotebook, which cell 11 could not import (${META_PATH})`, docs: "changes to imported modules' globals" },
      15: { fields: ["status", "error", "stdout"], because: PYGMENTS, defect: "pickled objects whose class is prepared by its metaclass's __call__" },
      16: { fields: ["status", "error", "stdout", "outputs"], because: `${META_PATH}: ImportError`, docs: "changes to imported modules' globals" }
    }
  },
  {
    name: "notebook JavaScript Notebook Extensions",
    file: `${NOTEBOOK_DOC}/JavaScript Notebook Extensions.ipynb`,
    apt: "python-notebook-doc"
  }
]

/** The notebook's file as installed (plain or gzipped), or undefined when its package is not. */
const installed = (file: string): string | undefined => [file, `${file}.gz`].find((candidate) => fs.existsSync(candidate))

/** The code cells' sources of an nbformat 4 notebook, in order. */
const codeCells = (file: string): Array<string> => {
  const raw = fs.readFileSync(file)
  const notebook = JSON.parse((file.endsWith(".gz") ? gunzipSync(raw) : raw).toString("utf8")) as {
    readonly nbformat: number
    readonly cells: ReadonlyArray<{ readonly cell_type: string; readonly source: string | ReadonlyArray<string> }>
  }
  if (notebook.nbformat !== 4) throw new Error(`${file} is nbformat ${notebook.nbformat}, not 4`)
  return notebook.cells.filter((cell) => cell.cell_type === "code").map((cell) => typeof cell.source === "string" ? cell.source : cell.source.join(""))
}

const python = integrationEnabled() ? findPythonWith(MODULES) : undefined
/** The interpreter's [major, minor] version. */
const pythonVersion = (): readonly [number, number] => {
  const [major = 0, minor = 0] = execFileSync(python!, ["-c", "import sys; print(*sys.version_info[:2])"], { encoding: "utf8" }).trim().split(" ").map(Number)
  return [major, minor]
}
const available = NOTEBOOKS.filter((notebook) => installed(notebook.file) !== undefined)
const reason = skipReason(
  integrationOff(),
  python === undefined && `no interpreter imports ${MODULES.join(", ")}`,
  available.length === 0 && "no notebooks installed (apt-get install python-nbsphinx-doc python-notebook-doc)"
)

/** The cell run after notebook cell `index`, in both sessions: it prints the kernel's pid and changes the namespace (see above). */
const pidCell = (index: number): string => `_nbfidelity_tick = ${index}\nprint(__import__('os').getpid())`

// Made only when the tests run: a file whose tests are all skipped runs no afterAll to remove it.
const root = reason === undefined ? tempDir("veyyon-nbfidelity-") : ""
const artifactsDir = path.join(root, "artifacts")
const runtime = reason === undefined
  ? ManagedRuntime.make(evalLayer({ env: false, settings: { artifactsDir, python: { interpreter: python! } } }))
  : undefined
afterAll(async () => {
  await runtime?.dispose()
})

const run = (code: string, sessionId: string, cwd: string): Promise<EvalResult> =>
  runtime!.runPromise(EvalTool.use((tool) => tool.run({ language: "py", code }, { sessionId, cwd })))

/** The execution count of the session's saved Python snapshot, or 0 when there is none (yet). */
const savedAsOf = (sessionId: string): number => {
  try {
    const sealed = JSON.parse(fs.readFileSync(path.join(sessionArtifactsDir(snapshotsRoot(artifactsDir), sessionId), "py.meta"), "utf8")) as { text: string }
    return (JSON.parse(sealed.text) as { asOfCell: number }).asOfCell
  } catch {
    return 0
  }
}

const normalize = (text: string): string =>
  text
    .replace(/\b0x[0-9a-fA-F]+/g, "0x…")
    .replace(/\b\d+(?:\.\d+)?(?:e[+-]?\d+)? ?(?:ns|µs|us|ms|s)\b/g, "<T>")

/** matplotlib's SVG carries the date it was written and ids drawn from a random salt. */
const normalizeSvg = (svg: string): string =>
  svg
    .replace(/<dc:date>[^<]*<\/dc:date>/g, "<dc:date/>")
    .replace(/\b(id="|url\(#|href="#)[A-Za-z0-9_]+/g, "$1…")

const IMAGE = /^image\/(png|jpeg|gif)$/

const bundleView = (bundle: Readonly<Record<string, unknown>>) =>
  Object.fromEntries(
    Object.keys(bundle).sort().map((mime) => {
      const value = bundle[mime]
      if (IMAGE.test(mime)) return [mime, `${String(value).length} base64 chars, sha256 ${createHash("sha256").update(String(value)).digest("hex").slice(0, 16)}`]
      if (typeof value !== "string") return [mime, JSON.parse(normalize(JSON.stringify(value)))]
      return [mime, mime === "image/svg+xml" ? normalizeSvg(value) : normalize(value)]
    })
  )

/** What is compared of one cell's result. */
const view = (result: EvalResult) => ({
  status: result.status,
  executionCount: result.executionCount,
  error: result.error === undefined ? null : { ename: result.error.ename, evalue: normalize(result.error.evalue) },
  stdout: normalize(result.outputs.flatMap((output) => output._tag === "Stdout" ? [output.text] : []).join("")),
  stderr: normalize(result.outputs.flatMap((output) => output._tag === "Stderr" ? [output.text] : []).join("")),
  outputs: result.outputs.flatMap((output): Array<Record<string, unknown>> => {
    if (output._tag === "Display" || output._tag === "Result") {
      return [{ kind: output._tag, images: Object.keys(output.bundle).filter((mime) => IMAGE.test(mime)).length, bundle: bundleView(output.bundle) }]
    }
    return output._tag === "TextOmitted" || output._tag === "OutputsOmitted" ? [{ kind: output._tag, text: output.text }] : []
  })
})

type View = ReturnType<typeof view>

/** The first line of a cell, to name it. */
const titleOf = (code: string): string => {
  const line = code.split("\n").find((text) => text.trim().length > 0) ?? "(empty)"
  return line.length > 60 ? `${line.slice(0, 57)}...` : line
}

/** The fields where two views differ. */
const differingFields = (left: View, right: View): Array<Field> =>
  (Object.keys(left) as Array<Field>).filter((field) => JSON.stringify(left[field]) !== JSON.stringify(right[field]))

interface CellRun {
  readonly index: number
  readonly code: string
  readonly result: EvalResult
}

/** Runs the cells in order in one session; with `kill`, the kernel is killed after each, once its snapshot is saved. */
const runNotebook = async (cells: ReadonlyArray<{ index: number; code: string }>, sessionId: string, cwd: string, kill: boolean) => {
  const runs: Array<CellRun & { readonly pidCount: number }> = []
  for (const cell of cells) {
    const result = await run(cell.code, sessionId, cwd)
    const pidResult = await run(pidCell(cell.index), sessionId, cwd)
    const pid = Number(pidResult.outputs.flatMap((output) => output._tag === "Stdout" ? [output.text] : []).join("").trim())
    if (kill) {
      const saved = await waitUntil(() => savedAsOf(sessionId) >= pidResult.executionCount, 15_000)
      expect(saved, `the snapshot as of cell ${pidResult.executionCount} (after code cell ${cell.index}) was not saved within 15 s`).toBe(true)
      expect(pid, `the pid cell after code cell ${cell.index}: ${pidResult.text}`).toBeGreaterThan(0)
      process.kill(pid, "SIGKILL")
      // Gone and reaped, not only dead: a zombie's parent may not yet have told the kernel's owner, which would
      // send the next cell to it, see it die "during" that cell and run the cell again.
      expect(await waitUntil(() => procStat(pid) === undefined, 20_000)).toBe(true)
    }
    runs.push({ ...cell, result, pidCount: pidResult.executionCount })
  }
  return runs
}

const RESTORED = /restored as of cell (\d+)/

describe.skipIf(reason !== undefined)(titled("notebooks run with the kernel killed after every cell", reason), () => {
  it("every listed difference cites words docs/sessions.md says are not carried, or names a defect", () => {
    const docs = fs.readFileSync(new URL("../../docs/sessions.md", import.meta.url), "utf8").replace(/\s+/g, " ")
    for (const notebook of NOTEBOOKS) {
      for (const [cell, difference] of Object.entries(notebook.differs ?? {})) {
        if ("docs" in difference) expect(docs, `${notebook.name}, code cell ${cell}`).toContain(difference.docs)
      }
    }
  })

  for (const notebook of NOTEBOOKS) {
    const file = installed(notebook.file)
    const unfit = file === undefined ? `${notebook.apt} is not installed` : reason === undefined ? notebook.unfit?.(pythonVersion()) || undefined : undefined
    it.skipIf(unfit !== undefined)(
      titled(`${notebook.name}: every cell as in the uninterrupted run, but those using state not carried`, unfit),
      async () => {
        const cwd = path.join(root, notebook.name.replace(/[^A-Za-z0-9]+/g, "-"))
        fs.mkdirSync(cwd, { recursive: true })
        for (const [target, source] of Object.entries(notebook.files ?? {})) {
          fs.mkdirSync(path.dirname(path.join(cwd, target)), { recursive: true })
          const from = installed(source)
          if (from !== undefined) fs.writeFileSync(path.join(cwd, target), from.endsWith(".gz") ? gunzipSync(fs.readFileSync(from)) : fs.readFileSync(from))
        }
        const cells = codeCells(file!).map((code, at) => ({ index: at + 1, code })).filter((cell) => notebook.skip?.[cell.index] === undefined && cell.code.trim().length > 0)
        const session = cwd.slice(root.length + 1)
        const [plain, killed] = await Promise.all([runNotebook(cells, `${session}-plain`, cwd, false), runNotebook(cells, `${session}-killed`, cwd, true)])

        const lines: Array<string> = []
        const unexpected: Array<string> = []
        let equal = 0
        for (const [at, left] of plain.entries()) {
          const right = killed[at]!
          const fields = differingFields(view(left.result), view(right.result))
          const listed = notebook.differs?.[left.index]
          const label = `code cell ${left.index} (${titleOf(left.code)})`
          if (fields.length === 0) equal++
          if (fields.length > 0 && listed === undefined) {
            unexpected.push(`${label} differs in ${fields.join(", ")}:\n  uninterrupted: ${JSON.stringify(view(left.result))}\n  after restore: ${JSON.stringify(view(right.result))}`)
          }
          if (listed !== undefined) {
            if (fields.length === 0) unexpected.push(`${label} is listed as differing but is equal: ${listed.because}`)
            else if (fields.join() !== listed.fields.join()) {
              unexpected.push(`${label} is listed as differing in ${listed.fields.join(", ")}, but differs in ${fields.join(", ")}:\n  uninterrupted: ${JSON.stringify(view(left.result))}\n  after restore: ${JSON.stringify(view(right.result))}`)
            } else if ("docs" in listed) lines.push(`  differs, not carried ("${listed.docs}"): ${label} in ${fields.join(", ")}: ${listed.because}`)
            else lines.push(`  differs, A DEFECT OF THE RESTORE (${listed.defect}): ${label} in ${fields.join(", ")}: ${listed.because}`)
          }
          if (left.result.notice !== undefined) unexpected.push(`${label}: the uninterrupted run has a notice: ${left.result.notice}`)
          if (at > 0) {
            const asOf = RESTORED.exec(right.result.notice ?? "")
            const before = killed[at - 1]!
            if (asOf === null) unexpected.push(`${label}: no restore notice after the kill: ${right.result.notice ?? "(none)"}`)
            else if (Number(asOf[1]) !== before.pidCount) {
              unexpected.push(`${label}: restored as of cell ${asOf[1]}, not ${before.pidCount}`)
            }
            const notRestored = /Not restored: (.*?)\. Work done after/s.exec(right.result.notice ?? "")
            if (notRestored !== null) lines.push(`  named as not restored before ${label}: ${notRestored[1]}`)
          }
        }
        console.log([`${notebook.name}: ${plain.length} cells run, ${equal} equal after a kill -9 before each`, ...lines, ...unexpected.map((line) => `  UNEXPECTED ${line}`)].join("\n"))
        expect(unexpected).toEqual([])
      },
      300_000
    )
  }
})
