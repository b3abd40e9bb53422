import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Result, Schema } from "effect"
import {
  describeAttempt,
  envInterpreter,
  type FileProbe,
  pathCommandNames,
  RESOLUTION_RULES,
  type PythonCandidate,
  type ResolutionAttempt,
  type ResolutionInput,
  resolvePythonCandidate,
  searchPath
} from "../../../src/backends/python/RuntimeResolution.ts"

/** A filesystem of executables and plain files, nothing else. */
const memoryProbe = (executables: Iterable<string>, plainFiles: Iterable<string> = []): FileProbe => {
  const exe = new Set(executables)
  const plain = new Set(plainFiles)
  return { exists: (f) => exe.has(f) || plain.has(f), isExecutable: (f) => exe.has(f) }
}

const input = (overrides: Partial<ResolutionInput> = {}): ResolutionInput => ({
  interpreter: undefined,
  env: { PATH: "/usr/bin:/bin" },
  cwd: "/proj",
  homeDir: "/home/u",
  platform: "linux",
  probe: memoryProbe([]),
  ...overrides
})

const found = (i: ResolutionInput): PythonCandidate =>
  Result.getOrThrowWith(resolvePythonCandidate(i), (tried) => new Error(tried.map(describeAttempt).join("\n")))

const notFound = (i: ResolutionInput): ReadonlyArray<ResolutionAttempt> => {
  const result = resolvePythonCandidate(i)
  if (Result.isSuccess(result)) throw new Error(`unexpectedly found ${result.success.executable}`)
  return result.failure
}

const everything = [
  "/opt/custom/bin/python",
  "/venvs/active/bin/python",
  "/conda/envs/ds/bin/python",
  "/proj/.venv/bin/python",
  "/proj/venv/bin/python",
  "/home/u/.veyyon/python-env/bin/python",
  "/usr/bin/python3",
  "/usr/bin/python"
]
const fullEnv = { PATH: "/usr/bin:/bin", VIRTUAL_ENV: "/venvs/active", CONDA_PREFIX: "/conda/envs/ds" }

describe("resolvePythonCandidate order", () => {
  it("lets the setting short-circuit every other rule", () => {
    const c = found(input({ interpreter: "/opt/custom/bin/python", env: fullEnv, probe: memoryProbe(everything) }))
    expect(c).toEqual({ executable: "/opt/custom/bin/python", rule: "setting", skipped: [] })
  })

  it("walks VIRTUAL_ENV, CONDA_PREFIX, .venv, venv, managed, PATH as each one disappears", () => {
    const expected: ReadonlyArray<readonly [string, string, string | undefined]> = [
      ["VIRTUAL_ENV", "/venvs/active/bin/python", "/venvs/active/bin"],
      ["CONDA_PREFIX", "/conda/envs/ds/bin/python", "/conda/envs/ds/bin"],
      [".venv", "/proj/.venv/bin/python", "/proj/.venv/bin"],
      ["venv", "/proj/venv/bin/python", "/proj/venv/bin"],
      ["managed", "/home/u/.veyyon/python-env/bin/python", "/home/u/.veyyon/python-env/bin"],
      ["PATH", "/usr/bin/python3", undefined],
      ["PATH", "/usr/bin/python", undefined]
    ]
    const remaining = everything.slice(1)
    for (const [rule, executable, venvBin] of expected) {
      const c = found(input({ env: fullEnv, probe: memoryProbe(remaining) }))
      expect(c.rule).toBe(rule)
      expect(c.executable).toBe(executable)
      expect(c.venvBin).toBe(venvBin)
      remaining.shift()
    }
    expect(notFound(input({ env: fullEnv, probe: memoryProbe(remaining) })).map((a) => a.rule)).toEqual([
      "VIRTUAL_ENV", "CONDA_PREFIX", ".venv", "venv", "managed", "PATH"
    ])
  })

  it("prefers python3 over python anywhere on PATH", () => {
    const c = found(input({ env: { PATH: "/a:/b" }, probe: memoryProbe(["/a/python", "/b/python3"]) }))
    expect(c.executable).toBe("/b/python3")
  })

  it.prop("the first rule that holds an interpreter always wins", {
    present: Arbitrary.array(Arbitrary.schema(Schema.Boolean), { minLength: everything.length - 1, maxLength: everything.length - 1 })
  }, ({ present }) => {
    const ordered = everything.slice(1)
    const files = ordered.filter((_, i) => present[i])
    const result = resolvePythonCandidate(input({ env: fullEnv, probe: memoryProbe(files) }))
    if (files.length === 0) expect(Result.isFailure(result)).toBe(true)
    else expect(Result.getOrThrow(result).executable).toBe(files[0])
  })
})

describe("resolvePythonCandidate edges", () => {
  it("passes over a VIRTUAL_ENV without a python and records why", () => {
    const c = found(input({ env: { PATH: "/usr/bin", VIRTUAL_ENV: "/gone" }, probe: memoryProbe(["/usr/bin/python3"]) }))
    expect(c.rule).toBe("PATH")
    expect(c.skipped[0]).toEqual({ rule: "VIRTUAL_ENV", target: "/gone/bin/python", outcome: "missing" })
    expect(describeAttempt(c.skipped[0]!)).toBe("VIRTUAL_ENV: /gone/bin/python does not exist")
  })

  it("passes over a venv whose python is not executable", () => {
    const c = found(input({
      probe: memoryProbe(["/proj/venv/bin/python"], ["/proj/.venv/bin/python"])
    }))
    expect(c.rule).toBe("venv")
    expect(c.skipped.find((a) => a.rule === ".venv")?.outcome).toBe("not-executable")
  })

  it("treats an empty VIRTUAL_ENV as unset", () => {
    const tried = notFound(input({ env: { PATH: "/usr/bin", VIRTUAL_ENV: "" } }))
    expect(tried[0]).toEqual({ rule: "VIRTUAL_ENV", target: undefined, outcome: "unset" })
  })

  it("reports an unset PATH rather than searching nothing", () => {
    const tried = notFound(input({ env: {} }))
    expect(tried.at(-1)).toEqual({ rule: "PATH", target: undefined, outcome: "unset" })
    expect(describeAttempt(tried.at(-1)!)).toBe("PATH: not set")
  })

  it("reports the PATH names it looked for", () => {
    const tried = notFound(input())
    expect(describeAttempt(tried.at(-1)!)).toBe("PATH: no python3 or python on PATH")
  })

  it("skips non-executable files, empty and relative entries on PATH", () => {
    const probe = memoryProbe(["/good/python3", "rel/python3"], ["/bad/python3"])
    expect(searchPath("python3", { PATH: "::rel:/bad:/good" }, "linux", probe)).toBe("/good/python3")
  })

  it("resolves a relative VIRTUAL_ENV against cwd", () => {
    const c = found(input({ env: { VIRTUAL_ENV: "envs/a" }, probe: memoryProbe(["/proj/envs/a/bin/python"]) }))
    expect(c.executable).toBe("/proj/envs/a/bin/python")
  })
})

describe("python.interpreter setting", () => {
  it("fails without falling back when the configured file is missing", () => {
    const tried = notFound(input({ interpreter: "/nope/python", probe: memoryProbe(everything) }))
    expect(tried).toEqual([{ rule: "setting", target: "/nope/python", outcome: "missing" }])
    expect(describeAttempt(tried[0]!)).toBe("python.interpreter setting: /nope/python does not exist")
  })

  it("fails when the configured file is not executable", () => {
    const tried = notFound(input({ interpreter: "/opt/py", probe: memoryProbe([], ["/opt/py"]) }))
    expect(describeAttempt(tried[0]!)).toBe("python.interpreter setting: /opt/py is not an executable file")
  })

  it("looks a bare command name up on PATH", () => {
    const probe = memoryProbe(["/usr/bin/python3.12", "/usr/bin/python3"])
    expect(found(input({ interpreter: "python3.12", probe })).executable).toBe("/usr/bin/python3.12")
    const tried = notFound(input({ interpreter: "python3.99", probe }))
    expect(describeAttempt(tried[0]!)).toBe("python.interpreter setting: no python3.99 on PATH")
  })

  it("expands ~ and resolves relative paths against cwd", () => {
    const probe = memoryProbe(["/home/u/py/bin/python", "/proj/tools/python"])
    expect(found(input({ interpreter: "~/py/bin/python", probe })).executable).toBe("/home/u/py/bin/python")
    expect(found(input({ interpreter: "./tools/python", probe })).executable).toBe("/proj/tools/python")
  })

  it("treats a blank setting as unset", () => {
    expect(found(input({ interpreter: "  ", probe: memoryProbe(["/usr/bin/python3"]) })).rule).toBe("PATH")
  })

  it("puts the venv bin dir on PATH when the configured interpreter lives in a venv", () => {
    const probe = memoryProbe(["/v/bin/python", "/plain/bin/python"], ["/v/pyvenv.cfg"])
    expect(found(input({ interpreter: "/v/bin/python", probe })).venvBin).toBe("/v/bin")
    expect(found(input({ interpreter: "/plain/bin/python", probe })).venvBin).toBeUndefined()
  })
})

describe("Windows layouts", () => {
  const win = (overrides: Partial<ResolutionInput>): ResolutionInput =>
    input({ platform: "win32", cwd: "C:\\proj", homeDir: "C:\\Users\\u", env: { Path: "C:\\Python312" }, ...overrides })

  it("uses Scripts\\python.exe for venvs and the prefix root for conda", () => {
    expect(envInterpreter("C:\\proj\\.venv", "win32", "venv")).toEqual({
      executable: "C:\\proj\\.venv\\Scripts\\python.exe",
      bin: "C:\\proj\\.venv\\Scripts"
    })
    expect(envInterpreter("C:\\conda", "win32", "conda").executable).toBe("C:\\conda\\python.exe")
    const c = found(win({ probe: memoryProbe(["C:\\proj\\.venv\\Scripts\\python.exe"]) }))
    expect(c).toMatchObject({ rule: ".venv", venvBin: "C:\\proj\\.venv\\Scripts" })
  })

  it("finds python.exe on a Path spelled the Windows way", () => {
    const c = found(win({ probe: memoryProbe(["C:\\Python312\\python.exe"]) }))
    expect(c).toMatchObject({ rule: "PATH", executable: "C:\\Python312\\python.exe" })
  })

  it("adds .exe to a bare configured name", () => {
    const c = found(win({ interpreter: "py", probe: memoryProbe(["C:\\Python312\\py.exe"]) }))
    expect(c.executable).toBe("C:\\Python312\\py.exe")
  })

  it("walks each env rule with the Windows layout of its kind", () => {
    const env = { Path: "C:\\Python312", VIRTUAL_ENV: "C:\\venvs\\a", CONDA_PREFIX: "C:\\conda" }
    const layouts: ReadonlyArray<readonly [string, string, string]> = [
      ["VIRTUAL_ENV", "C:\\venvs\\a\\Scripts\\python.exe", "C:\\venvs\\a\\Scripts"],
      ["CONDA_PREFIX", "C:\\conda\\python.exe", "C:\\conda"],
      [".venv", "C:\\proj\\.venv\\Scripts\\python.exe", "C:\\proj\\.venv\\Scripts"],
      ["venv", "C:\\proj\\venv\\Scripts\\python.exe", "C:\\proj\\venv\\Scripts"],
      ["managed", "C:\\Users\\u\\.veyyon\\python-env\\Scripts\\python.exe", "C:\\Users\\u\\.veyyon\\python-env\\Scripts"]
    ]
    for (const [rule, executable, bin] of layouts) {
      expect(found(win({ env, probe: memoryProbe([executable]) }))).toMatchObject({ rule, executable, venvBin: bin })
    }
  })

  it("looks for python.exe before python3.exe, and a name with an extension as it is", () => {
    expect(pathCommandNames("win32")).toEqual(["python.exe", "python3.exe"])
    expect(found(win({ probe: memoryProbe(["C:\\Python312\\python3.exe", "C:\\Python312\\python.exe"]) })).executable).toBe(
      "C:\\Python312\\python.exe"
    )
    expect(searchPath("py.exe", { Path: "C:\\Python312" }, "win32", memoryProbe(["C:\\Python312\\py.exe.exe"]))).toBeUndefined()
    expect(searchPath("py", { Path: "C:\\Python312" }, "win32", memoryProbe(["C:\\Python312\\py"]))).toBe("C:\\Python312\\py")
  })

  it("expands ~\\ in a configured path to the home directory", () => {
    const c = found(win({ interpreter: "~\\py\\python.exe", probe: memoryProbe(["C:\\Users\\u\\py\\python.exe"]) }))
    expect(c.executable).toBe("C:\\Users\\u\\py\\python.exe")
  })
})

describe("rules as reported", () => {
  it("lists every rule in the order they are tried", () => {
    expect(RESOLUTION_RULES).toEqual(["setting", "VIRTUAL_ENV", "CONDA_PREFIX", ".venv", "venv", "managed", "PATH"])
  })

  it("looks for python3 before python on POSIX, never with .exe", () => {
    expect(pathCommandNames("linux")).toEqual(["python3", "python"])
    expect(searchPath("python3", { PATH: "/usr/bin" }, "linux", memoryProbe(["/usr/bin/python3.exe"]))).toBeUndefined()
  })

  it("describes each rule's unset, missing and non-executable outcome in one line", () => {
    const unset = RESOLUTION_RULES.map((rule) => describeAttempt({ rule, target: undefined, outcome: "unset" }))
    expect(unset).toEqual([
      "python.interpreter setting: not set",
      "VIRTUAL_ENV: not set",
      "CONDA_PREFIX: not set",
      "<cwd>/.venv: not set",
      "<cwd>/venv: not set",
      "managed venv ~/.veyyon/python-env: not set",
      "PATH: not set"
    ])
    expect(describeAttempt({ rule: "CONDA_PREFIX", target: "/c/bin/python", outcome: "missing" })).toBe("CONDA_PREFIX: /c/bin/python does not exist")
    expect(describeAttempt({ rule: "managed", target: "/h/bin/python", outcome: "not-executable" })).toBe(
      "managed venv ~/.veyyon/python-env: /h/bin/python is not an executable file"
    )
  })

  it("a configured command name with no PATH at all is missing, not an error", () => {
    const tried = notFound(input({ interpreter: "python3.12", env: {} }))
    expect(tried).toEqual([{ rule: "setting", target: "python3.12", outcome: "missing" }])
    expect(searchPath("python3", {}, "linux", memoryProbe(["/usr/bin/python3"]))).toBeUndefined()
  })

  it("a configured command name found on PATH is the setting's pick, with nothing skipped", () => {
    expect(found(input({ interpreter: "python3.12", probe: memoryProbe(["/bin/python3.12"]) }))).toEqual({
      executable: "/bin/python3.12",
      rule: "setting",
      skipped: []
    })
  })

  it("trims the configured value and expands a bare ~", () => {
    expect(found(input({ interpreter: "  /opt/py/bin/python  ", probe: memoryProbe(["/opt/py/bin/python"]) })).executable).toBe("/opt/py/bin/python")
    expect(notFound(input({ interpreter: "~" }))).toEqual([{ rule: "setting", target: "/home/u", outcome: "missing" }])
    expect(notFound(input({ interpreter: "~py" }))).toEqual([{ rule: "setting", target: "/proj/~py", outcome: "missing" }])
  })
})
