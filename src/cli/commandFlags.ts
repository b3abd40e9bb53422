/**
 * The table `checkArgv` checks a command line against, read from the `@effect/cli`
 * commands themselves (their usage lists every flag, whether it takes a value, and the
 * positional arguments; the built-in `--help` and the like come from the library too), so
 * flags are declared once, where they are parsed. The library lists a command's subcommands
 * only one level down, so each command's table is given its subcommands' tables.
 */
import { BuiltInOptions, CommandDescriptor, HelpDoc, Options, Usage } from "@effect/cli"
import { Option } from "effect"
import type { CommandFlags, FlagInfo } from "./argvCheck.ts"

interface Named {
  readonly names: ReadonlyArray<string>
  readonly acceptedValues: Option.Option<string>
}

const namedIn = (usage: Usage.Usage): ReadonlyArray<Named> => {
  switch (usage._tag) {
    case "Named":
      return [usage]
    case "Optional":
    case "Repeated":
      return namedIn(usage.usage)
    case "Alternation":
    case "Concat":
      return [...namedIn(usage.left), ...namedIn(usage.right)]
    case "Empty":
    case "Mixed":
      return []
  }
}

const placeholderOf = (accepted: string): string => accepted.replace(/^<(.*)>$/, "$1")

/** The flags of `command` (its own name in `path`), with the tables of its subcommands. */
export const commandFlags = (
  command: { readonly descriptor: CommandDescriptor.Command<unknown> },
  subcommands: ReadonlyArray<CommandFlags> = []
): CommandFlags => {
  const descriptor = command.descriptor
  const names = new Set(CommandDescriptor.getNames(descriptor))
  const builtIns = Options.getUsage(BuiltInOptions.builtInOptions(descriptor, Usage.empty, HelpDoc.empty))
  const flags = new Map<string, FlagInfo>()
  let takesArguments = false
  for (const named of [...namedIn(CommandDescriptor.getUsage(descriptor)), ...namedIn(builtIns)]) {
    if (!named.names.some((name) => name.startsWith("-"))) {
      if (!named.names.some((name) => names.has(name))) takesArguments = true
      continue
    }
    const info: FlagInfo = Option.match(named.acceptedValues, {
      onNone: () => ({ takesValue: false }),
      onSome: (accepted) => ({ takesValue: true, placeholder: placeholderOf(accepted) })
    })
    for (const name of named.names) flags.set(name, info)
  }
  return {
    name: [...names][0] ?? "",
    flags,
    subcommands: new Map(subcommands.map((sub) => [sub.name, sub])),
    takesArguments
  }
}
