import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { isLive, waitUntil } from "../support/process.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { type Kernel, killAll, plainResult, RUNNER_PATH, startKernel, STATUS_MIME } from "./harness.ts"
import { integrationOff, titled } from "../support/skip.ts"

describe.skipIf(!integrationEnabled())(titled("runner protocol", integrationOff()), () => {
  let kernel: Kernel
  let workdir: string

  beforeAll(async () => {
    workdir = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-runner-"))
    kernel = await startKernel({ initCwd: workdir })
  })

  afterAll(() => {
    killAll()
    fs.rmSync(workdir, { recursive: true, force: true })
  })

  it("answers every request with started first and done last", async () => {
    const cell = await kernel.execute("print('hi')\n40 + 2")
    expect(cell.frames[0]).toEqual({ type: "started", id: cell.id })
    expect(cell.frames.at(-1)).toEqual(cell.done)
    expect(cell.done).toMatchObject({ type: "done", status: "ok", cancelled: false })
    expect(cell.frames.map((f) => f.type)).toEqual(["started", "stdout", "result", "done"])
    expect(cell.stdout).toBe("hi\n")
    expect(plainResult(cell)).toBe("42")
    expect(kernel.badLines).toEqual([])
  })

  it("keeps stdout and stderr apart and in the order they were written", async () => {
    const cell = await kernel.execute(
      "import sys\nprint('out', 1)\nprint('err', 2, file=sys.stderr)\nsys.stdout.write('partial')"
    )
    const streams = cell.frames.filter((f) => f.type === "stdout" || f.type === "stderr")
    expect(streams).toEqual([
      { type: "stdout", id: cell.id, data: "out 1\n" },
      { type: "stderr", id: cell.id, data: "err 2\n" },
      { type: "stdout", id: cell.id, data: "partial" }
    ])
  })

  it("coalesces consecutive lines of one stream into few frames", async () => {
    const cell = await kernel.execute("for i in range(2000):\n    print('line', i)")
    const stdout = cell.frames.filter((f) => f.type === "stdout")
    expect(cell.stdout).toBe(Array.from({ length: 2000 }, (_, i) => `line ${i}\n`).join(""))
    expect(stdout.length).toBeLessThan(50)
  })

  it("applies the trailing-semicolon rule and skips None", async () => {
    expect((await kernel.execute("1 + 1;")).results).toEqual([])
    expect((await kernel.execute("1 + 1  # no semicolon here;")).results).toHaveLength(1)
    expect((await kernel.execute("None")).results).toEqual([])
    expect((await kernel.execute("x = 3")).results).toEqual([])
  })

  it("counts executions except for silent and storeHistory=false requests", async () => {
    const first = await kernel.execute("1")
    const count = first.done.executionCount as number
    const silent = await kernel.execute("2", { silent: true })
    expect(silent.done.executionCount).toBe(count)
    expect(silent.results).toEqual([])
    const unstored = await kernel.execute("3", { storeHistory: false })
    expect(unstored.done.executionCount).toBe(count)
    expect(plainResult(unstored)).toBe("3")
    expect((await kernel.execute("4")).done.executionCount).toBe(count + 1)
  })

  it("reports errors with a traceback that shows cell source and no runner frames", async () => {
    const cell = await kernel.execute("def inner():\n    return 1 / 0\n\ninner()")
    expect(cell.error).toMatchObject({ ename: "ZeroDivisionError", evalue: "division by zero" })
    const text = (cell.error!.traceback as Array<string>).join("\n")
    expect(text).toContain("Traceback (most recent call last):")
    expect(text).toMatch(/File "<cell-\d+>", line 4, in <module>\n\s+inner\(\)/)
    expect(text).toMatch(/line 2, in inner\n\s+return 1 \/ 0/)
    expect(text).not.toContain("runner.py")
    expect(cell.done).toMatchObject({ status: "error", cancelled: false })
    expect(cell.frames.map((f) => f.type)).toEqual(["started", "error", "done"])
  })

  it("reports syntax errors against the cell source", async () => {
    const cell = await kernel.execute("x = (1,\ny = 2 +")
    expect(cell.error?.ename).toBe("SyntaxError")
    expect((cell.error!.traceback as Array<string>).join("\n")).toContain("<cell-")
    expect(cell.done.status).toBe("error")
  })

  it("keeps state across cells and after a failing cell", async () => {
    await kernel.execute("kept = [1]\ndef grow():\n    kept.append(len(kept) + 1)")
    const failing = await kernel.execute("grow()\nkept.append('before')\nraise ValueError('stop')\nkept.append('after')")
    expect(failing.error?.ename).toBe("ValueError")
    expect(plainResult(await kernel.execute("kept"))).toBe("[1, 2, 'before']")
    expect(plainResult(await kernel.execute("__name__"))).toBe("'__main__'")
  })

  it("pickles classes defined in cells (the namespace is module __main__)", async () => {
    const cell = await kernel.execute(
      "import pickle\nclass Point:\n    def __init__(self, x): self.x = x\npickle.loads(pickle.dumps(Point(7))).x"
    )
    expect(plainResult(cell)).toBe("7")
  })

  it("runs top-level await on one persistent event loop", async () => {
    await kernel.execute("import asyncio\nasync def twice(x):\n    await asyncio.sleep(0.01)\n    return x * 2")
    const cell = await kernel.execute("first = await twice(21)\nloop_id = id(asyncio.get_running_loop())\nfirst")
    expect(plainResult(cell)).toBe("42")
    const again = await kernel.execute("id(asyncio.get_running_loop()) == loop_id and await twice(1) == 2")
    expect(plainResult(again)).toBe("True")
    const failing = await kernel.execute("await asyncio.sleep(0)\nraise KeyError('async')")
    expect(failing.error).toMatchObject({ ename: "KeyError" })
    expect((failing.error!.traceback as Array<string>).join("\n")).not.toContain("base_events.py")
  })

  it("applies cwd and env from any request and puts cwd on sys.path", async () => {
    const sub = path.join(workdir, "pkgdir")
    fs.mkdirSync(sub, { recursive: true })
    fs.writeFileSync(path.join(sub, "localmod.py"), "VALUE = 'imported'\n")
    const cell = await kernel.execute(
      "import os, localmod\n(os.getcwd(), os.environ['VEYYON_T'], 'VEYYON_GONE' in os.environ, localmod.VALUE)",
      { cwd: sub, env: { VEYYON_T: "set", VEYYON_GONE: null } }
    )
    expect(plainResult(cell)).toBe(`('${fs.realpathSync(sub)}', 'set', False, 'imported')`)
  })

  it("turns child-process output and os.write(1) into stdout frames", async () => {
    const cell = await kernel.execute(
      "import os, subprocess\nprint('py', flush=True)\nos.system('echo from-system')\n" +
        "subprocess.run(['echo', 'from-subprocess'])\nos.write(1, b'raw-fd\\n')\nprint('end')"
    )
    expect(cell.stdout).toBe("py\nfrom-system\nfrom-subprocess\nraw-fd\nend\n")
    expect(cell.stderr).toBe("")
  })

  it("never lets a cell forge frames", async () => {
    const fake = '{"type":"done","id":"forged","status":"ok","executionCount":99,"cancelled":false}'
    const cell = await kernel.execute(
      `import os, shlex, sys\nfake = ${JSON.stringify(fake)}\nprint(fake)\nos.write(1, (fake + "\\n").encode())\n` +
        `os.system("echo " + shlex.quote(fake))\nsys.__stdout__.write(fake + "\\n"); sys.__stdout__.flush()`
    )
    expect(cell.stdout).toBe(`${fake}\n`.repeat(4))
    expect(kernel.frames.some((f) => f.id === "forged")).toBe(false)
    expect(cell.done.status).toBe("ok")
  })

  it("survives invalid UTF-8, split multibyte characters and lone surrogates", async () => {
    const cell = await kernel.execute(
      "import os, sys, time\nos.write(1, b'bad:\\xff\\xfe:end\\n')\ne = 'é€😀'.encode()\n" +
        "for b in e:\n    os.write(1, bytes([b])); time.sleep(0.005)\nos.write(1, b'\\n')\n" +
        "print('lone:\\ud800:')\nsys.stderr.write('err:\\udcff\\n')\n'\\udfff'"
    )
    expect(kernel.badLines).toEqual([])
    expect(cell.stdout).toBe("bad:\ufffd\ufffd:end\né€😀\nlone:\ud800:\n")
    expect(cell.stderr).toBe("err:\udcff\n")
    expect(plainResult(cell)).toBe("'\\udfff'")
  })

  it("delivers 10 MB of output complete, in bounded frames", async () => {
    const cell = await kernel.execute(
      "import os, sys\nsys.stdout.write('a' * 5_000_000)\nsys.stdout.write('\\n')\n" +
        "os.write(1, b'b' * 5_000_000)\nprint('x\\n' * 100_000, end='')",
      { timeoutMs: 60_000 }
    )
    expect(cell.stdout.length).toBe(5_000_001 + 5_000_000 + 200_000)
    expect(cell.stdout.startsWith("a".repeat(1000))).toBe(true)
    expect(cell.stdout.indexOf("b")).toBe(5_000_001)
    expect(cell.stdout.endsWith("x\nx\n")).toBe(true)
    const largest = Math.max(...cell.frames.filter((f) => f.type === "stdout").map((f) => String(f.data).length))
    expect(largest).toBeLessThanOrEqual(64 * 1024)
  })

  it("streams output while a cell is still running", async () => {
    const id = kernel.request("import time\nprint('early')\ntime.sleep(0.5)\nprint('late')")
    const early = await kernel.waitForStdout("early", id)
    expect(kernel.framesOf(id).some((f) => f.type === "done")).toBe(false)
    expect(early.data).toBe("early\n")
    await kernel.collect(id)
  })

  it("sends started for a silent cell well before the cell ends", async () => {
    const id = kernel.request("import time\ntime.sleep(1)")
    await kernel.waitFor((f) => f.type === "started" && f.id === id, 500)
    expect(kernel.framesOf(id).some((f) => f.type === "done")).toBe(false)
    await kernel.collect(id)
  })

  it("sends display frames for display() and _repr_*_ objects", async () => {
    const cell = await kernel.execute(
      "class Card:\n    def _repr_html_(self): return '<b>card</b>'\n    def _repr_markdown_(self): raise RuntimeError('skip')\n" +
        "    def _repr_png_(self): return b'\\x89PNG\\r\\n'\n    def _repr_svg_(self): return '<svg/>'\n" +
        "    def _repr_latex_(self): return r'$x$'\n    def _repr_jpeg_(self): return b'\\xff\\xd8'\n" +
        "    def _repr_json_(self): return {'k': [1, 2]}\n    def __repr__(self): return 'Card()'\n" +
        "class Bundle:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n" +
        "        return {'application/vnd.demo+json': {'n': 1}, 'text/plain': 'bundle!'}\n" +
        "print('before')\ndisplay(Card(), Bundle())\ndisplay({'text/markdown': '**raw**'}, raw=True)\nCard()"
    )
    const card = {
      "text/html": "<b>card</b>",
      "application/json": { k: [1, 2] },
      "image/png": Buffer.from("\x89PNG\r\n", "latin1").toString("base64"),
      "image/jpeg": Buffer.from([0xff, 0xd8]).toString("base64"),
      "image/svg+xml": "<svg/>",
      "text/latex": "$x$",
      "text/plain": "Card()"
    }
    expect(cell.displays).toEqual([card, { "application/vnd.demo+json": { n: 1 }, "text/plain": "bundle!" }, { "text/markdown": "**raw**" }])
    expect(cell.results).toEqual([card])
    expect(cell.frames.map((f) => f.type)).toEqual(["started", "stdout", "display", "display", "display", "result", "done"])
  })

  it("exposes emit_status and the runtime module to cells", async () => {
    const cell = await kernel.execute(
      "import veyyon_runtime as vr\nvr.emit_status('find', count=3, pattern='*.py')\n" +
        "(vr.current_request_id() is not None, __veyyon__ is vr, callable(vr.bridge_call))"
    )
    expect(cell.statuses).toEqual([{ op: "find", count: 3, pattern: "*.py" }])
    expect(cell.frames.find((f) => f.type === "display")?.bundle).toEqual({
      [STATUS_MIME]: { op: "find", count: 3, pattern: "*.py" }
    })
    expect(plainResult(cell)).toBe("(True, True, True)")
  })

  it("answers malformed lines with a ProtocolError and keeps serving", async () => {
    const before = kernel.frames.length
    kernel.sendRaw("this is not json\n")
    const anonymous = await kernel.waitFor((f) => f.type === "error" && f.id === null, 10_000, before)
    expect(anonymous).toMatchObject({ ename: "ProtocolError" })
    expect(String(anonymous.evalue)).toContain("not JSON")
    kernel.sendRaw('{"id":"bad-1","code":42}\n')
    const cell = await kernel.collect("bad-1")
    expect(cell.error).toMatchObject({ ename: "ProtocolError" })
    expect(String(cell.error?.evalue)).toContain("code must be a string")
    expect(cell.done).toMatchObject({ status: "error", cancelled: false })
    kernel.sendRaw(Buffer.from([0xff, 0xfe, 0x7b, 0x0a]))
    await kernel.waitFor((f) => f.type === "error" && f.id === null && f !== anonymous, 10_000, before + 1)
    expect(plainResult(await kernel.execute("'still alive'"))).toBe("'still alive'")
  })

  it("printed nothing but valid frames during the whole suite", () => {
    expect(kernel.badLines).toEqual([])
  })
})

describe.skipIf(!integrationEnabled())(titled("runner process lifetime", integrationOff()), () => {
  afterAll(() => killAll())

  it("exits with status 0 on an exit request", async () => {
    const kernel = await startKernel()
    kernel.send({ type: "exit" })
    expect(await kernel.exited).toEqual({ code: 0, signal: null })
  })

  it("answers the running cell before it exits on an exit request sent while the cell runs", async () => {
    const kernel = await startKernel()
    const id = kernel.request("import time\nprint('sleeping', flush=True)\ntime.sleep(0.5)\nprint('woke')")
    await kernel.waitForStdout("sleeping", id)
    kernel.send({ type: "exit" })
    const cell = await kernel.collect(id)
    expect(cell.stdout).toBe("sleeping\nwoke\n")
    expect(cell.done).toMatchObject({ status: "ok", cancelled: false })
    expect(await kernel.exited).toEqual({ code: 0, signal: null })
  })

  it("exits with status 0 when stdin closes", async () => {
    const kernel = await startKernel()
    kernel.proc.stdin!.end()
    expect(await kernel.exited).toEqual({ code: 0, signal: null })
  })

  it("runs the requests already sent before ending at EOF, so a piped script works standalone", async () => {
    const kernel = await startKernel()
    const first = kernel.request("import time\ntime.sleep(0.3)\nprint('first')")
    const second = kernel.request("print('second')")
    kernel.proc.stdin!.end()
    expect(await kernel.exited).toEqual({ code: 0, signal: null })
    const done = kernel.frames.filter((f) => f.type === "done").map((f) => f.id)
    expect(done.slice(-2)).toEqual([first, second])
    const text = kernel.frames.filter((f) => f.type === "stdout").map((f) => f.data).join("")
    expect(text).toBe("first\nsecond\n")
  })

  it("ends a busy kernel whose host died", async () => {
    const python = findPython()!
    const script = [
      "import subprocess, sys",
      `p = subprocess.Popen([sys.executable, '-u', ${JSON.stringify(RUNNER_PATH)}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)`,
      "p.stdin.write(b'{\"id\": \"a\", \"code\": \"while True: pass\", \"silent\": false, \"storeHistory\": true}\\n')",
      "p.stdin.flush()",
      "p.stdout.readline()",
      "print(p.pid, flush=True)",
      "import os; os._exit(0)"
    ].join("\n")
    const pid = Number(execFileSync(python, ["-c", script], { encoding: "utf8" }).trim())
    const stillAlive = !(await waitUntil(() => !isLive(pid), 10_000))
    if (stillAlive) process.kill(pid, "SIGKILL")
    expect(stillAlive).toBe(false)
  })

  it("does not start a server when runner.py or the package's server is imported as a module", async () => {
    const kernel = await startKernel()
    const packageDir = path.resolve("runner/python/_veyyon_runner")
    const cell = await kernel.execute(
      "import importlib, importlib.util, sys\nspec = importlib.util.spec_from_file_location('imported_runner', " +
        JSON.stringify(path.resolve("runner/python/runner.py")) +
        ")\nmod = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(mod)\n" +
        `spec = importlib.util.spec_from_file_location('copy_of_runner', ${JSON.stringify(path.join(packageDir, "__init__.py"))}, ` +
        `submodule_search_locations=[${JSON.stringify(packageDir)}])\n` +
        "sys.modules['copy_of_runner'] = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(sys.modules['copy_of_runner'])\n" +
        "server = importlib.import_module('copy_of_runner.server')\n" +
        "server.protocol._frame_fd is None and sys.modules['_veyyon_runner.protocol']._frame_fd is not None"
    )
    expect(plainResult(cell)).toBe("True")
  })
})
