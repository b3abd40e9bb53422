/**
 * A Python cell's input through the host: input() and sys.stdin send one "input" bridge
 * call each (the watchdog paused meanwhile), the answer is the line read, an EOFError
 * answer is end of input; getpass raises at once without asking; a cell that replaced
 * sys.stdin reads its own stream.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { integrationEnabled } from "../support/python.ts"
import { integrationOff, titled } from "../support/skip.ts"
import { type Kernel, killAll, plainResult, startKernel } from "./harness.ts"

describe.skipIf(!integrationEnabled())(titled("runner input through the host", integrationOff()), () => {
  let kernel: Kernel

  beforeAll(async () => {
    kernel = await startKernel()
  })

  afterAll(() => killAll())

  const answerNext = async (id: string, answer: { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: { readonly name: string; readonly message: string } }) => {
    const bridge = await kernel.waitFor((f) => f.type === "bridge" && f.id === id)
    kernel.send({ type: "bridge_result", callId: bridge.callId, ...answer })
    return bridge
  }

  it("asks the host for input()'s line, echoing the prompt and the line as a terminal does", async () => {
    const id = kernel.request("name = input('Name? ')\nname")
    const bridge = await answerNext(id, { ok: true, value: "Ada" })
    expect(bridge).toMatchObject({ method: "input", params: { prompt: "Name? " } })
    const cell = await kernel.collect(id)
    expect(cell.stdout).toBe("Name? Ada\n")
    expect(plainResult(cell)).toBe("'Ada'")
  })

  it("raises EOFError with the host's sentence when no line comes, and sys.stdin reads end", async () => {
    const refused = kernel.request("input()")
    await answerNext(refused, { ok: false, error: { name: "EOFError", message: "input() got no line: the person declined to answer" } })
    const cell = await kernel.collect(refused)
    expect(cell.error).toMatchObject({ ename: "EOFError", evalue: "input() got no line: the person declined to answer" })
    const read = kernel.request("import sys\nfirst = sys.stdin.readline()\nrest = sys.stdin.readline()\n(first, rest)")
    const first = await answerNext(read, { ok: true, value: "one" })
    const second = await kernel.waitFor((f) => f.type === "bridge" && f.id === read && f.callId !== first.callId)
    kernel.send({ type: "bridge_result", callId: second.callId, ok: false, error: { name: "EOFError", message: "none" } })
    expect(plainResult(await kernel.collect(read))).toBe("('one\\n', '')")
  })

  it("refuses getpass at once, asking nothing, and leaves a cell's own stdin alone", async () => {
    const id = kernel.request("import getpass\ngetpass.getpass()")
    const cell = await kernel.collect(id)
    expect(cell.error?.ename).toBe("EOFError")
    expect(cell.error?.evalue).toContain("never asks a person for a secret")
    expect(cell.frames.filter((f) => f.type === "bridge")).toEqual([])
    const own = await kernel.execute("import io, sys\nsaved = sys.stdin\nsys.stdin = io.StringIO('mine\\n')\ntry:\n    line = input()\nfinally:\n    sys.stdin = saved\nline")
    expect(plainResult(own)).toBe("'mine'")
    expect(own.frames.filter((f) => f.type === "bridge")).toEqual([])
  })
})
