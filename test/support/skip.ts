import { integrationEnabled } from "./python.ts"

/** The first reason given, if any: `skipReason(!ok && "why", missing)` reads left to right. */
export const skipReason = (...reasons: ReadonlyArray<string | false | undefined>): string | undefined =>
  reasons.find((reason): reason is string => typeof reason === "string")

/** A test or describe title carrying why it is skipped, so the run's skip list shows the reason. */
export const titled = (title: string, reason: string | undefined): string =>
  reason === undefined ? title : `${title} (skipped: ${reason})`

/** Why tests that spawn real interpreters are off, or undefined when `npm test` turned them on. */
export const integrationOff = (): string | undefined =>
  integrationEnabled() ? undefined : "VEYYON_PYTHON_INTEGRATION is not 1 (npm test sets it)"
