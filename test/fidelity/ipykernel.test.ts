/**
 * Differential test: the corpus runs through our runner and through Debian's ipykernel on
 * the same interpreter; every cell must match on every compared field, except the accepted
 * differences the corpus lists (and each of those must still differ).
 *
 * Normalised on both sides before comparing, because they vary run to run: object addresses
 * (`0x…`), durations (`12.3 ms`), the timeit loop count when it is auto-ranged, the timeit
 * slow-run warning (it depends on machine load), each kernel's own working directory, and a
 * SyntaxError's file name. Tracebacks are not compared (ipykernel colours them and names cells
 * after temporary files); the error's class and message are.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { findPythonWith, integrationEnabled } from "../support/python.ts"
import { type Bundle, type Cell, killAll, STATUS_MIME, startKernel } from "../runner/harness.ts"
import { CORPUS, type Field } from "./corpus.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const HERE = path.dirname(fileURLToPath(import.meta.url))
const DRIVER = path.join(HERE, "ipykernel_driver.py")
const MODULES = ["ipykernel", "jupyter_client", "IPython", "matplotlib", "pandas", "numpy", "PIL"]

/** Generous liveness bound for the whole corpus on one kernel, on a loaded machine. */
const CORPUS_LIVENESS_MS = 600_000

interface Output {
  readonly kind: "result" | "display"
  readonly data: Bundle
}

interface Observed {
  readonly status: string
  readonly error: { readonly ename: string; readonly evalue: string } | null
  readonly stdout: string
  readonly stderr: string
  readonly outputs: ReadonlyArray<Output>
}

const python = integrationEnabled() ? findPythonWith(MODULES) : undefined
const noIpykernel = skipReason(
  integrationOff(),
  python === undefined && `no interpreter imports ${MODULES.join(", ")} (apt-get install python3-ipykernel python3-matplotlib python3-pandas python3-pil)`
)

const normalize = (text: string, cwd: string): string =>
  text
    .split(cwd).join("<CWD>")
    .replace(/0x[0-9a-fA-F]+/g, "0x…")
    .replace(/\b\d+(?:\.\d+)?(?:e[+-]?\d+)? ?(?:ns|µs|us|ms|s)\b/g, "<T>")
    .replace(/\b\d+(?:min|h|d)(?: <T>)?/g, "<T>")
    .replace(/The slowest run took [\d.]+ times longer than the fastest\. This could mean that an intermediate result is being cached\.\n/g, "")

/** The loop count of an auto-ranged timeit depends on the machine's speed at that moment. */
const normalizeLoops = (text: string, code: string): string =>
  /%timeit(?![^\n]*-n)/.test(code) ? text.replace(/[\d,]+ loops? each/g, "N loops each") : text

const IMAGE = /^image\//

const outputView = (output: Output, cwd: string, code: string) => {
  const mimes = Object.keys(output.data).filter((mime) => mime !== STATUS_MIME).sort()
  const plain = output.data["text/plain"]
  return {
    kind: output.kind,
    mimes,
    images: mimes.filter((mime) => IMAGE.test(mime)).length,
    plain: typeof plain === "string" ? normalizeLoops(normalize(plain, cwd), code) : plain,
    html: output.data["text/html"] ?? null
  }
}

const view = (cell: Observed, cwd: string, code: string): Record<Field, unknown> => ({
  status: cell.status,
  error: cell.error === null
    ? null
    : {
      ename: cell.error.ename,
      evalue: normalize(cell.error.evalue, cwd).replace(/ \([^()]*, line \d+\)$/, "")
    },
  stdout: normalizeLoops(normalize(cell.stdout, cwd), code),
  stderr: normalize(cell.stderr, cwd),
  outputs: cell.outputs.map((output) => outputView(output, cwd, code))
})

const fromRunner = (cell: Cell): Observed => ({
  status: String(cell.done.status),
  error: cell.error === undefined ? null : { ename: String(cell.error.ename), evalue: String(cell.error.evalue) },
  stdout: cell.stdout,
  stderr: cell.stderr,
  outputs: cell.frames.flatMap((frame): Array<Output> => {
    if (frame.type === "result") return [{ kind: "result", data: frame.bundle as Bundle }]
    if (frame.type === "display" && !(STATUS_MIME in (frame.bundle as Bundle))) {
      return [{ kind: "display", data: frame.bundle as Bundle }]
    }
    return []
  })
})

/** ipykernel's cells with the stderr of each `ipykernelFdRace` cell and its successor joined into the first. */
const joinRacedStderr = (cells: Array<Observed>): Array<Observed> =>
  cells.map((cell, index) => {
    if (CORPUS[index]!.ipykernelFdRace) return { ...cell, stderr: cell.stderr + (cells[index + 1]?.stderr ?? "") }
    if (index > 0 && CORPUS[index - 1]!.ipykernelFdRace) return { ...cell, stderr: "" }
    return cell
  })

const runIpykernel = (interpreter: string, cwd: string): Promise<Array<Observed>> =>
  new Promise((resolve, reject) => {
    const child = spawn(interpreter, [DRIVER], { cwd, stdio: ["pipe", "pipe", "pipe"], detached: true })
    let stdout = ""
    let stderr = ""
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        // already gone
      }
      reject(new Error(`ipykernel driver still running after ${CORPUS_LIVENESS_MS} ms; stderr: ${stderr}`))
    }, CORPUS_LIVENESS_MS)
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      if (code !== 0) reject(new Error(`ipykernel driver exited with ${code}: ${stderr}`))
      else resolve(JSON.parse(stdout) as Array<Observed>)
    })
    child.stdin.end(JSON.stringify(CORPUS.map((cell) => cell.code)))
  })

describe.skipIf(python === undefined)(titled("differential: our runner against ipykernel on the same interpreter", noIpykernel), () => {
  const dirs: Array<string> = []
  let ours: Array<Record<Field, unknown>> = []
  let theirs: Array<Record<Field, unknown>> = []

  const workdir = (): string => {
    const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-fidelity-")))
    dirs.push(dir)
    return dir
  }

  beforeAll(async () => {
    const ourDir = workdir()
    const theirDir = workdir()
    const reference = runIpykernel(python!, theirDir)
    const kernel = await startKernel({ python: python!, initCwd: ourDir })
    const cells: Array<Observed> = []
    for (const cell of CORPUS) cells.push(fromRunner(await kernel.execute(cell.code, { timeoutMs: CORPUS_LIVENESS_MS })))
    kernel.kill()
    ours = cells.map((cell, index) => view(cell, ourDir, CORPUS[index]!.code))
    theirs = joinRacedStderr(await reference).map((cell, index) => view(cell, theirDir, CORPUS[index]!.code))
  }, 2 * CORPUS_LIVENESS_MS)

  afterAll(() => {
    killAll()
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true })
  })

  it("runs every cell on both sides", () => {
    expect(ours).toHaveLength(CORPUS.length)
    expect(theirs).toHaveLength(CORPUS.length)
  })

  it.each(CORPUS.map((cell, index) => [index, cell.code.split("\n").join(" ⏎ ")] as const))(
    "cell %i matches ipykernel: %s",
    (index) => {
      const accepted = CORPUS[index]!.accept ?? {}
      for (const field of ["status", "error", "stdout", "stderr", "outputs"] as const) {
        const reason = accepted[field]
        if (reason === undefined) {
          expect(ours[index]![field], `${field} of cell ${index}`).toEqual(theirs[index]![field])
        } else {
          expect(ours[index]![field], `${field} of cell ${index} is an accepted difference (${reason}) that no longer differs: remove it`)
            .not.toEqual(theirs[index]![field])
        }
      }
    }
  )
})
