/**
 * The CLI's pieces without a Python: the REPL's completeness rule, the eval inputs,
 * exit-code mapping, the cell views, and the command line's usage errors run in process.
 */
import { Effect, Option, Result } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterEach, describe, expect, it, vi } from "vitest"
import { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import { InvalidCwd } from "../../src/services/registry/KernelRegistry.ts"
import { PythonUnavailable } from "../../src/backends/python/PythonRuntime.ts"
import { parseTimeout, readCode, type CodeSources } from "../../src/cli/cellInput.ts"
import { type ErrorTarget, makeCellView, type ViewTarget } from "../../src/cli/cellView.ts"
import { program } from "../../src/cli/cli.ts"
import { type CliFailure, ExitCode, exitCodeOf, failureOf } from "../../src/cli/exitCodes.ts"
import { cellSource, inspectionLine, isCompleteCell } from "../../src/cli/replInput.ts"
import { withSpinner } from "../../src/cli/spinner.ts"
import { describeInterpreter, describeKernelCheck } from "../../src/cli/commands/setup.ts"
import { checkCellProblem } from "../../src/cli/kernelCheck.ts"
import { tempDir } from "./support.ts"
import { evalResult } from "../support/evalResult.ts"

describe("REPL input: when a cell is complete", () => {
  const complete = (text: string) => isCompleteCell(text.split("\n"))

  it("a simple statement or expression is complete at the end of its line", () => {
    expect(complete("x = 1")).toBe(true)
    expect(complete("print('a: b')")).toBe(true)
    expect(complete("d = {'a': 1}")).toBe(true)
    expect(complete("x = 1  # comment with ( and :")).toBe(true)
    expect(complete("s = 'unclosed")).toBe(true)
  })

  it("open brackets, triple quotes and trailing backslashes continue; closing them completes", () => {
    expect(complete("x = (1,")).toBe(false)
    expect(complete("x = (1,\n 2)")).toBe(true)
    expect(complete("s = '''start")).toBe(false)
    expect(complete("s = '''start\nend'''")).toBe(true)
    expect(complete('s = """a\\"""\nb"""')).toBe(true)
    expect(complete("x = 1 + \\")).toBe(false)
    expect(complete("x = 1 + \\\n 2")).toBe(true)
  })

  it("a block (a line ending with ':'), a decorator or a %% cell magic runs at the first empty line", () => {
    expect(complete("def f():")).toBe(false)
    expect(complete("def f():\n    return 1")).toBe(false)
    expect(complete("def f():\n    return 1\n")).toBe(true)
    expect(complete("if (a and\n    b):\n    pass")).toBe(false)
    expect(complete("for i in range(3):  # loop\n    print(i)\n   ")).toBe(true)
    expect(complete("@cache")).toBe(false)
    expect(complete("%%bash\necho (")).toBe(false)
    expect(complete("%%bash\necho (\n")).toBe(true)
  })

  it("line magics and shell escapes are complete whatever they contain", () => {
    expect(complete("%time f(")).toBe(true)
    expect(complete("!echo 'it''s (")).toBe(true)
  })

  it("the source drops trailing empty lines", () => {
    expect(cellSource(["def f():", "    return 1", "", ""])).toBe("def f():\n    return 1")
  })
})

describe("REPL input: obj? inspections", () => {
  it("obj?, obj??, ?obj and ??obj inspect in Python and JavaScript", () => {
    expect(inspectionLine("np.array?")).toEqual({ name: "np.array", detailLevel: 0 })
    expect(inspectionLine("f??")).toEqual({ name: "f", detailLevel: 1 })
    expect(inspectionLine("?x")).toEqual({ name: "x", detailLevel: 0 })
    expect(inspectionLine("??x")).toEqual({ name: "x", detailLevel: 1 })
    expect(inspectionLine("x = y?")).toBeUndefined()
  })

  it("where names may end in ? (Ruby), obj? and ?x stay code; the forms that are not code inspect", () => {
    expect(inspectionLine("list.empty?", true)).toBeUndefined()
    expect(inspectionLine("?x", true)).toBeUndefined()
    expect(inspectionLine("list.empty??", true)).toEqual({ name: "list.empty", detailLevel: 1 })
    expect(inspectionLine("??scale", true)).toEqual({ name: "scale", detailLevel: 1 })
    expect(inspectionLine("?scale", true)).toEqual({ name: "scale", detailLevel: 0 })
  })
})

describe("eval inputs", () => {
  const sources = (over: Partial<CodeSources>): CodeSources => ({
    argument: Option.none(),
    file: Option.none(),
    readStdin: () => Promise.resolve(""),
    stdinIsTerminal: false,
    ...over
  })
  const read = (over: Partial<CodeSources>) => Effect.runPromise(Effect.result(readCode(sources(over))))
  const sentence = (result: Result.Result<unknown, CliFailure>) =>
    Result.isFailure(result) ? `${result.failure.code}: ${result.failure.sentence}` : "ok"

  it("takes the code from the argument, a file, or stdin", async () => {
    const dir = tempDir("veyyon-cli-input-")
    const file = path.join(dir, "cell.py")
    fs.writeFileSync(file, "print(2)\n")
    expect(await read({ argument: Option.some("print(1)") })).toEqual(Result.succeed("print(1)"))
    expect(await read({ file: Option.some(file) })).toEqual(Result.succeed("print(2)\n"))
    expect(await read({ readStdin: () => Promise.resolve("print(3)") })).toEqual(Result.succeed("print(3)"))
    expect(await read({ file: Option.some("-"), readStdin: () => Promise.resolve("print(4)") })).toEqual(Result.succeed("print(4)"))
  })

  it("says what to do when there is no code, two sources, or an unreadable file", async () => {
    expect(sentence(await read({ stdinIsTerminal: true }))).toMatch(/^2: no code to run: pass it as an argument/)
    expect(sentence(await read({ readStdin: () => Promise.resolve("  \n") }))).toMatch(/^2: no code to run/)
    expect(sentence(await read({ argument: Option.some("1"), file: Option.some("f.py") }))).toBe(
      "2: give the code either as an argument or with --file, not both."
    )
    expect(sentence(await read({ file: Option.some("/no/such/cell.py") }))).toBe(
      "2: cannot read --file /no/such/cell.py: it does not exist. Pass a readable file of code, or - for stdin."
    )
  })

  it("--timeout is clamped to 1..3600 with a note, and must be a number", () => {
    expect(parseTimeout(Option.none())).toEqual(Result.succeed({ seconds: undefined }))
    expect(parseTimeout(Option.some("12.5"))).toEqual(Result.succeed({ seconds: 12.5 }))
    expect(parseTimeout(Option.some("0"))).toEqual(
      Result.succeed({ seconds: 1, note: "--timeout 0 is outside 1..3600 seconds; using 1." })
    )
    expect(parseTimeout(Option.some("1e9"))).toEqual(
      Result.succeed({ seconds: 3600, note: "--timeout 1e9 is outside 1..3600 seconds; using 3600." })
    )
    const bad = parseTimeout(Option.some("ten"))
    expect(Result.isFailure(bad) && bad.failure.code).toBe(ExitCode.Usage)
    expect(Result.isFailure(bad) && bad.failure.sentence).toBe(
      '--timeout must be a number of seconds between 1 and 3600 (default 30); got the string "ten".'
    )
    expect(Result.isFailure(parseTimeout(Option.some(" ")))).toBe(true)
  })
})

describe("exit codes", () => {
  it("maps bad input to 2, a missing backend to 3 and a lost kernel to 1", () => {
    expect(exitCodeOf(new InvalidCwd({ cwd: "/x", problem: "it does not exist" }))).toBe(ExitCode.Usage)
    expect(exitCodeOf(new PythonUnavailable({ reason: "not-found", detail: "none", tried: [], fix: "install it" }))).toBe(
      ExitCode.BackendUnavailable
    )
    expect(exitCodeOf({ _tag: "KernelDied", message: "it died" })).toBe(ExitCode.CellFailed)
    const failure = failureOf(new InvalidCwd({ cwd: "/x", problem: "it does not exist" }))
    expect(failure.sentence).toBe("cannot run a cell in /x: it does not exist. Pass an existing directory as cwd.")
  })
})

const result = evalResult

const recordingTarget = (live: boolean): ViewTarget & { readonly written: () => string } => {
  let text = ""
  return { write: (chunk) => (text += chunk), live, color: false, columns: 80, rows: 24, written: () => text }
}

const recordingErrors = (): ErrorTarget & { readonly written: () => string } => {
  let text = ""
  return { write: (chunk) => (text += chunk), color: false, written: () => text }
}

describe("cell views", () => {
  it("off a terminal, output goes to stdout and the cell's stderr and traceback to stderr as they arrive; the notices follow on stderr", () => {
    const target = recordingTarget(false)
    const errors = recordingErrors()
    const view = makeCellView(target, errors)
    view.onEvent(KernelOutput.Stdout({ text: "partial" }))
    view.onEvent(KernelOutput.Stderr({ text: "warning: careful\n" }))
    view.onEvent(KernelOutput.Result({ bundle: { "text/plain": "42" } }))
    expect(target.written()).toBe("partial\n42\n")
    expect(errors.written()).toBe("warning: careful\n")
    const error = KernelOutput.Error({ ename: "ValueError", evalue: "bad", traceback: ["Traceback (most recent call last):", "ValueError: bad"] })
    view.onEvent(error)
    view.finish(result({ status: "error", outputs: [KernelOutput.Stdout({ text: "partial" }), error] }))
    expect(target.written()).toBe("partial\n42\n")
    expect(errors.written()).toBe("warning: careful\nTraceback (most recent call last):\nValueError: bad\n✗ ValueError: bad\n")
  })

  it("a timed-out cell ends with the timeout notice, on stderr", () => {
    const target = recordingTarget(false)
    const errors = recordingErrors()
    const view = makeCellView(target, errors)
    view.finish(result({ cancelled: true, timedOut: true, notice: "eval cell timed out after 1s; kernel interrupted." }))
    expect(target.written()).toBe("")
    expect(errors.written()).toBe("⏱ eval cell timed out after 1s; kernel interrupted.\n")
  })

  it("on a terminal, the streaming view is redrawn in place and replaced by the full output, the traceback moving to stderr", async () => {
    const target = recordingTarget(true)
    const errors = recordingErrors()
    const view = makeCellView(target, errors)
    for (let index = 0; index < 30; index++) view.onEvent(KernelOutput.Stdout({ text: `line ${index}\n` }))
    await new Promise((resolve) => setTimeout(resolve, 120))
    const streamed = target.written()
    expect(streamed).toContain("… 10 more lines (all shown when the cell ends)")
    expect(streamed).not.toContain("ctrl+o")
    expect(streamed).not.toContain("line 9\n")
    expect(streamed).toContain("line 29\n")
    expect(errors.written()).toBe("")
    const error = KernelOutput.Error({ ename: "KeyError", evalue: "'k'", traceback: ["KeyError: 'k'"] })
    const outputs = [...Array.from({ length: 30 }, (_, index) => KernelOutput.Stdout({ text: `line ${index}\n` })), error]
    view.finish(result({ status: "error", outputs }))
    const final = target.written().slice(streamed.length)
    expect(final.startsWith("\r\u001b[21A\u001b[J")).toBe(true)
    expect(final).toContain("line 0\n")
    expect(final).toContain("line 29\n")
    expect(final).not.toContain("KeyError")
    expect(errors.written()).toBe("KeyError: 'k'\n✗ KeyError: 'k'\n")
  })
})

describe("setup python --check report", () => {
  it("names the executable behind a shim, the version, the rule and what was passed over", () => {
    expect(describeInterpreter({
      executable: "/opt/py/bin/python3.12",
      foundAt: "/home/u/.pyenv/shims/python3",
      rule: "PATH",
      version: { major: 3, minor: 12, micro: 1 },
      checked: true,
      skipped: [
        { rule: "VIRTUAL_ENV", target: "/gone/bin/python", outcome: "missing" },
        { rule: "CONDA_PREFIX", target: undefined, outcome: "unset" }
      ]
    })).toEqual([
      "interpreter  /opt/py/bin/python3.12",
      "found at     /home/u/.pyenv/shims/python3",
      "version      3.12.1",
      "rule         PATH: python3/python on PATH",
      "passed over  VIRTUAL_ENV: /gone/bin/python does not exist",
      "             CONDA_PREFIX: not set"
    ])
    expect(describeKernelCheck({ millis: 180 })).toEqual([
      "kernel       started and ran a cell in 180 ms",
      "ok: eval cells will run with this interpreter."
    ])
  })

  it("a kernel check passes only on the cell's own output, and otherwise says what went wrong", () => {
    const done = (over: Partial<Parameters<typeof KernelOutput.Done>[0]> = {}) =>
      KernelOutput.Done({ status: "ok", executionCount: 1, cancelled: false, timedOut: false, killed: false, ...over })
    expect(checkCellProblem([KernelOutput.Stdout({ text: "42\n" }), done()], "42")).toBeUndefined()
    expect(checkCellProblem([KernelOutput.Stdout({ text: "41\n" }), done()], "42")).toBe('a trivial cell printed "41\\n" instead of 42')
    expect(checkCellProblem([done()], "42")).toBe('a trivial cell printed "" instead of 42')
    expect(checkCellProblem([KernelOutput.Error({ ename: "ImportError", evalue: "no module named x", traceback: [] }), done({ status: "error" })], "42"))
      .toBe("a trivial cell failed in it: ImportError: no module named x")
    expect(checkCellProblem([done({ cancelled: true, timedOut: true, notice: "eval cell timed out after 1s" })], "42"))
      .toBe("the trivial cell did not finish: eval cell timed out after 1s")
    expect(checkCellProblem([KernelOutput.Stdout({ text: "42\n" })], "42")).toBe("the kernel ended the cell without an outcome")
  })
})

describe("spinner", () => {
  afterEach(() => vi.restoreAllMocks())

  it("shows on stderr only for steps over 300 ms, and erases itself", async () => {
    const writes: Array<string> = []
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      writes.push(String(chunk))
      return true
    })
    await Effect.runPromise(withSpinner("working", true)(Effect.sleep("50 millis")))
    expect(writes).toEqual([])
    await Effect.runPromise(withSpinner("working", true)(Effect.sleep("600 millis")))
    expect(writes[0]).toMatch(/^\r\S working$/)
    expect(writes.length).toBeGreaterThan(2)
    expect(writes.at(-1)).toBe("\r\u001b[K")
    writes.length = 0
    await Effect.runPromise(withSpinner("working", false)(Effect.sleep("400 millis")))
    expect(writes).toEqual([])
  })
})

/** A help text's line listing `command` among the subcommands. */
const subcommandLine = (command: string) => new RegExp(`^SUBCOMMANDS\n(?:  .*\n)*  ${command} `, "m")

describe("the command line in process (no Python needed)", () => {
  afterEach(() => vi.restoreAllMocks())
  const run = async (...args: ReadonlyArray<string>) => {
    const errors: Array<string> = []
    const logs: Array<string> = []
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      errors.push(String(chunk))
      return true
    })
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      logs.push(String(chunk).replace(/\n$/, ""))
      return true
    })
    vi.spyOn(console, "log").mockImplementation((...parts: Array<unknown>) => void logs.push(parts.join(" ")))
    vi.spyOn(console, "error").mockImplementation((...parts: Array<unknown>) => void errors.push(parts.join(" ")))
    const code = await Effect.runPromise(program(["node", "veyyon", ...args]))
    vi.restoreAllMocks()
    return { code, stderr: errors.join(""), stdout: logs.join("\n") }
  }

  it("usage errors exit 2 with a sentence that says what to do", async () => {
    expect(await run("eval", "1", "--file", "cell.py")).toEqual({
      code: 2,
      stderr: "veyyon: give the code either as an argument or with --file, not both.\n",
      stdout: ""
    })
    const setup = await run("setup", "python")
    expect(setup.code).toBe(2)
    expect(setup.stderr).toBe("veyyon: setup python only checks for now: run `veyyon setup python --check`.\n")
    const unknown = await run("frobnicate")
    expect(unknown.code).toBe(2)
  })

  it("an unreadable VEYYON_CLUSTER is a usage error naming the variable, before anything is served", async () => {
    process.env["VEYYON_CLUSTER"] = "please"
    try {
      const mcp = await run("mcp")
      expect(mcp.code).toBe(2)
      expect(mcp.stderr).toContain("VEYYON_CLUSTER")
      expect(mcp.stderr).toContain("\"please\" is not a boolean")
    } finally {
      delete process.env["VEYYON_CLUSTER"]
    }
  })

  it("an unknown or misspelt flag is a usage error naming it (and the flag it is close to), never code to run", async () => {
    expect(await run("eval", "--bogus")).toEqual({
      code: 2,
      stderr: "veyyon: unknown flag --bogus for veyyon eval; `veyyon eval --help` lists its flags. " +
        "An argument that starts with a dash goes after --, e.g. veyyon eval -- --bogus\n",
      stdout: ""
    })
    expect(await run("eval", "--tiemout", "5", "print(1)")).toEqual({
      code: 2,
      stderr: "veyyon: unknown flag --tiemout for veyyon eval; did you mean --timeout?\n",
      stdout: ""
    })
    expect((await run("eval", "--jsn", "print(1)")).stderr).toBe("veyyon: unknown flag --jsn for veyyon eval; did you mean --json?\n")
    expect((await run("eval", "--timeout")).stderr).toBe("veyyon: --timeout needs a value, e.g. --timeout SECONDS.\n")
    expect(await run("mcp", "--htp")).toEqual({ code: 2, stderr: "veyyon: unknown flag --htp for veyyon mcp; did you mean --http?\n", stdout: "" })
    expect(await run("setup", "python", "--chek")).toEqual({
      code: 2,
      stderr: "veyyon: unknown flag --chek for veyyon setup python; did you mean --check?\n",
      stdout: ""
    })
  })

  it("with --json a usage error is a JSON document on stdout, exit 2, nothing on stderr", async () => {
    const unknown = await run("eval", "--json", "--bogus")
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toBe("")
    expect(JSON.parse(unknown.stdout)).toEqual({
      error: { kind: "usage", message: expect.stringMatching(/^unknown flag --bogus for veyyon eval; /) }
    })
    const timeout = await run("eval", "--json", "--timeout", "soon", "1")
    expect(timeout.code).toBe(2)
    expect(timeout.stderr).toBe("")
    expect(JSON.parse(timeout.stdout)).toEqual({
      error: { kind: "usage", message: '--timeout must be a number of seconds between 1 and 3600 (default 30); got the string "soon".' }
    })
    const missing = await run("eval", "--json", "--cwd")
    expect(missing.code).toBe(2)
    expect(JSON.parse(missing.stdout)).toEqual({ error: { kind: "usage", message: "--cwd needs a value, e.g. --cwd DIR." } })
    const language = await run("eval", "--json", "--language", "cobol", "1")
    expect(language.code).toBe(2)
    expect(JSON.parse(language.stdout.split("\n").at(-1)!)).toEqual({ error: { kind: "usage", message: expect.stringContaining('"py" | "js" | "rb"') } })
  })

  it("a cwd that does not exist is bad input: exit 2", async () => {
    const previous = process.env.VEYYON_ARTIFACTS_DIR
    process.env.VEYYON_ARTIFACTS_DIR = tempDir("veyyon-cli-inproc-")
    try {
      const missing = await run("eval", "--cwd", "/no/such/dir", "1")
      expect(missing.code).toBe(2)
      expect(missing.stderr).toBe("veyyon: cannot run a cell in /no/such/dir: it does not exist. Pass an existing directory as cwd.\n")
    } finally {
      if (previous === undefined) delete process.env.VEYYON_ARTIFACTS_DIR
      else process.env.VEYYON_ARTIFACTS_DIR = previous
    }
  })

  it("a bad VEYYON_* setting is bad input: exit 2 naming the variable", async () => {
    process.env.VEYYON_PY = "maybe"
    try {
      const bad = await run("eval", "1")
      expect(bad.code).toBe(2)
      expect(bad.stderr).toContain("VEYYON_PY")
      expect(bad.stderr).toContain('"maybe" is not a boolean')
    } finally {
      delete process.env.VEYYON_PY
    }
  })

  it("--help on each command describes it", async () => {
    const evalHelp = await run("eval", "--help")
    expect(evalHelp.code).toBe(0)
    for (const flag of ["--file FILE", "--timeout SECONDS", "--reset", "--cwd DIR", "--session ID", "--json"]) {
      expect(evalHelp.stdout).toContain(flag)
    }
    const rootHelp = await run("--help")
    expect(rootHelp.code).toBe(0)
    for (const command of ["eval", "repl", "setup", "mcp", "demo"]) expect(rootHelp.stdout).toMatch(subcommandLine(command))
    const setupHelp = await run("setup", "--help")
    expect(setupHelp.code).toBe(0)
    expect(setupHelp.stdout).toMatch(subcommandLine("python"))
    for (const command of [["repl"], ["mcp"], ["demo"], ["setup", "python"]]) {
      const help = await run(...command, "--help")
      expect(help.code).toBe(0)
      expect(help.stdout).toContain("DESCRIPTION")
    }
  })
})
