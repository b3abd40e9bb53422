import { EventEmitter } from "node:events"
import { describe, expect, it } from "vitest"
import { signalExitCode, STOP_SIGNALS, watchStopSignal } from "../../src/cli/signals.ts"

describe("stop signals", () => {
  it("exit as a shell reports a process a signal ended: 128 + its number", () => {
    expect(signalExitCode("SIGINT")).toBe(130)
    expect(signalExitCode("SIGTERM")).toBe(143)
  })

  it("remembers the first stop signal and stops listening, so a second one meets the other listeners alone", () => {
    const target = new EventEmitter()
    const stopSignal = watchStopSignal(target)
    expect(stopSignal()).toBeUndefined()
    for (const name of STOP_SIGNALS) expect(target.listenerCount(name)).toBe(1)
    target.emit("SIGTERM", "SIGTERM")
    expect(stopSignal()).toBe("SIGTERM")
    for (const name of STOP_SIGNALS) expect(target.listenerCount(name)).toBe(0)
    target.emit("SIGINT", "SIGINT")
    expect(stopSignal()).toBe("SIGTERM")
  })
})
