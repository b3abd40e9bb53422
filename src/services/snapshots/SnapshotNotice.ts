/**
 * The sentences a restore adds to the next cell's result: what came back, as of which
 * cell, and every name that did not, with why; or why nothing came back.
 */
import type { SkippedName } from "../../kernel/Frame.ts"
import type { SnapshotMeta } from "./SnapshotSeal.ts"

const NAMES_SHOWN = 30

const listed = (names: ReadonlyArray<string>): string =>
  names.length <= NAMES_SHOWN ? names.join(", ") : `${names.slice(0, NAMES_SHOWN).join(", ")} and ${names.length - NAMES_SHOWN} more`

const cellOf = (meta: SnapshotMeta): string =>
  `cell ${meta.asOfCell}${meta.cellTitle === "" ? "" : ` (${JSON.stringify(meta.cellTitle)})`}`

const plural = (count: number, one: string, many: string): string => `${count} ${count === 1 ? one : many}`

/** The first line of a cell's code, shortened, to name the cell in a notice. */
export const cellTitleOf = (code: string): string => {
  const line = code.split("\n").map((text) => text.trim()).find((text) => text.length > 0) ?? ""
  return line.length <= 60 ? line : `${line.slice(0, 57)}...`
}

/** The names a restore left behind: those the snapshot could not hold, then those that did not load. */
export const namesLeft = (meta: SnapshotMeta, skipped: ReadonlyArray<SkippedName>): ReadonlyArray<SkippedName> => {
  const seen = new Set(skipped.map((entry) => entry.name))
  return [...meta.skipped.filter((entry) => !seen.has(entry.name)), ...skipped]
}

/** The notice of a restore into a fresh kernel. */
export const restoredNotice = (meta: SnapshotMeta, restored: ReadonlyArray<string>, skipped: ReadonlyArray<SkippedName>): string => {
  const left = namesLeft(meta, skipped)
  const came = restored.length === 0
    ? "no names came back"
    : `${plural(restored.length, "name", "names")} came back (${listed(restored)})`
  const notBack = left.length === 0
    ? ""
    : ` Not restored: ${left.slice(0, NAMES_SHOWN).map((entry) => `${entry.name}: ${entry.reason}`).join("; ")}${left.length > NAMES_SHOWN ? `; and ${left.length - NAMES_SHOWN} more` : ""}.`
  return `this cell ran in a new ${meta.language} kernel, so the session's state was restored as of ${cellOf(meta)}: ${came}.${notBack} ` +
    `Work done after that cell's snapshot (and anything not restored) must be redone.`
}

/** The notice of a snapshot that was found and refused (never loaded). */
export const refusedNotice = (language: string, reason: string): string =>
  `this cell ran in a new ${language} kernel, and the session's saved state was not loaded: ${reason}. It was discarded; the kernel starts empty.`

/** The notice of a restore that failed as a whole (the kernel was replaced by an empty one). */
export const failedNotice = (meta: SnapshotMeta, reason: string): string =>
  `this cell ran in a new ${meta.language} kernel, and the session's state as of ${cellOf(meta)} could not be restored: ${reason}. The kernel starts empty.`
