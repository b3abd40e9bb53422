import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import * as WatchdogBudget from "../../src/kernel/WatchdogBudget.ts"
import { boolean, sized } from "./arbitraries.ts"

describe("WatchdogBudget", () => {
  it("disarms at the first pause and re-arms at the last resume only", () => {
    const first = WatchdogBudget.pause(WatchdogBudget.running)
    expect(first.action).toBe("disarm")
    const second = WatchdogBudget.pause(first.budget)
    expect(second).toEqual({ budget: { pauses: 2 }, action: "none" })
    const one = WatchdogBudget.resume(second.budget)
    expect(one).toEqual({ budget: { pauses: 1 }, action: "none" })
    expect(WatchdogBudget.resume(one.budget)).toEqual({ budget: { pauses: 0 }, action: "arm" })
  })

  it("ignores a resume without a pause", () => {
    expect(WatchdogBudget.resume(WatchdogBudget.running)).toEqual({ budget: WatchdogBudget.running, action: "none" })
  })

  it.prop("over any sequence: the timer runs exactly when no pause is outstanding", [Arbitrary.array(boolean, { maxLength: 60 })], ([ops]) => {
    let budget = WatchdogBudget.running
    let armed = true
    let model = 0
    for (const isPause of ops) {
      const step = isPause ? WatchdogBudget.pause(budget) : WatchdogBudget.resume(budget)
      if (step.action === "arm") {
        expect(armed).toBe(false)
        armed = true
      } else if (step.action === "disarm") {
        expect(armed).toBe(true)
        armed = false
      }
      model = isPause ? model + 1 : Math.max(0, model - 1)
      budget = step.budget
      expect(budget.pauses).toBe(model)
      expect(armed).toBe(model === 0)
    }
  }, sized(60))
})
