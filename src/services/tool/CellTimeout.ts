/**
 * The eval cell timeout parameter: seconds, default 30, clamped to 1..3600.
 */
import { Result, Schema } from "effect"

/** Timeout used when the caller gives none. */
export const DEFAULT_TIMEOUT_SECONDS = 30
/** Shortest accepted timeout. */
export const MIN_TIMEOUT_SECONDS = 1
/** Longest accepted timeout (one hour). */
export const MAX_TIMEOUT_SECONDS = 3600

/** A timeout that is not a number at all. */
export class InvalidTimeout extends Schema.TaggedError<InvalidTimeout>()("InvalidTimeout", {
  received: Schema.String
}) {
  override get message(): string {
    return `timeout must be a number of seconds between ${MIN_TIMEOUT_SECONDS} and ${MAX_TIMEOUT_SECONDS} ` +
      `(default ${DEFAULT_TIMEOUT_SECONDS}); got ${this.received}.`
  }
}

const describe = (value: unknown): string => {
  if (typeof value === "number") return String(value)
  if (typeof value === "string") return `the string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + "…" : value)}`
  if (Array.isArray(value)) return "an array"
  return value === null ? "null" : `a value of type ${typeof value}`
}

/**
 * Normalizes a caller's timeout: missing (undefined or null) gives the default, numbers
 * are clamped into range (so Infinity means the maximum), anything else, NaN included,
 * is rejected.
 */
export const clampTimeoutSeconds = (value: unknown): Result.Result<number, InvalidTimeout> => {
  if (value === undefined || value === null) return Result.succeed(DEFAULT_TIMEOUT_SECONDS)
  if (typeof value !== "number" || Number.isNaN(value)) {
    return Result.fail(new InvalidTimeout({ received: describe(value) }))
  }
  return Result.succeed(Math.min(MAX_TIMEOUT_SECONDS, Math.max(MIN_TIMEOUT_SECONDS, value)))
}
