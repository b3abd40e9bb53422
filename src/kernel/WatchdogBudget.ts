/**
 * The watchdog's budget as a pure counter of pauses: bridge calls (and the runner's
 * `timeout` status frames) pause the budget, pauses nest, and only the resume that brings
 * them back to zero starts a fresh full window. The timer does what the returned action says.
 */

/** What the timer must do after a pause or resume. */
export type BudgetAction = "arm" | "disarm" | "none"

/** Outstanding pauses of one cell's budget. */
export interface Budget {
  readonly pauses: number
}

/** A budget with no pauses: its window runs. */
export const running: Budget = { pauses: 0 }

/** The outcome of a pause or resume: the next budget and what the timer must do. */
export interface BudgetStep {
  readonly budget: Budget
  readonly action: BudgetAction
}

/** One more pause; the first one stops the window. */
export const pause = (budget: Budget): BudgetStep => ({
  budget: { pauses: budget.pauses + 1 },
  action: budget.pauses === 0 ? "disarm" : "none"
})

/** One pause fewer; the last one starts a fresh full window. A resume without a pause changes nothing. */
export const resume = (budget: Budget): BudgetStep =>
  budget.pauses === 0
    ? { budget, action: "none" }
    : { budget: { pauses: budget.pauses - 1 }, action: budget.pauses === 1 ? "arm" : "none" }
