import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { integrationEnabled } from "../support/python.ts"
import { type Kernel, killAll, plainResult, sleep, startKernel } from "./harness.ts"
import { integrationOff, titled } from "../support/skip.ts"

describe.skipIf(!integrationEnabled())(titled("runner SIGINT handling", integrationOff()), () => {
  let kernel: Kernel

  beforeAll(async () => {
    kernel = await startKernel()
  })

  afterAll(() => killAll())

  const interruptAfter = async (code: string, marker: string) => {
    const id = kernel.request(code)
    await kernel.waitForStdout(marker, id)
    kernel.interrupt()
    return kernel.collect(id)
  }

  it("interrupts a sleeping cell, keeps state and reports cancelled", async () => {
    const cell = await interruptAfter("import time\nsurvivor = 41\nprint('ready', flush=True)\ntime.sleep(60)", "ready")
    expect(cell.error).toMatchObject({ ename: "KeyboardInterrupt" })
    expect((cell.error!.traceback as Array<string>).join("\n")).toMatch(/File "<cell-\d+>", line [34]/)
    expect(cell.done).toMatchObject({ status: "error", cancelled: true })
    expect(plainResult(await kernel.execute("survivor + 1"))).toBe("42")
  })

  it("interrupts a busy pure-Python loop", async () => {
    const cell = await interruptAfter("n = 0\nwhile True:\n    n += 1\n    if n == 1000:\n        print('spin', flush=True)", "spin")
    expect(cell.done).toMatchObject({ status: "error", cancelled: true })
    expect(plainResult(await kernel.execute("n >= 1000"))).toBe("True")
  })

  it("interrupts a loop that spends its time printing", async () => {
    const cell = await interruptAfter("i = 0\nwhile True:\n    print('tick', i)\n    i += 1", "tick 100")
    expect(cell.done).toMatchObject({ status: "error", cancelled: true })
    expect(kernel.badLines).toEqual([])
    expect(plainResult(await kernel.execute("'alive'"))).toBe("'alive'")
  })

  it("makes input() wait for the host's answer until SIGINT", async () => {
    const id = kernel.request("answer = input('name? ')")
    const prompt = await kernel.waitForStdout("name? ", id)
    expect(prompt.data).toBe("name? ")
    await sleep(300)
    expect(kernel.framesOf(id).some((f) => f.type === "done")).toBe(false)
    kernel.interrupt()
    const cell = await kernel.collect(id)
    expect(cell.error?.ename).toBe("KeyboardInterrupt")
    expect(cell.done).toMatchObject({ cancelled: true })
    expect(plainResult(await kernel.execute("'answer' in dir()"))).toBe("False")
  })

  it("makes sys.stdin reads wait for the host until SIGINT too", async () => {
    const cell = await interruptAfter("import sys\nprint('reading', flush=True)\nsys.stdin.read()", "reading")
    expect(cell.done).toMatchObject({ status: "error", cancelled: true })
  })

  it("interrupts a shell command and the process it runs", async () => {
    const cell = await interruptAfter("print('go', flush=True)\n!sleep 30", "go")
    expect(cell.done).toMatchObject({ status: "error", cancelled: true })
  })

  it("does not report cancelled when the cell catches the interrupt and finishes", async () => {
    const cell = await interruptAfter(
      "import time\ntry:\n    print('wait', flush=True)\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    caught = True\n'handled'",
      "wait"
    )
    expect(cell.done).toMatchObject({ status: "ok", cancelled: false })
    expect(plainResult(cell)).toBe("'handled'")
  })

  it("does not report a cell's own KeyboardInterrupt as a host cancel", async () => {
    const cell = await kernel.execute("raise KeyboardInterrupt")
    expect(cell.done).toMatchObject({ status: "error", cancelled: false })
  })

  it("ignores SIGINT between cells", async () => {
    kernel.interrupt()
    kernel.interrupt()
    await sleep(200)
    expect(kernel.hasExited).toBe(false)
    const cell = await kernel.execute("survivor")
    expect(plainResult(cell)).toBe("41")
    expect(cell.done).toMatchObject({ status: "ok", cancelled: false })
  })

  it("survives a burst of SIGINTs landing anywhere in a cell and its bookkeeping", async () => {
    const id = kernel.request("import sys\nfor k in range(200000):\n    sys.stdout.write('%d\\n' % k)")
    await kernel.waitForStdout("\n", id)
    for (let shot = 0; shot < 30; shot++) {
      kernel.interrupt()
      await sleep(1)
    }
    const cell = await kernel.collect(id)
    expect(["ok", "error"]).toContain(cell.done.status)
    expect(kernel.badLines).toEqual([])
    for (let round = 0; round < 5; round++) {
      const quick = kernel.request("1 + 1")
      kernel.interrupt()
      await kernel.collect(quick)
    }
    expect(plainResult(await kernel.execute("survivor * 2"))).toBe("82")
    expect(kernel.hasExited).toBe(false)
  })
})
