/**
 * Boolean flag parsing shared by settings and environment switches.
 *
 * Accepted spellings (trimmed, case-insensitive): 1/0, true/false, yes/no, on/off.
 */
import { Option } from "effect"

const TRUE_WORDS: ReadonlySet<string> = new Set(["1", "true", "yes", "on"])
const FALSE_WORDS: ReadonlySet<string> = new Set(["0", "false", "no", "off"])

/** The spellings `parseBooleanFlag` understands, for error messages. */
export const BOOLEAN_FLAG_SPELLINGS = "1/0, true/false, yes/no, on/off"

/** Parses one flag value; `None` for anything that is not a recognized spelling. */
export const parseBooleanFlag = (raw: string): Option.Option<boolean> => {
  const word = raw.trim().toLowerCase()
  if (TRUE_WORDS.has(word)) return Option.some(true)
  if (FALSE_WORDS.has(word)) return Option.some(false)
  return Option.none()
}

/** Whether an environment value counts as unset: absent, empty or only whitespace. */
export const isUnsetEnvValue = (raw: string | undefined): boolean =>
  raw === undefined || raw.trim().length === 0
