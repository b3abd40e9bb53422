/**
 * `veyyon demo`: a real end-to-end run, several cells in one kernel, each drawn as the
 * tool renderer's code-cell block: state carried from cell to cell, a magic (`%time`),
 * rich displays (an object's `_repr_markdown_`, and an HTML table rendered as Markdown),
 * a PNG built with nothing but the standard library and written to disk, and a
 * matplotlib plot when matplotlib is installed. Exits 0 when every cell ran cleanly.
 */
import { Effect } from "effect"
import { Command } from "effect/cli"
import { renderToolCell } from "../../render/ToolRenderer.ts"
import { resultOutputs, stdoutTarget } from "../cellView.ts"
import { CliFailure, ExitCode, failureOf } from "../exitCodes.ts"
import { cellSucceeded } from "../../services/tool/EvalResult.ts"
import { savedImageLine, type SavedImage } from "../images.ts"
import { type CellContext, cliEvalLayer, runCell, startKernel } from "../session.ts"

/** One step of the demo. */
export interface DemoCell {
  readonly title: string
  readonly code: string
}

/** The demo's cells, in order; later cells use names the earlier ones defined. */
export const DEMO_CELLS: ReadonlyArray<DemoCell> = [
  {
    title: "State: define some data",
    code: [
      "import statistics",
      "samples = [2.5, 3.1, 4.7, 5.0, 6.2, 7.9]",
      "f'{len(samples)} samples defined'"
    ].join("\n")
  },
  {
    title: "State persists: the next cell uses it",
    code: "print(f'mean {statistics.mean(samples):.2f}, stdev {statistics.stdev(samples):.2f}')"
  },
  {
    title: "A magic: %time",
    code: "%time sum(n * n for n in range(200_000))"
  },
  {
    title: "Rich display: an object with _repr_markdown_",
    code: [
      "class Summary:",
      "    def __init__(self, values):",
      "        self.values = values",
      "    def _repr_markdown_(self):",
      "        rows = '\\n'.join(f'| {i} | {v} |' for i, v in enumerate(self.values))",
      "        return '**Samples**\\n\\n| # | value |\\n|---|---|\\n' + rows",
      "",
      "Summary(samples[:3])"
    ].join("\n")
  },
  {
    title: "Rich display: HTML, shown as Markdown",
    code: [
      "display({'text/html': '<p>Range: <b>' + str(min(samples)) + '</b> to <b>' + str(max(samples)) + '</b></p>'",
      "         '<ul><li>six values</li><li>one kernel</li></ul>'}, raw=True)"
    ].join("\n")
  },
  {
    title: "An image: a PNG from zlib + struct, no libraries needed",
    code: [
      "import base64, struct, zlib",
      "",
      "def png(width, height, pixel):",
      "    def chunk(kind, data):",
      "        body = kind + data",
      "        return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body) & 0xFFFFFFFF)",
      "    rows = b''.join(b'\\x00' + b''.join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))",
      "    header = struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)",
      "    return b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', header) + chunk(b'IDAT', zlib.compress(rows, 9)) + chunk(b'IEND', b'')",
      "",
      "gradient = png(96, 64, lambda x, y: (x * 255 // 95, y * 255 // 63, 160))",
      "display({'image/png': base64.b64encode(gradient).decode('ascii')}, raw=True)"
    ].join("\n")
  },
  {
    title: "A plot, when matplotlib is installed",
    code: [
      "import importlib.util",
      "if importlib.util.find_spec('matplotlib') is None:",
      "    print('matplotlib is not installed here; `%pip install matplotlib` and rerun to see a plot.')",
      "else:",
      "    import matplotlib.pyplot as plt",
      "    plt.figure(figsize=(4, 2.5))",
      "    plt.plot(samples, marker='o')",
      "    plt.title('samples')"
    ].join("\n")
  }
]

const write = (lines: ReadonlyArray<string>) => Effect.sync(() => process.stdout.write(lines.join("\n") + "\n"))

const demo = Effect.gen(function*() {
  const color = stdoutTarget().color
  const context: CellContext = { sessionId: "demo", cwd: process.cwd() }
  yield* write([`veyyon demo: ${DEMO_CELLS.length} cells in one Python kernel.`, ""])
  yield* startKernel(context)
  const saved: Array<SavedImage> = []
  const failed: Array<string> = []
  for (const [index, cell] of DEMO_CELLS.entries()) {
    const title = `${index + 1}/${DEMO_CELLS.length} ${cell.title}`
    const run = yield* runCell({ code: cell.code, title, timeout: 120 }, context)
    const block = renderToolCell(
      {
        code: cell.code,
        title,
        outputs: resultOutputs(run.result),
        ...(run.result.truncation === undefined ? {} : { truncation: run.result.truncation })
      },
      { expanded: true, color }
    )
    yield* write([...block, ...run.images.map((image) => "  " + savedImageLine(image)), ""])
    saved.push(...run.images)
    if (!cellSucceeded(run.result) || run.imageProblem !== undefined) failed.push(title)
  }
  if (failed.length > 0) {
    return yield* new CliFailure({
      code: ExitCode.CellFailed,
      sentence: `demo cells failed: ${failed.join("; ")}. Run \`veyyon setup python --check\` to check the interpreter.`
    })
  }
  yield* write([
    "Every cell ran in the same kernel: names defined early were used later, %time ran as a magic,",
    "the displays were rendered as text, and the images were written to disk:",
    ...saved.map((image) => `  ${image.path}`)
  ])
}).pipe(Effect.mapError(failureOf), Effect.provide(cliEvalLayer({ snapshots: false })))

/** The `demo` command. */
export const demoCommand = Command.make("demo", {}, () => demo).pipe(
  Command.withDescription("Run an end-to-end demo: state across cells, a magic, rich display, an image saved to disk.")
)
