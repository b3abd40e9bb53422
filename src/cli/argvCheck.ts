/**
 * A command line's flags checked before it is parsed, so an unknown or misspelt flag is
 * a usage error that names it (and the nearest known flag) instead of code to run or a
 * complaint about the argument after it. Plain functions over a table of each command's
 * flags (see `commandFlags.ts`). `--` ends the flags: what follows is arguments, so code
 * that starts with a dash runs as `veyyon eval -- -x`. An argument that only looks like a
 * negative number or holds spaces (`-1`, `-x + 1`) is no flag and passes as it is.
 */

/** What the check knows about one flag. */
export interface FlagInfo {
  /** Whether the next argument (or the part after `=`) is its value. */
  readonly takesValue: boolean
  /** How its value is shown in a hint, e.g. `SECONDS`. */
  readonly placeholder?: string
}

/** One command's flags and subcommands. */
export interface CommandFlags {
  /** The command's name, e.g. `eval`. */
  readonly name: string
  /** Every name of every flag the command accepts, built-in ones (`--help`, `-h`) included. */
  readonly flags: ReadonlyMap<string, FlagInfo>
  readonly subcommands: ReadonlyMap<string, CommandFlags>
  /** Whether the command takes positional arguments (so `--` is worth a hint). */
  readonly takesArguments: boolean
}

/** What the check found: the command the line names, the flags it gave, and the usage problem, if any. */
export interface ArgvCheck {
  readonly command: string
  /** The known flags given before `--`, by the name they were given with. */
  readonly flags: ReadonlySet<string>
  /** The sentence of a usage error; undefined when the flags are fine. */
  readonly problem?: string
}

const FLAG_SHAPE = /^--?[A-Za-z][A-Za-z0-9_-]*(?:=[\s\S]*)?$/

/** Whether an argument is spelled as a flag (`-x`, `--name`, `--name=value`); `-1` and `-x + 1` are not. */
export const isFlagShaped = (argument: string): boolean => FLAG_SHAPE.test(argument)

/** The edit distance between two strings, a swap of two neighbours counting as one edit (optimal string alignment). */
export const editDistance = (a: string, b: string): number => {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, rows[i - 2]![j - 2]! + 1)
      rows[i]![j] = best
    }
  }
  return rows[a.length]![b.length]!
}

const bare = (flag: string): string => flag.replace(/^-+/, "").toLowerCase()

/**
 * The known long flag `given` most likely means: the closest within one edit (two for
 * names over four letters), or the only one it begins; undefined when none is close.
 */
export const nearestFlag = (given: string, known: Iterable<string>): string | undefined => {
  const name = bare(given)
  const long = [...known].filter((flag) => flag.startsWith("--"))
  let best: { readonly flag: string; readonly distance: number } | undefined
  for (const flag of long) {
    const distance = editDistance(name, bare(flag))
    if (distance <= (bare(flag).length > 4 ? 2 : 1) && (best === undefined || distance < best.distance)) best = { flag, distance }
  }
  if (best !== undefined) return best.flag
  const prefixed = name.length >= 2 ? long.filter((flag) => bare(flag).startsWith(name)) : []
  return prefixed.length === 1 ? prefixed[0] : undefined
}

const unknownFlag = (given: string, command: CommandFlags & { readonly path: string }): string => {
  const name = given.split("=")[0]!
  const suggestion = nearestFlag(name, command.flags.keys())
  if (suggestion !== undefined) return `unknown flag ${name} for ${command.path}; did you mean ${suggestion}?`
  const help = `\`${command.path} --help\` lists its flags`
  if (!command.takesArguments) return `unknown flag ${name} for ${command.path}; ${help}.`
  const example = /^[A-Za-z0-9_.=-]+$/.test(given) ? given : "ARG"
  return `unknown flag ${name} for ${command.path}; ${help}. An argument that starts with a dash goes after --, e.g. ${command.path} -- ${example}`
}

/** Checks `args` (the command line after the program's name) against `root`'s table; never throws. */
export const checkArgv = (args: ReadonlyArray<string>, root: CommandFlags): ArgvCheck => {
  let command = { ...root, path: root.name }
  let positional = false
  const given = new Set<string>()
  const found = (problem?: string): ArgvCheck => ({
    command: command.path,
    flags: given,
    ...(problem === undefined ? {} : { problem })
  })
  for (let index = 0; index < args.length; index++) {
    const argument = args[index]!
    if (argument === "--") break
    if (!isFlagShaped(argument)) {
      if (!positional && command.subcommands.size > 0) {
        const sub = command.subcommands.get(argument)
        // An unknown command is the parser's to report.
        if (sub === undefined) return found()
        command = { ...sub, path: `${command.path} ${sub.name}` }
      } else {
        positional = true
      }
      continue
    }
    const equals = argument.startsWith("--") ? argument.indexOf("=") : -1
    const name = equals === -1 ? argument : argument.slice(0, equals)
    const flag = command.flags.get(name)
    if (flag === undefined) return found(unknownFlag(argument, command))
    given.add(name)
    if (!flag.takesValue || equals !== -1) continue
    if (index + 1 >= args.length) return found(`${name} needs a value, e.g. ${name} ${flag.placeholder ?? "VALUE"}.`)
    index++
  }
  return found()
}
