import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { findPythonWith, integrationEnabled } from "../support/python.ts"
import { type Frame, type Kernel, killAll, plainResult, startKernel } from "./harness.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const tracebackText = (frame: Frame | undefined): string =>
  ((frame?.traceback ?? []) as Array<string>).join("\n")

describe.skipIf(!integrationEnabled())(titled("runner: cell names, fd 2, agent-facing details", integrationOff()), () => {
  let kernel: Kernel

  beforeAll(async () => {
    kernel = await startKernel()
    const prelude = await kernel.execute("PRELUDE = 1", { silent: true, storeHistory: false })
    expect(prelude.done.status).toBe("ok")
  })

  afterAll(() => killAll())

  it("names cells by their execution count; silent and unstored requests take no number", async () => {
    const first = await kernel.execute("1 / 0")
    expect(first.done.executionCount).toBe(1)
    expect(tracebackText(first.error)).toContain('File "<cell-1>", line 1')
    await kernel.execute("def boom():\n    raise ValueError('x')", { silent: true, storeHistory: false })
    await kernel.execute("hidden = 1", { storeHistory: false })
    const second = await kernel.execute("boom()")
    expect(second.done.executionCount).toBe(2)
    const text = tracebackText(second.error)
    expect(text).toContain('File "<cell-2>", line 1')
    expect(text).toMatch(/File "<hidden-\d+>", line 2, in boom/)
  })

  it("keeps what a cell writes to fd 2 in that cell, every time", async () => {
    for (let round = 0; round < 20; round++) {
      const writer = await kernel.execute("import os\nos.write(2, b'raw fd2\\n'); None")
      const next = await kernel.execute("print('next')")
      expect(writer.stderr).toBe("raw fd2\n")
      expect(next.stderr).toBe("")
      expect(next.stdout).toBe("next\n")
    }
    const child = await kernel.execute("import subprocess\nsubprocess.run(['sh', '-c', 'echo child-err >&2']); None")
    expect(child.stderr).toBe("child-err\n")
  })

  it("prints results with IPython's pretty printer", async () => {
    expect(plainResult(await kernel.execute("type(1), [type(v) for v in ('a', 2.0)]"))).toBe("(int, [str, float])")
    expect(plainResult(await kernel.execute("list(range(30))"))).toBe(
      "[" + Array.from({ length: 30 }, (_, i) => String(i)).join(",\n ") + "]"
    )
  })
})

const mplPython = integrationEnabled() ? findPythonWith(["matplotlib"]) : undefined

describe.skipIf(mplPython === undefined)(titled("runner: figures as results", skipReason(integrationOff(), mplPython === undefined && "no python3 imports matplotlib")), () => {
  let kernel: Kernel

  beforeAll(async () => {
    kernel = await startKernel({ python: mplPython! })
  })

  afterAll(() => killAll())

  it("renders a returned figure once, as the result, and flushes the other open figures", async () => {
    const cell = await kernel.execute(
      "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nother = plt.figure()\nplt.plot([3])\nfig",
      { timeoutMs: 120_000 }
    )
    expect(cell.error).toBeUndefined()
    expect(cell.results).toHaveLength(1)
    expect(Object.keys(cell.results[0]!).sort()).toEqual(["image/png", "text/plain"])
    expect(cell.displays).toHaveLength(1)
    expect(Object.keys(cell.displays[0]!).sort()).toEqual(["image/png", "text/plain"])
    expect(plainResult(await kernel.execute("import matplotlib.pyplot as plt\nplt.get_fignums()"))).toBe("[]")
  })

  it("shows a closed figure returned as the result, and an empty one as text", async () => {
    const closed = await kernel.execute("f, a = plt.subplots()\na.plot([1])\nplt.close(f)\nf")
    expect(Object.keys(closed.results[0]!).sort()).toEqual(["image/png", "text/plain"])
    expect(closed.displays).toHaveLength(0)
    const empty = await kernel.execute("plt.figure();")
    expect(empty.displays).toEqual([{ "text/plain": "<Figure size 640x480 with 0 Axes>" }])
  })

  it("renders SVG after %config InlineBackend.figure_format = 'svg'", async () => {
    await kernel.execute("%config InlineBackend.figure_format = 'svg'")
    const cell = await kernel.execute("plt.plot([1, 2]);")
    expect(Object.keys(cell.displays[0]!).sort()).toEqual(["image/svg+xml", "text/plain"])
    await kernel.execute("%config InlineBackend.figure_format = 'png'")
    const bad = await kernel.execute("%config Application.log_level = 10")
    expect(bad.error?.ename).toBe("UsageError")
  })
})
