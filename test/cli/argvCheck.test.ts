import { describe, expect, it } from "vitest"
import { checkArgv, type CommandFlags, editDistance, isFlagShaped, nearestFlag } from "../../src/cli/argvCheck.ts"
import { commandFlags } from "../../src/cli/commandFlags.ts"
import { evalCommand } from "../../src/cli/commands/eval.ts"
import { mcpCommand } from "../../src/cli/commands/mcp.ts"
import { setupFlags } from "../../src/cli/commands/setup.ts"

const table = (name: string, flags: Record<string, boolean>, subcommands: ReadonlyArray<CommandFlags> = [], takesArguments = false): CommandFlags => ({
  name,
  flags: new Map(Object.entries(flags).map(([flag, takesValue]) => [flag, takesValue ? { takesValue, placeholder: "N" } : { takesValue }])),
  subcommands: new Map(subcommands.map((sub) => [sub.name, sub])),
  takesArguments
})

const run = table("run", { "--count": true, "--quiet": false, "-q": false, "--help": false }, [], true)
const root = table("tool", { "--help": false }, [table("group", { "--help": false }, [table("leaf", { "--check": false })]), run])

describe("flag spelling", () => {
  it("counts edits, a swap of neighbours as one", () => {
    expect(editDistance("timeout", "timeout")).toBe(0)
    expect(editDistance("tiemout", "timeout")).toBe(1)
    expect(editDistance("jsn", "json")).toBe(1)
    expect(editDistance("", "abc")).toBe(3)
    expect(editDistance("kitten", "sitting")).toBe(3)
  })

  it("suggests the closest long flag within one edit (two past four letters), or the only one a prefix begins", () => {
    const known = ["--timeout", "--json", "--file", "--session", "--help", "-h"]
    expect(nearestFlag("--tiemout", known)).toBe("--timeout")
    expect(nearestFlag("--timout", known)).toBe("--timeout")
    expect(nearestFlag("--jsn", known)).toBe("--json")
    expect(nearestFlag("-json", known)).toBe("--json")
    expect(nearestFlag("--JSON", known)).toBe("--json")
    expect(nearestFlag("--sess", known)).toBe("--session")
    expect(nearestFlag("--bogus", known)).toBeUndefined()
    expect(nearestFlag("--jx", known)).toBeUndefined()
    expect(nearestFlag("--he", known)).toBe("--help")
    expect(nearestFlag("--s", known)).toBeUndefined()
    expect(nearestFlag("--jn", known)).toBeUndefined()
    expect(nearestFlag("--se", ["--session", "--seed"])).toBeUndefined()
  })

  it("takes -x, --name and --name=value as flags, and neither -1 nor code with spaces", () => {
    for (const flag of ["-x", "--json", "--timeout=5", "--x-y_z", "--cwd=a b"]) expect(isFlagShaped(flag)).toBe(true)
    for (const argument of ["-1", "-x + 1", "-", "--", "print(1)", "-len('a')", "--=x"]) expect(isFlagShaped(argument)).toBe(false)
  })
})

describe("checkArgv", () => {
  it("walks into subcommands and checks each command's own flags", () => {
    expect(checkArgv(["group", "leaf", "--check"], root)).toEqual({ command: "tool group leaf", flags: new Set(["--check"]) })
    expect(checkArgv(["group", "leaf", "--chek"], root).problem).toBe("unknown flag --chek for tool group leaf; did you mean --check?")
    expect(checkArgv(["group", "--check"], root).problem).toBe("unknown flag --check for tool group; `tool group --help` lists its flags.")
  })

  it("skips a flag's value, whatever it looks like, and knows --name=value", () => {
    expect(checkArgv(["run", "--count", "--bogus", "code"], root)).toEqual({ command: "tool run", flags: new Set(["--count"]) })
    expect(checkArgv(["run", "--count=3", "-q", "--quiet", "code"], root)).toEqual({ command: "tool run", flags: new Set(["--count", "-q", "--quiet"]) })
    expect(checkArgv(["run", "code", "--count"], root).problem).toBe("--count needs a value, e.g. --count N.")
  })

  it("stops at --: what follows is arguments, dashes and all", () => {
    expect(checkArgv(["run", "--quiet", "--", "--bogus", "--also"], root)).toEqual({ command: "tool run", flags: new Set(["--quiet"]) })
    expect(checkArgv(["run", "-x"], root).problem).toBe(
      "unknown flag -x for tool run; `tool run --help` lists its flags. An argument that starts with a dash goes after --, e.g. tool run -- -x"
    )
    expect(checkArgv(["run", "--what=a b"], root).problem).toMatch(/^unknown flag --what for tool run; .* e\.g\. tool run -- ARG$/)
  })

  it("leaves an unknown command to the parser", () => {
    expect(checkArgv(["frobnicate", "--bogus"], root)).toEqual({ command: "tool", flags: new Set() })
  })
})

describe("the flag table of the real commands", () => {
  it("has every flag of eval, whether it takes a value, the built-in ones, and that eval takes code", () => {
    const flags = commandFlags(evalCommand)
    expect(flags.name).toBe("eval")
    expect(flags.takesArguments).toBe(true)
    for (const flag of ["--file", "--timeout", "--cwd", "--session", "--language", "--python", "--log-level", "--completions"]) {
      expect(flags.flags.get(flag)?.takesValue).toBe(true)
    }
    for (const flag of ["--reset", "--json", "--help", "-h", "--version", "--wizard"]) expect(flags.flags.get(flag)?.takesValue).toBe(false)
    expect(flags.flags.get("--timeout")?.placeholder).toBe("SECONDS")
    expect(flags.flags.has("--bogus")).toBe(false)
  })

  it("knows mcp takes no arguments and setup's subcommands have --check", () => {
    expect(commandFlags(mcpCommand).takesArguments).toBe(false)
    expect(commandFlags(mcpCommand).flags.get("--port")?.takesValue).toBe(true)
    expect([...setupFlags.subcommands.keys()].sort()).toEqual(["python", "ruby", "sandbox"])
    for (const sub of setupFlags.subcommands.values()) expect(sub.flags.get("--check")).toEqual({ takesValue: false })
  })
})
