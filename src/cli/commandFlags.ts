/**
 * The table `checkArgv` checks a command line against, read from the `effect/cli`
 * commands themselves (`CommandSpec` lists every flag of a command with its aliases,
 * negation, value type and metavar, the built-in `--help` and the like included, and
 * its positional arguments and subcommands), so flags are declared once, where they
 * are parsed.
 */
import * as Option from "effect/Option"
import { type Command, CommandSpec } from "effect/cli"
import type { CommandFlags, FlagInfo } from "./argvCheck.ts"

const spelled = (name: string): string => (name.length === 1 ? `-${name}` : `--${name}`)

const placeholderOf = (metavar: string): string => metavar.replace(/^<(.*)>$/, "$1")

const infoOf = (flag: CommandSpec.Flag): FlagInfo =>
  flag.type._tag === "Boolean" || flag.optionalValue !== undefined
    ? { takesValue: false }
    : { takesValue: true, placeholder: placeholderOf(flag.metavar ?? flag.typeName) }

/** The flags of `command`, with the tables of its subcommands, all the way down. */
export const commandFlags = (command: Command.Command.Any): CommandFlags => {
  const spec = Option.getOrThrow(CommandSpec.resolve(command, [command.name]))
  const flags = new Map<string, FlagInfo>()
  for (const flag of spec.flags) {
    const info = infoOf(flag)
    for (const name of [flag.name, ...flag.aliases]) flags.set(spelled(name), info)
    if (flag.negation !== undefined) flags.set(`--${flag.negation}`, { takesValue: false })
  }
  const subcommands = command.subcommands.flatMap((group) => group.commands.map(commandFlags))
  return {
    name: spec.name,
    flags,
    subcommands: new Map(subcommands.map((sub) => [sub.name, sub])),
    takesArguments: spec.arguments.length > 0
  }
}
