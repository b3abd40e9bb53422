/**
 * `veyyon` end to end: each test spawns the built CLI (`bin/veyyon.mjs`) as a child
 * process with a real Python. The tests run concurrently, a few children at a time (see `runCli`);
 * help texts and the usage errors that need no Python are covered in process too.
 */
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Schema } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { EvalOutputSchema } from "../../src/services/tool/EvalSchema.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { childEnv, cliEntry, PNG_CELL, PNG_SIGNATURE, repoRoot, runCli, stop, stopAll, tempDir, waitForExit } from "./support.ts"

const python = findPython()
const artifactsDir = tempDir("veyyon-cli-artifacts-")
const env = childEnv(artifactsDir)
const SPAWN_TIMEOUT = 600_000

const noStackTrace = (stderr: string) => expect(stderr).not.toMatch(/^\s+at .+\(.+:\d+:\d+\)$/m)

describe.skipIf(!integrationEnabled() || python === undefined).concurrent(titled("veyyon CLI with a real Python", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  afterAll(stopAll)

  it("eval runs CODE from the argument, prints its output, saves its image, and leaves no kernel behind", async () => {
    const code = ["import os", "x = 20", "print('kernel', os.getpid())", PNG_CELL, "x * 2 + 2"].join("\n")
    const run = await runCli(["eval", code], { env })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^42$/m)
    const saved = /^image saved: (\S+) \[image\/png 4x4, /m.exec(run.stdout)
    expect(saved).not.toBeNull()
    const file = saved![1]!
    expect(file.startsWith(artifactsDir)).toBe(true)
    expect(fs.readFileSync(file).subarray(0, 8)).toEqual(PNG_SIGNATURE)
    const pid = Number(/^kernel (\d+)$/m.exec(run.stdout)![1])
    expect(await waitForExit(pid)).toBe(true)
  }, SPAWN_TIMEOUT)

  it("eval --file with --cwd runs there; a raising cell exits 1, its output on stdout and its stderr and traceback on stderr", async () => {
    const dir = tempDir("veyyon-cli-cwd-")
    const file = path.join(dir, "cell.py")
    fs.writeFileSync(file, "import os, sys\nprint('cwd', os.getcwd())\nprint('careful', file=sys.stderr)\nraise ValueError('bad input')\n")
    const run = await runCli(["eval", "--file", file, "--cwd", dir], { env })
    expect(run.code).toBe(1)
    expect(run.stdout).toBe(`cwd ${fs.realpathSync(dir)}\n`)
    expect(run.stderr).toMatch(/^careful$/m)
    expect(run.stderr).toContain("Traceback (most recent call last):")
    expect(run.stderr).toMatch(/^ValueError: bad input$/m)
    expect(run.stderr).toContain("✗ ValueError: bad input")
    noStackTrace(run.stderr)
  }, SPAWN_TIMEOUT)

  it("an unknown flag runs nothing (exit 2); after -- an argument that looks like a flag is code", async () => {
    const flag = await runCli(["eval", "-True"], { env })
    expect(flag.code).toBe(2)
    expect(flag.stdout).toBe("")
    expect(flag.stderr).toContain("unknown flag -True for veyyon eval")
    const code = await runCli(["eval", "--", "-True"], { env })
    expect(code.stderr).toBe("")
    expect(code.code).toBe(0)
    expect(code.stdout).toBe("-1\n")
    const json = await runCli(["eval", "--json", "--", "--json"], { env })
    expect(json.code).toBe(1)
    expect(JSON.parse(json.stdout)).toMatchObject({ status: "error", error: { ename: "NameError" } })
  }, SPAWN_TIMEOUT)

  it("eval reads stdin when given no code; --json prints the EvalResult", async () => {
    const run = await runCli(["eval", "--json", "--session", "json-test"], {
      env,
      input: ["values = [3, 1, 2]", "print('sorted', sorted(values))", PNG_CELL, "len(values)"].join("\n")
    })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    const result = JSON.parse(run.stdout) as Record<string, unknown>
    expect(result).toMatchObject({
      language: "py",
      status: "ok",
      cancelled: false,
      timedOut: false,
      killed: false,
      executionCount: 1,
      text: expect.stringContaining("sorted [1, 2, 3]"),
      artifactIds: [expect.stringMatching(/^img-.*\.png$/)]
    })
    expect(result.outputs).toEqual(expect.arrayContaining([
      expect.objectContaining({ _tag: "Stdout", text: "sorted [1, 2, 3]\n" }),
      expect.objectContaining({ _tag: "Result" })
    ]))
    expect(result.images).toEqual([{ mimeType: "image/png", description: expect.stringMatching(/^\[image\/png \d+x\d+/) }])
    expect(result.imageFiles).toEqual([expect.stringContaining(artifactsDir)])
    const { imageFiles: _files, ...structured } = result
    expect(Schema.decodeUnknownExit(EvalOutputSchema)(structured)._tag).toBe("Success")
    expect(typeof result.durationMs).toBe("number")
  }, SPAWN_TIMEOUT)

  // The cell sleeps far past the clamped second whatever the machine's load, so only the
  // clamp decides how it ends; output printed before the timeout is covered by the tool's tests.
  it("--timeout 0 is clamped to 1s: the cell times out with the notice, exit 1", async () => {
    const run = await runCli(["eval", "--json", "--timeout", "0", "import time\ntime.sleep(600)"], { env })
    expect(run.code).toBe(1)
    expect(run.stderr).toBe("veyyon: --timeout 0 is outside 1..3600 seconds; using 1.\n")
    const result = JSON.parse(run.stdout) as Record<string, unknown>
    expect(result).toMatchObject({
      language: "py",
      cancelled: true,
      timedOut: true,
      killed: false,
      notice: expect.stringContaining("eval cell timed out after 1s")
    })
    expect(result.text).toContain("eval cell timed out after 1s")
  }, SPAWN_TIMEOUT)

  it("a bad --timeout is a usage error: exit 2 with one sentence", async () => {
    const run = await runCli(["eval", "--timeout", "soon", "1"], { env })
    expect(run.code).toBe(2)
    expect(run.stdout).toBe("")
    expect(run.stderr.trim()).toBe(
      'veyyon: --timeout must be a number of seconds between 1 and 3600 (default 30); got the string "soon".'
    )
  }, SPAWN_TIMEOUT)

  it("no usable Python exits 3 and says how to fix it", async () => {
    const run = await runCli(["eval", "1 + 1"], { env: { ...env, VEYYON_PYTHON_INTERPRETER: "/no/such/python" } })
    expect(run.code).toBe(3)
    expect(run.stdout).toBe("")
    expect(run.stderr).toContain("Python backend not available")
    expect(run.stderr).toContain("/no/such/python does not exist")
    expect(run.stderr).toContain("veyyon setup python --check")
    noStackTrace(run.stderr)
  }, SPAWN_TIMEOUT)

  it("--python PATH wins over VEYYON_PYTHON_INTERPRETER in eval and repl; a bad --python exits 3 naming it", async () => {
    const badEnv = { ...env, VEYYON_PYTHON_INTERPRETER: "/no/such/python" }
    const code = "import sys; print('exe', sys.executable)"
    const single = await runCli(["eval", "--python", python!, code], { env: badEnv })
    expect(single.stderr).toBe("")
    expect(single.code).toBe(0)
    expect(single.stdout).toContain(`exe ${python}`)
    const repl = await runCli(["repl", "--python", python!], { env: badEnv, input: code + "\n" })
    expect(repl.code).toBe(0)
    expect(repl.stdout).toContain(`exe ${python}`)
    const bad = await runCli(["eval", "--python", "/no/such/python3", "1"], { env })
    expect(bad.code).toBe(3)
    expect(bad.stderr).toContain("/no/such/python3 does not exist")
  }, SPAWN_TIMEOUT)

  it("no ANSI colour in --help or cell output when stdout is a pipe or NO_COLOR is set; colour on a terminal", async (ctx) => {
    const colourEnv: Record<string, string> = { ...env, TERM: "xterm-256color" }
    delete colourEnv.NO_COLOR
    const piped = await runCli(["--help"], { env: colourEnv })
    expect(piped.code).toBe(0)
    expect(piped.stdout).toContain("USAGE")
    expect(piped.stdout).not.toContain("\u001b[")
    const pipedCell = await runCli(["eval", "1/0"], { env: colourEnv })
    expect(pipedCell.stdout + pipedCell.stderr).toContain("ZeroDivisionError")
    expect(pipedCell.stdout + pipedCell.stderr).not.toContain("\u001b[")
    if (!fs.existsSync("/usr/bin/script")) ctx.skip("the pipe half passed; the terminal half needs util-linux `script` (a pty), which is not installed")
    const quote = (word: string) => `'${word.replace(/'/g, "'\\''")}'`
    const onTerminal = (args: ReadonlyArray<string>, runEnv: Record<string, string>) =>
      runCli([], {
        env: runEnv,
        entry: { command: "/usr/bin/script", args: ["-qec", [cliEntry.command, ...cliEntry.args, ...args].map(quote).join(" "), "/dev/null"] }
      })
    const coloured = await onTerminal(["--help"], colourEnv)
    expect(coloured.stdout).toContain("USAGE")
    expect(coloured.stdout).toContain("\u001b[")
    const noColor = await onTerminal(["--help"], { ...colourEnv, NO_COLOR: "1" })
    expect(noColor.stdout).toContain("USAGE")
    expect(noColor.stdout).not.toContain("\u001b[")
  }, SPAWN_TIMEOUT)

  it("repl answers obj? and obj?? with the kernel's inspection, and says when a name is unknown", async () => {
    const input = "def scale(value, factor=2):\n    '''Scale a value.'''\n    return value * factor\n\nscale?\n??scale\nnope_nothing?\n1 + 1\n"
    const run = await runCli(["repl"], { env, input })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toContain("Signature:   scale(value, factor=2)")
    expect(run.stdout).toContain("Docstring:   Scale a value.")
    expect(run.stdout).toContain("    return value * factor")
    expect(run.stdout).toContain("Object `nope_nothing` not found.")
    expect(run.stdout.trim().endsWith("2")).toBe(true)
  }, SPAWN_TIMEOUT)

  it.skipIf(!fs.existsSync("/usr/bin/script"))(titled("repl on a terminal completes with Tab", fs.existsSync("/usr/bin/script") ? undefined : "util-linux `script` (a pty) is not installed"), async () => {
    const quote = (word: string) => `'${word.replace(/'/g, "'\\''")}'`
    const command = [cliEntry.command, ...cliEntry.args, "repl"].map(quote).join(" ")
    const child = spawn("/usr/bin/script", ["-qec", command, "/dev/null"], { env, stdio: ["pipe", "pipe", "pipe"] })
    let output = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk))
    const waitFor = async (text: string, from: number) => {
      const deadline = Date.now() + 120_000
      while (!output.slice(from).includes(text)) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no ${JSON.stringify(text)} in:\n${output}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      return output.length
    }
    try {
      let seen = await waitFor(">>> ", 0)
      child.stdin.write("import collections\n")
      seen = await waitFor(">>> ", seen)
      child.stdin.write("x = collections.OrderedD\t")
      seen = await waitFor("OrderedDict", seen)
      child.stdin.write("\nx\n")
      // the terminal echoes typed lines ending "\r\r\n"; the result's line ends "\r\n"
      await waitFor("collections.OrderedDict\r\n", seen)
      child.stdin.write("exit\n")
      await new Promise((resolve) => child.once("close", resolve))
    } finally {
      stop(child)
    }
  }, SPAWN_TIMEOUT)

  it("export --session writes the session's cells as a notebook nbformat validates; repl --save does on exit", async (ctx) => {
    const dir = tempDir("veyyon-cli-export-")
    const nbPython = ["/usr/bin/python3", python!].find((candidate) => {
      try {
        execFileSync(candidate, ["-c", "import nbformat"], { stdio: "ignore" })
        return true
      } catch {
        return false
      }
    })
    const check = (file: string) =>
      execFileSync(nbPython!, ["-c", "import sys, nbformat\nnb = nbformat.read(sys.argv[1], as_version=4)\nnbformat.validate(nb)\nprint(nb.metadata.kernelspec.name, [c.execution_count for c in nb.cells])", file], { encoding: "utf8" }).trim()
    try {
      expect((await runCli(["eval", "--session", "exp1", "print('hi')"], { env })).code).toBe(0)
      expect((await runCli(["eval", "--session", "exp1", "20 * 2 + 2"], { env })).code).toBe(0)
      const out = path.join(dir, "exp1.ipynb")
      const exported = await runCli(["export", "--session", "exp1", out], { env })
      expect(exported.code).toBe(0)
      expect(exported.stderr).toContain("wrote 2 cells of session exp1")
      const saved = path.join(dir, "repl.ipynb")
      const repl = await runCli(["repl", "--save", saved], { env, input: "y = 1\ny + 1\n" })
      expect(repl.code).toBe(0)
      expect(repl.stderr).toContain(`saved 2 cells to ${saved}`)
      if (nbPython === undefined) ctx.skip("the export passed; validating it needs python3-nbformat, which is not installed")
      expect(check(out)).toBe("python3 [1, 1]")
      expect(check(saved)).toBe("python3 [1, 2]")
      const notebook = JSON.parse(fs.readFileSync(out, "utf8"))
      expect(notebook.cells[1].outputs[0].data["text/plain"]).toBe("42")
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }, SPAWN_TIMEOUT)

  it("--language js runs JavaScript cells, in eval and in a repl that keeps state, even without Python", async () => {
    const noPython = { ...env, VEYYON_PYTHON_INTERPRETER: "/no/such/python" }
    const single = await runCli(["eval", "--language", "js", "[1, 2, 3].map((x) => x * 2)"], { env: noPython })
    expect(single.code).toBe(0)
    expect(single.stdout).toContain("[ 2, 4, 6 ]")
    const repl = await runCli(["repl", "--language", "js"], { env: noPython, input: "let x = 20\nx + 22\n" })
    expect(repl.code).toBe(0)
    expect(repl.stdout.trim()).toBe("42")
  }, SPAWN_TIMEOUT)

  it("repl with piped input keeps state across cells, runs magics, saves images and survives an error", async () => {
    const dir = tempDir("veyyon-cli-repl-")
    const input = [
      "x = 1",
      "x + 1",
      "def double(n):",
      "    return n * 2",
      "",
      "double(x + 1)",
      "%pwd",
      "1/0",
      "print('still here', x)",
      "%%bash",
      "echo from bash",
      "",
      PNG_CELL,
      ""
    ].join("\n") + "\n"
    const run = await runCli(["repl"], { env, input, cwd: dir })
    expect(run.code).toBe(0)
    expect(run.stdout).not.toContain(">>>")
    const lines = run.stdout.split("\n")
    expect(lines).toContain("2")
    expect(lines).toContain("4")
    expect(lines).toContain(`'${fs.realpathSync(dir)}'`)
    expect(run.stdout).not.toContain("ZeroDivisionError")
    expect(run.stderr).toContain("ZeroDivisionError: division by zero")
    expect(lines).toContain("still here 1")
    expect(lines).toContain("from bash")
    const saved = /^image saved: (\S+) \[image\/png 4x4, /m.exec(run.stdout)
    expect(fs.readFileSync(saved![1]!).subarray(0, 8)).toEqual(PNG_SIGNATURE)
    expect(lines.indexOf("2")).toBeLessThan(lines.indexOf("4"))
  }, SPAWN_TIMEOUT)

  it("setup python --check names the interpreter, its version and the rule", async () => {
    const run = await runCli(["setup", "python", "--check"], { env })
    expect(run.code).toBe(0)
    expect(run.stdout).toContain(`interpreter  ${python}`)
    expect(run.stdout).toMatch(/^version {6}3\.\d+\.\d+$/m)
    expect(run.stdout).toMatch(/^rule {9}setting: /m)
    expect(run.stdout).toMatch(/^kernel {7}started and ran a cell in \d+ ms$/m)
    expect(run.stdout).toContain("ok: eval cells will run with this interpreter.")
  }, SPAWN_TIMEOUT)

  // An installed package whose runner did not make it into the install resolves Python
  // fine; only starting a kernel shows that no cell would run.
  it("setup python --check starts a kernel: a package without its runner fails it with exit 3 and the reason", async () => {
    const installed = tempDir("veyyon-cli-no-runner-")
    for (const entry of ["bin", "dist", "package.json"]) fs.cpSync(path.join(repoRoot, entry), path.join(installed, entry), { recursive: true })
    fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(installed, "node_modules"))
    const run = await runCli(["setup", "python", "--check"], {
      env,
      cwd: installed,
      entry: { command: process.execPath, args: [path.join(installed, "bin", "veyyon.mjs")] }
    })
    expect(run.code).toBe(3)
    expect(run.stdout).toContain(`interpreter  ${python}`)
    expect(run.stdout).not.toContain("ok:")
    expect(run.stderr).toMatch(/^veyyon: the Python kernel does not work here: .*runner/m)
    expect(run.stderr).toContain(path.join(installed, "runner", "python"))
    noStackTrace(run.stderr)
  }, SPAWN_TIMEOUT)

  it("demo runs end to end and writes its image to disk", async () => {
    const run = await runCli(["demo"], { env, timeoutMs: 110_000 })
    expect(run.stderr).toBe("")
    expect(run.code).toBe(0)
    expect(run.stdout).toContain("mean 4.90, stdev 1.99")
    expect(run.stdout).toMatch(/CPU times: user .+\n {2}Wall time: \d/)
    expect(run.stdout).not.toMatch(/^ {2}time \d/m)
    expect(run.stdout).toContain("**Samples**")
    expect(run.stdout).toContain("Range: **2.5** to **7.9**")
    const files = [...run.stdout.matchAll(/^ {2}image saved: (\S+) \[image\/png 96x64, /gm)].map((match) => match[1]!)
    expect(files).toHaveLength(1)
    expect(fs.readFileSync(files[0]!).subarray(0, 8)).toEqual(PNG_SIGNATURE)
    expect(run.stdout).toContain("Every cell ran in the same kernel")
  }, SPAWN_TIMEOUT)

  it("bin/veyyon.mjs --help lists every command", async () => {
    const run = await runCli(["--help"], { env })
    expect(run.code).toBe(0)
    for (const command of ["eval", "repl", "setup", "mcp", "demo"]) expect(run.stdout).toMatch(new RegExp(`^SUBCOMMANDS\n(?:  .*\n)*  ${command} `, "m"))
    const setup = await runCli(["setup", "--help"], { env })
    expect(setup.code).toBe(0)
    expect(setup.stdout).toMatch(/^SUBCOMMANDS\n(?:  .*\n)*  python /m)
  }, SPAWN_TIMEOUT)
})
