/**
 * Small statistics over samples, in the units they were taken in.
 */

/** The q-quantile (0..1) of the samples by nearest rank; NaN when there are none. */
export const quantile = (samples: ReadonlyArray<number>, q: number): number => {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))
  return sorted[rank]!
}

/** The median of the samples. */
export const median = (samples: ReadonlyArray<number>): number => quantile(samples, 0.5)

/** Milliseconds elapsed since `start` (from `performance.now()`). */
export const since = (start: number): number => performance.now() - start

/** Rounds to a number of significant digits that suits a table. */
export const round = (value: number, digits = 3): number =>
  Number.isFinite(value) ? Number(value.toPrecision(digits)) : value

/** Bytes as mebibytes. */
export const mib = (bytes: number): number => bytes / (1024 * 1024)
