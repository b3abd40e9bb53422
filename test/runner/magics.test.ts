import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { integrationEnabled } from "../support/python.ts"
import { type Cell, type Kernel, killAll, plainResult, startKernel } from "./harness.ts"
import { integrationOff, titled } from "../support/skip.ts"

const py = (value: string): string => JSON.stringify(value)

describe.skipIf(!integrationEnabled())(titled("runner magics", integrationOff()), () => {
  let kernel: Kernel
  let workdir: string

  beforeAll(async () => {
    workdir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-magics-")))
    kernel = await startKernel({ initCwd: workdir })
    const prelude = await kernel.execute("def helper():\n    return 'from prelude'\nPRELUDE_FLAG = True", {
      silent: true,
      storeHistory: false
    })
    expect(prelude.done.status).toBe("ok")
  })

  afterAll(() => {
    killAll()
    fs.rmSync(workdir, { recursive: true, force: true })
  })

  const ok = async (code: string): Promise<Cell> => {
    const cell = await kernel.execute(code, { timeoutMs: 60_000 })
    expect(cell.error, JSON.stringify(cell.error)).toBeUndefined()
    return cell
  }

  it("%pwd returns the working directory", async () => {
    expect(plainResult(await ok("%pwd"))).toBe(`'${workdir}'`)
    expect(plainResult(await ok("here = %pwd\nhere"))).toBe(`'${workdir}'`)
  })

  it("%cd changes directory with ~ and - and emits a cd status event", async () => {
    fs.mkdirSync(path.join(workdir, "sub dir"), { recursive: true })
    const cell = await ok("%cd 'sub dir'")
    const target = path.join(workdir, "sub dir")
    expect(cell.stdout).toBe(`${target}\n`)
    expect(cell.statuses).toEqual([{ op: "cd", path: target }])
    expect(plainResult(await ok("import os\nos.getcwd()"))).toBe(`'${target}'`)
    expect((await ok("%cd -")).statuses).toEqual([{ op: "cd", path: workdir }])
    expect(plainResult(await ok("%cd ~\nos.getcwd() == os.path.expanduser('~')"))).toBe("True")
    await ok(`%cd ${workdir}`)
  })

  it("%ls returns the sorted directory listing", async () => {
    const dir = path.join(workdir, "listing")
    fs.mkdirSync(dir)
    for (const name of ["b.txt", "a.txt", "C.txt"]) fs.writeFileSync(path.join(dir, name), "")
    expect(plainResult(await ok(`listing_dir = ${py(dir)}\n%ls {listing_dir}`))).toBe("['C.txt', 'a.txt', 'b.txt']")
  })

  it("%env lists, reads and sets variables; %set_env sets one", async () => {
    const set = await ok("%env VEYYON_MAGIC=alpha")
    expect(set.stdout).toBe("env: VEYYON_MAGIC=alpha\n")
    expect(plainResult(await ok("%env VEYYON_MAGIC"))).toBe("'alpha'")
    expect(plainResult(await ok("everything = %env\neverything['VEYYON_MAGIC']"))).toBe("'alpha'")
    await ok("%set_env VEYYON_OTHER hello world")
    expect(plainResult(await ok("import os\nos.environ['VEYYON_OTHER']"))).toBe("'hello world'")
    const missing = await kernel.execute("%env VEYYON_NOT_SET_ANYWHERE")
    expect(missing.error?.ename).toBe("UsageError")
  })

  it("%time keeps the expression's value and reports the wall time", async () => {
    const cell = await ok("timed = %time sum(range(10))\n%time timed * 2")
    // "%.3g" as IPython formats them: a time just under 1000 of a unit reads 1e+03 in any field
    const duration = String.raw`[\d.]+(e\+03)? (ns|µs|ms|s)`
    const timing = String.raw`CPU times: user ${duration}, sys: ${duration}, total: ${duration}\nWall time: ${duration}\n`
    expect(cell.stdout).toMatch(new RegExp(`^${timing}${timing}$`))
    expect(cell.statuses).toHaveLength(2)
    expect(cell.statuses[0]).toMatchObject({ op: "time" })
    expect(typeof cell.statuses[0]!.ms).toBe("number")
    expect(plainResult(cell)).toBe("90")
    await ok("%time statement_var = 5")
    expect(plainResult(await ok("statement_var"))).toBe("5")
  })

  it("%timeit times a statement and emits loops and runs", async () => {
    const cell = await ok("%timeit -n 20 -r 3 sum(range(100))")
    expect(cell.stdout).toMatch(/^(The slowest run took [\d.]+ times longer than the fastest\. This could mean that an intermediate result is being cached\.\n)?[\d.]+ (ns|µs|ms|s) ± [\d.]+ (ns|µs|ms|s) per loop \(mean ± std\. dev\. of 3 runs, 20 loops each\)\n$/)
    expect(cell.statuses).toEqual([{ op: "timeit", ms: expect.any(Number), loops: 20, runs: 3 }])
    const result = await ok("r = %timeit -n 2 -r 2 -q -o sum(range(5))\n(r.loops, r.repeat, len(r.timings))")
    expect(cell.results).toEqual([])
    expect(plainResult(result)).toBe("(2, 2, 2)")
  })

  it("%who and %whos list user names only", async () => {
    await ok("%reset -f")
    await ok("alpha = 1\nbeta = 'two'\n_private = 3\nimport json")
    expect((await ok("%who")).stdout).toBe("alpha  beta  json\n")
    expect((await ok("%who int")).stdout).toBe("alpha\n")
    const whos = (await ok("%whos")).stdout
    expect(whos).toMatch(/^Name\s+Type\s+Value\n[- ]+\nalpha\s+int\s+1\nbeta\s+str\s+'two'\njson\s+module\s+<module 'json'/)
    expect(whos).not.toContain("helper")
    expect(plainResult(await ok("%who_ls"))).toBe("['alpha', 'beta', 'json']")
  })

  it("%reset clears user names and restores the prelude's", async () => {
    await ok("helper = 'clobbered'\ngamma = 1")
    await ok("%reset -f")
    expect(plainResult(await ok("(helper(), PRELUDE_FLAG, 'gamma' in dir())"))).toBe("('from prelude', True, False)")
    expect((await ok("%who")).stdout).toBe("No user variables defined.\n")
  })

  it("%load runs a file as a fresh cell and keeps its value", async () => {
    const file = path.join(workdir, "loaded.py")
    fs.writeFileSync(file, "loaded_value = 21\n!echo from-loaded-file\nloaded_value * 2\n")
    const cell = await ok(`%load ${file}`)
    expect(cell.stdout).toBe("from-loaded-file\n")
    expect(plainResult(cell)).toBe("42")
    fs.writeFileSync(path.join(workdir, "broken.py"), "x = 1\nraise RuntimeError('in file')\n")
    const failing = await kernel.execute("%load broken.py")
    expect((failing.error!.traceback as Array<string>).join("\n")).toMatch(/broken\.py", line 2, in <module>\n\s+raise RuntimeError/)
  })

  it("%run executes a script with arguments and merges its globals", async () => {
    fs.writeFileSync(
      path.join(workdir, "script.py"),
      "import sys\nscript_args = sys.argv[1:]\ndef from_script():\n    return 'ok'\nprint('script ran as', __name__)\n"
    )
    const cell = await ok("%run script.py one 'two words'")
    expect(cell.stdout).toBe("script ran as __main__\n")
    expect(plainResult(await ok("(script_args, from_script())"))).toBe("(['one', 'two words'], 'ok')")
    fs.writeFileSync(path.join(workdir, "bad_script.py"), "def f():\n    raise ValueError('from script')\nf()\n")
    const failing = await kernel.execute("%run bad_script")
    const text = (failing.error!.traceback as Array<string>).join("\n")
    expect(text).toContain("bad_script.py\", line 2, in f")
    expect(text).not.toMatch(/runpy|runner\.py/)
  })

  it("%pip streams pip's output and reports a pip status event", async () => {
    const cell = await ok("%pip --version")
    expect(cell.stdout).toMatch(/^pip \d+/)
    expect(cell.statuses).toEqual([{ op: "pip", args: ["--version"], exitCode: 0, evicted: [] }])
  })

  it("%pip evicts a freshly installed package from sys.modules", async () => {
    const target = path.join(workdir, "site")
    const setup = await ok(
      [
        "import os, sys, types, zipfile",
        `target = ${py(target)}`,
        "os.makedirs(target, exist_ok=True)",
        "sys.path.insert(0, target)",
        "wheel = os.path.join(target, '..', 'vytiny-1.0-py3-none-any.whl')",
        "with zipfile.ZipFile(wheel, 'w') as z:",
        "    z.writestr('vytiny/__init__.py', 'VERSION = \"fresh\"\\n')",
        "    z.writestr('vytiny-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: vytiny\\nVersion: 1.0\\n')",
        "    z.writestr('vytiny-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')",
        "    z.writestr('vytiny-1.0.dist-info/RECORD', '')",
        "sys.modules['vytiny'] = types.ModuleType('vytiny')",
        "sys.modules['vytiny'].VERSION = 'stale'"
      ].join("\n")
    )
    expect(setup.error).toBeUndefined()
    const cell = await kernel.execute("%pip install --no-index --no-deps --quiet --target {target} {wheel}", {
      timeoutMs: 90_000
    })
    expect(cell.statuses).toEqual([
      { op: "pip", args: ["install", "--no-index", "--no-deps", "--quiet", "--target", target, expect.stringContaining("vytiny")], exitCode: 0, evicted: ["vytiny"] }
    ])
    expect(plainResult(await ok("import vytiny\nvytiny.VERSION"))).toBe("'fresh'")
  })

  it("%%bash runs the body in bash, streaming both streams", async () => {
    const cell = await ok("%%bash\necho one\necho two >&2\nfor i in 1 2; do echo \"n=$i\"; done")
    expect(cell.stdout).toBe("one\nn=1\nn=2\n")
    expect(cell.stderr).toBe("two\n")
    const failing = await kernel.execute("%%bash\necho before-fail\nexit 3")
    expect(failing.stdout).toBe("before-fail\n")
    expect(failing.error).toMatchObject({ ename: "CalledProcessError" })
    expect(String(failing.error!.evalue)).toContain("exit status 3")
  })

  it("%%capture collects stdout, stderr and displays into a variable", async () => {
    const cell = await ok(
      "%%capture captured\nimport sys\nprint('hidden out')\nprint('hidden err', file=sys.stderr)\n" +
        "display({'text/plain': 'hidden display'}, raw=True)\n!echo hidden-child\n6 * 7"
    )
    expect(cell.frames.map((f) => f.type)).toEqual(["started", "done"])
    const inspect = await ok("(captured.stdout, captured.stderr, [o.data['text/plain'] for o in captured.outputs])")
    expect(plainResult(inspect)).toBe("('hidden out\\nhidden-child\\n', 'hidden err\\n', ['hidden display', '42'])")
    const shown = await ok("captured.show()")
    expect(shown.stdout).toBe("hidden out\nhidden-child\n")
    expect(shown.stderr).toBe("hidden err\n")
    expect(shown.displays).toEqual([{ "text/plain": "hidden display" }, { "text/plain": "42" }])
  })

  it("%%capture still reports errors from its body", async () => {
    const cell = await kernel.execute("%%capture failed_capture\nprint('partial')\n1 / 0")
    expect(cell.error?.ename).toBe("ZeroDivisionError")
    expect((cell.error!.traceback as Array<string>).join("\n")).toMatch(/<cell-\d+>", line 3, in <module>\n\s+1 \/ 0/)
    expect(plainResult(await ok("failed_capture.stdout"))).toBe("'partial\\n'")
  })

  it("%%timeit times the cell body", async () => {
    const cell = await ok("%%timeit -n 5 -r 2\ntotal = 0\nfor i in range(50):\n    total += i")
    expect(cell.stdout).toMatch(/per loop \(mean ± std\. dev\. of 2 runs, 5 loops each\)\n$/)
    expect(cell.statuses).toEqual([{ op: "timeit", ms: expect.any(Number), loops: 5, runs: 2 }])
  })

  it("%%time times the cell body and keeps its value", async () => {
    const cell = await ok("%%time\nbase = 21\nbase * 2")
    expect(cell.stdout).toMatch(/^CPU times: user .*, sys: .*, total: .*\nWall time: .*\n$/)
    expect(cell.statuses[0]).toMatchObject({ op: "time" })
    expect(plainResult(cell)).toBe("42")
  })

  it("%%writefile writes and appends the raw body", async () => {
    const file = path.join(workdir, "written.txt")
    const first = await ok(`%%writefile ${file}\nline $1 {not_interpolated}\n%not_a_magic`)
    expect(first.stdout).toBe(`Writing ${file}\n`)
    const again = await ok(`%%writefile -a ${file}\nmore`)
    expect(again.stdout).toBe(`Appending to ${file}\n`)
    expect(fs.readFileSync(file, "utf8")).toBe("line $1 {not_interpolated}\n%not_a_magic\nmore\n")
    expect((await ok(`%%writefile ${file}\nfresh`)).stdout).toBe(`Overwriting ${file}\n`)
  })

  it("!cmd streams output with $var and {expr} interpolation", async () => {
    const cell = await ok("name = 'py'\n!echo hello $name {1 + 1} $$HOME_LITERAL '$name'\n!echo oops >&2; exit 4\ncode = _exit_code")
    expect(cell.stdout).toBe("hello py 2 $name\n")
    expect(cell.stderr).toBe("oops\n")
    expect(plainResult(await ok("code"))).toBe("4")
  })

  it("var = !cmd returns an SList", async () => {
    const cell = await ok(
      "lines = !printf 'alpha 1\\nbeta 2\\n'\n(type(lines).__name__, lines, lines.n, lines.s, lines.grep('beta'), lines.fields(1), _exit_code)"
    )
    expect(plainResult(cell)).toBe(
      "('SList',\n ['alpha 1', 'beta 2'],\n 'alpha 1\\nbeta 2',\n 'alpha 1 beta 2',\n ['beta 2'],\n ['1', '2'],\n 0)"
    )
    expect(cell.stdout).toBe("")
  })

  it("recognizes magics in indented blocks and functions, never in strings or as modulo", async () => {
    const cell = await ok(
      "for i in range(2):\n    !echo loop $i\ndef where():\n    w = %pwd\n    return w\n" +
        "s = '''\n%pwd\n!ls\n'''\na, b = 7, 3\n(where() == __import__('os').getcwd(), s, a %b)"
    )
    expect(cell.stdout).toBe("loop 0\nloop 1\n")
    expect(plainResult(cell)).toBe("(True, '\\n%pwd\\n!ls\\n', 1)")
  })

  it("an unknown magic raises a UsageError NameError after earlier lines ran", async () => {
    const cell = await kernel.execute("earlier = 'ran'\n%definitely_unknown 1 2")
    expect(cell.error?.ename).toBe("NameError")
    expect(String(cell.error?.evalue)).toMatch(/^UsageError: Line magic function `%definitely_unknown` not found\./)
    expect((cell.error!.traceback as Array<string>).join("\n")).toContain("line 2, in <module>")
    expect(plainResult(await ok("earlier"))).toBe("'ran'")
    const cellMagic = await kernel.execute("%%nosuchcell\nbody")
    expect(String(cellMagic.error?.evalue)).toMatch(/^UsageError: Cell magic `%%nosuchcell` not found\./)
  })

  it("%matplotlib is accepted for notebook compatibility", async () => {
    expect((await ok("%matplotlib inline")).results).toEqual([])
  })
})
