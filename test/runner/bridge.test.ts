import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { integrationEnabled } from "../support/python.ts"
import { type Frame, type Kernel, killAll, plainResult, startKernel, STATUS_MIME } from "./harness.ts"
import { integrationOff, titled } from "../support/skip.ts"

const isStatus = (frame: Frame, action: string): boolean => {
  const bundle = frame.bundle as Record<string, { op?: string; action?: string }> | undefined
  return frame.type === "display" && bundle?.[STATUS_MIME]?.op === "timeout" && bundle[STATUS_MIME]?.action === action
}

const timeoutEvents = (frames: ReadonlyArray<Frame>): Array<string> =>
  frames.filter((f) => isStatus(f, "pause") || isStatus(f, "resume")).map((f) => (isStatus(f, "pause") ? "pause" : "resume"))

describe.skipIf(!integrationEnabled())(titled("runner host bridge", integrationOff()), () => {
  let kernel: Kernel

  beforeAll(async () => {
    kernel = await startKernel()
    await kernel.execute("import threading, veyyon_runtime as vr")
  })

  afterAll(() => killAll())

  const nextBridge = (id: string, seen: Set<unknown> = new Set()) =>
    kernel.waitFor((f) => f.type === "bridge" && f.id === id && !seen.has(f.callId))

  it("round-trips a call, bracketed by timeout pause and resume", async () => {
    const id = kernel.request("reply = vr.bridge_call('agent', {'prompt': 'hi', 'n': [1, 2]})\nprint('got', reply['text'])\nreply")
    const bridge = await nextBridge(id)
    expect(bridge).toEqual({ type: "bridge", id, callId: expect.any(String), method: "agent", params: { prompt: "hi", n: [1, 2] } })
    kernel.send({ type: "bridge_result", callId: bridge.callId, ok: true, value: { text: "hello" } })
    const cell = await kernel.collect(id)
    expect(cell.frames.map((f) => (f.type === "display" ? (isStatus(f, "pause") ? "pause" : "resume") : f.type))).toEqual([
      "started",
      "pause",
      "bridge",
      "resume",
      "stdout",
      "result",
      "done"
    ])
    expect(cell.stdout).toBe("got hello\n")
    expect(plainResult(cell)).toBe("{'text': 'hello'}")
  })

  it("refuses a call made on behalf of a cell that is no longer running, sending nothing", async () => {
    const id = kernel.request(
      "try:\n    vr.bridge_call('agent', {}, request_id='an-old-cell')\nexcept vr.BridgeError as exc:\n    refused = exc.name\nrefused"
    )
    const cell = await kernel.collect(id)
    expect(plainResult(cell)).toBe("'BridgeCancelled'")
    expect(cell.frames.filter((f) => f.type === "bridge")).toEqual([])
    expect(timeoutEvents(cell.frames)).toEqual([])
  })

  it("raises BridgeError('name: message') when the host answers with an error", async () => {
    const id = kernel.request("vr.bridge_call('completion', {'q': 1})")
    const bridge = await nextBridge(id)
    kernel.send({ type: "bridge_result", callId: bridge.callId, ok: false, error: { name: "AgentFailed", message: "boom" } })
    const cell = await kernel.collect(id)
    expect(cell.error).toMatchObject({ ename: "BridgeError", evalue: "AgentFailed: boom" })
    expect(timeoutEvents(cell.frames)).toEqual(["pause", "resume"])

    const caught = kernel.request(
      "try:\n    vr.bridge_call('agent', None)\nexcept vr.BridgeError as exc:\n    caught = (exc.name, exc.message, str(exc))\ncaught"
    )
    const second = await nextBridge(caught)
    expect(second.params).toEqual({})
    kernel.send({ type: "bridge_result", callId: second.callId, ok: false, error: { name: "NoBridge", message: "not configured" } })
    expect(plainResult(await kernel.collect(caught))).toBe("('NoBridge', 'not configured', 'NoBridge: not configured')")
  })

  it("serves calls from several threads at once, each with its own callId", async () => {
    const id = kernel.request(
      "results = [None] * 3\ndef work(i):\n    results[i] = vr.bridge_call('completion', {'n': i})\n" +
        "threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]\n" +
        "for t in threads: t.start()\nfor t in threads: t.join()\nresults"
    )
    const seen = new Set<unknown>()
    const calls: Array<Frame> = []
    for (let i = 0; i < 3; i++) {
      const call = await nextBridge(id, seen)
      seen.add(call.callId)
      calls.push(call)
    }
    expect(new Set(calls.map((c) => c.callId)).size).toBe(3)
    for (const call of [...calls].reverse()) {
      const n = (call.params as { n: number }).n
      kernel.send({ type: "bridge_result", callId: call.callId, ok: true, value: n * 10 })
    }
    const cell = await kernel.collect(id)
    expect(plainResult(cell)).toBe("[0, 10, 20]")
    const events = timeoutEvents(cell.frames)
    expect(events.filter((e) => e === "pause")).toHaveLength(3)
    expect(events.filter((e) => e === "resume")).toHaveLength(3)
  })

  it("stays interruptible while waiting for the host", async () => {
    const id = kernel.request("vr.bridge_call('agent', {'slow': True})")
    await nextBridge(id)
    kernel.interrupt()
    const cell = await kernel.collect(id)
    expect(cell.error?.ename).toBe("KeyboardInterrupt")
    expect(cell.done).toMatchObject({ status: "error", cancelled: true })
    expect(timeoutEvents(cell.frames)).toEqual(["pause", "resume"])
  })

  it("resumes calls a finished cell left open before its done, and ignores late answers", async () => {
    const id = kernel.request(
      "outcome = []\ndef orphan():\n    try:\n        vr.bridge_call('agent', {})\n    except vr.BridgeError as exc:\n        outcome.append(exc.name)\n" +
        "worker = threading.Thread(target=orphan, daemon=True)\nworker.start()\nimport time\n" +
        "open_calls = vr.bridge_call.__globals__['_bridge_calls']\nwhile not open_calls: time.sleep(0.01)"
    )
    const bridge = await nextBridge(id)
    const cell = await kernel.collect(id)
    expect(timeoutEvents(cell.frames)).toEqual(["pause", "resume"])
    const doneIndex = cell.frames.indexOf(cell.done)
    expect(cell.frames.findIndex((f) => isStatus(f, "resume"))).toBeLessThan(doneIndex)
    kernel.send({ type: "bridge_result", callId: bridge.callId, ok: true, value: "too late" })
    expect(plainResult(await kernel.execute("worker.join(5)\noutcome"))).toBe("['BridgeCancelled']")
    expect(kernel.framesOf(id).filter((f) => isStatus(f, "resume"))).toHaveLength(1)
  })

  it("rejects parameters that are not JSON before asking the host", async () => {
    const cell = await kernel.execute("vr.bridge_call('agent', {'bad': object()})")
    expect(cell.error?.ename).toBe("TypeError")
    expect(cell.frames.some((f) => f.type === "bridge" || isStatus(f, "pause"))).toBe(false)
  })
})
