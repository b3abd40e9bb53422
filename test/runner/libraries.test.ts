import { afterAll, describe, expect, it } from "vitest"
import { findPythonWith, integrationEnabled } from "../support/python.ts"
import { killAll, plainResult, startKernel } from "./harness.ts"
import { integrationOff, titled } from "../support/skip.ts"

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

const interpreterWith = (module: string): string | undefined => {
  if (!integrationEnabled()) return undefined
  return findPythonWith([module])
}

/** Why a library's test is skipped: no interpreter found imports it. */
const noLibrary = (python: string | undefined, module: string): string | undefined =>
  python === undefined ? `neither the default Python nor /usr/bin/python3 can import ${module}` : undefined

const pandasPython = interpreterWith("pandas")
const pilPython = interpreterWith("PIL")
const matplotlibPython = interpreterWith("matplotlib")

const isPng = (base64: unknown): boolean =>
  typeof base64 === "string" && Buffer.from(base64, "base64").subarray(0, 8).equals(PNG_SIGNATURE)

describe.skipIf(!integrationEnabled())(titled("runner display of real libraries", integrationOff()), () => {
  afterAll(() => killAll())

  it.skipIf(pandasPython === undefined)(titled("renders a pandas DataFrame as HTML and text", noLibrary(pandasPython, "pandas")), async () => {
    const kernel = await startKernel({ python: pandasPython! })
    const cell = await kernel.execute(
      "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})\ndisplay(df)\ndf"
    )
    expect(cell.error).toBeUndefined()
    const bundle = cell.results[0]!
    expect(String(bundle["text/html"])).toContain("<table")
    expect(String(bundle["text/plain"])).toMatch(/a\s+b\n0\s+1\s+x\n1\s+2\s+y/)
    expect(cell.displays).toEqual([bundle])
  })

  it.skipIf(pilPython === undefined)(titled("renders a PIL image as PNG", noLibrary(pilPython, "PIL")), async () => {
    const kernel = await startKernel({ python: pilPython! })
    const cell = await kernel.execute("from PIL import Image\nImage.new('RGB', (4, 3), 'red')")
    expect(cell.error).toBeUndefined()
    const bundle = cell.results[0]!
    expect(isPng(bundle["image/png"])).toBe(true)
    expect(String(bundle["text/plain"])).toContain("mode=RGB size=4x3")
  })

  it.skipIf(matplotlibPython === undefined)(titled("sends open matplotlib figures as PNG after the cell and closes them", noLibrary(matplotlibPython, "matplotlib")), async () => {
    const kernel = await startKernel({ python: matplotlibPython! })
    const cell = await kernel.execute(
      "import matplotlib, matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nfig2 = plt.figure()\nplt.show()\nprint('plotted', matplotlib.get_backend())"
    )
    expect(cell.error).toBeUndefined()
    expect(cell.stdout.toLowerCase()).toBe("plotted agg\n")
    expect(cell.stderr).toBe("")
    expect(cell.displays).toHaveLength(2)
    expect(isPng(cell.displays[0]!["image/png"])).toBe(true)
    expect(cell.displays[0]!["text/plain"]).toBe("<Figure size 640x480 with 1 Axes>")
    expect(cell.displays[1]!["text/plain"]).toBe("<Figure size 640x480 with 0 Axes>")
    expect(cell.frames.map((f) => f.type)).toEqual(["started", "stdout", "display", "display", "done"])
    expect(plainResult(await kernel.execute("plt.get_fignums()"))).toBe("[]")
    expect((await kernel.execute("x = 1")).displays).toEqual([])
  })

  it("never imports matplotlib unless a cell does, and defaults MPLBACKEND to Agg", async () => {
    const kernel = await startKernel()
    const cell = await kernel.execute("import sys, os\n('matplotlib' in sys.modules, os.environ.get('MPLBACKEND'))")
    expect(plainResult(cell)).toBe("(False, 'Agg')")
    const custom = await startKernel({ env: { MPLBACKEND: "svg" } })
    expect(plainResult(await custom.execute("import os\nos.environ['MPLBACKEND']"))).toBe("'svg'")
  })
})
