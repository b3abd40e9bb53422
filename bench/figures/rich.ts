/**
 * Figure 4: 100 displays of a 1 MiB PNG, MB/s of PNG bytes delivered to the host.
 */
import type { BenchContext, FigureResult } from "../context.ts"
import { startFloor } from "../floor.ts"
import { tryJupyter } from "../jupyter.ts"
import { target, type Row } from "../table.ts"
import { runCell } from "../veyyon.ts"

/** Python that defines PNG: a valid 512x682 RGB image of noise, about 1 MiB. */
export const PNG_SETUP = [
  "import random as _r, struct as _s, zlib as _z",
  "def _chunk(kind, data):",
  "    return _s.pack('>I', len(data)) + kind + data + _s.pack('>I', _z.crc32(kind + data) & 0xffffffff)",
  "_rows = _r.Random(7)",
  "_raw = b''.join(b'\\x00' + _rows.randbytes(512 * 3) for _ in range(682))",
  "PNG = (b'\\x89PNG\\r\\n\\x1a\\n' + _chunk(b'IHDR', _s.pack('>IIBBBBB', 512, 682, 8, 2, 0, 0, 0))",
  "       + _chunk(b'IDAT', _z.compress(_raw, 1)) + _chunk(b'IEND', b''))"
].join("\n")

/** Measures figure 4. */
export const rich = async (context: BenchContext): Promise<FigureResult> => {
  const count = context.quick ? 5 : 100
  const notes: Array<string> = []
  const floor = await startFloor(context.python.executable)
  let pngBytes = 0
  let floorMs: number
  let floorCount = 0
  try {
    await floor.run(PNG_SETUP)
    await floor.run("print(len(PNG))", (frame) => {
      if (frame.type === "stdout" && /\d/.test(frame.data ?? "")) pngBytes = Number(frame.data)
    })
    const start = performance.now()
    await floor.run(`for _ in range(${count}):\n    display_png(PNG)`, (frame) => {
      if (frame.type === "display") floorCount++
    })
    floorMs = performance.now() - start
  } finally {
    await floor.close()
  }
  const cellContext = { sessionId: "bench-rich", cwd: context.workDir }
  await context.veyyon.runPromise(runCell({ code: `${PNG_SETUP}\nclass Png:\n    def _repr_png_(self):\n        return PNG` }, cellContext))
  let toolCount = 0
  const start = performance.now()
  const result = await context.veyyon.runPromise(
    runCell({ code: `for _ in range(${count}):\n    display(Png())`, timeout: 600 }, {
      ...cellContext,
      onEvent: (output) => {
        if (output._tag === "Display" && typeof output.bundle["image/png"] === "string") toolCount++
      }
    })
  )
  const toolMs = performance.now() - start
  if (toolCount !== count) notes.push(`veyyon delivered ${toolCount} of ${count} displays`)
  const jupyter = await tryJupyter<{ bytes: number; count: number; ms: number }>(context, notes, "rich", {
    setup: PNG_SETUP,
    code: `for _ in range(${count}):\n    display(Image(data=PNG))`
  })
  if (jupyter !== undefined && jupyter.count !== count) notes.push(`Jupyter delivered ${jupyter.count} of ${count} displays`)
  const rate = (ms: number) => (count * pngBytes) / 1e6 / (ms / 1000)
  const rows: Array<Row> = [
    {
      figure: "4 rich output",
      measure: `${count} displays of a ${(pngBytes / 1048576).toFixed(2)} MiB PNG, EvalTool.run`,
      unit: "MB/s",
      veyyon: rate(toolMs),
      floor: rate(floorMs),
      jupyter: jupyter === undefined ? null : rate(jupyter.ms),
      target: target(">= floor", rate(toolMs), rate(floorMs), "at-least")
    }
  ]
  return {
    id: "rich",
    title: `${count} displays of a PNG`,
    rows,
    details: {
      count,
      pngBytes,
      ms: { tool: toolMs, floor: floorMs, jupyter: jupyter?.ms ?? null },
      delivered: { tool: toolCount, floor: floorCount, jupyter: jupyter?.count ?? null, toolResultImages: result.images.length }
    },
    notes
  }
}
