/**
 * Sessions that outlive their kernels, through the whole stack with real Python, Node and
 * Ruby kernels: a kernel killed (-9) after a cell, or idled out, is replaced by one whose
 * namespace was restored first, and the next cell's result says so; `reset: true` forgets;
 * a second process with the same session id restores; and what cannot be trusted or saved
 * is named, never loaded: a snapshot modified on disk, one copied from another session,
 * an unpicklable value, a value over the budget.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { ManagedRuntime } from "effect"
import { findRubyCandidate } from "../../../src/backends/ruby.ts"
import { evalLayer } from "../../../src/layers/EvalLive.ts"
import type { SettingsInput } from "../../../src/services/config/Settings.ts"
import { sessionArtifactsDir } from "../../../src/services/output/ArtifactStore.ts"
import { snapshotsRoot } from "../../../src/services/snapshots/FileSnapshotStore.ts"
import { EvalTool } from "../../../src/services/tool/EvalTool.ts"
import { printed } from "../../support/evalResult.ts"
import { isLive, waitUntil } from "../../support/process.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"
import { tempDir } from "../../support/tempDirs.ts"

const python = findPython()
const rubyFound = !(findRubyCandidate(undefined, process.cwd(), process.env.PATH) instanceof Error)
const root = tempDir("veyyon-snapshots-")
const artifactsDir = path.join(root, "artifacts")
const runtimes: Array<ManagedRuntime.ManagedRuntime<EvalTool, unknown>> = []
afterAll(async () => {
  for (const runtime of runtimes) await runtime.dispose()
  fs.rmSync(root, { recursive: true, force: true })
})

type Language = "py" | "js" | "rb"

const makeTool = (settings: SettingsInput = {}) => {
  const runtime = ManagedRuntime.make(evalLayer({
    env: false,
    settings: { artifactsDir, eval: { rb: rubyFound }, ...(python === undefined ? {} : { python: { interpreter: python } }), ...settings }
  }))
  runtimes.push(runtime)
  const run = (language: Language, code: string, sessionId: string, extra: { readonly reset?: boolean } = {}) =>
    runtime.runPromise(EvalTool.use((tool) => tool.run({ language, code, ...extra }, { sessionId, cwd: root })))
  const dispose = async () => {
    runtimes.splice(runtimes.indexOf(runtime), 1)
    await runtime.dispose()
  }
  return { run, dispose }
}

/** A cell that prints the kernel's pid, and one per language that kills it from outside. */
const pidCell: Record<Language, string> = { py: "import os; print(os.getpid())", js: "console.log(process.pid)", rb: "puts Process.pid" }

const killKernel = async (tool: ReturnType<typeof makeTool>, language: Language, sessionId: string) => {
  const pid = Number(printed(await tool.run(language, pidCell[language], sessionId)))
  expect(pid).toBeGreaterThan(0)
  process.kill(pid, "SIGKILL")
  await waitUntil(() => !isLive(pid), 20_000)
}

/**
 * Resolves once the session's snapshot of `language` on disk is as of cell `cell` or later:
 * snapshots are saved off the answer's path, and one that a quick next cell made yield is
 * made again after that cell, so a kill right after a cell can come before any is saved.
 */
const snapshotSaved = async (sessionId: string, language: Language, cell: number) => {
  const meta = path.join(sessionArtifactsDir(snapshotsRoot(artifactsDir), sessionId), `${language}.meta`)
  const asOf = () => {
    try {
      return (JSON.parse(JSON.parse(fs.readFileSync(meta, "utf8")).text) as { asOfCell: number }).asOfCell
    } catch {
      return -1
    }
  }
  expect(await waitUntil(() => asOf() >= cell, 30_000), `no snapshot of ${sessionId} as of cell ${cell}`).toBe(true)
}

/** Each language's cells: state worth keeping, then a cell that reads all of it back. */
const state: Record<Language, { readonly define: string; readonly read: string; readonly expected: string }> = {
  py: {
    define: [
      "import json as js_mod",
      "class Point:",
      "    def __init__(self, x, y): self.x, self.y = x, y",
      "    def norm2(self): return self.x ** 2 + self.y ** 2",
      "def double(v): return 2 * v",
      "rows = [1, 2, 3]",
      "alias = rows",
      "p = Point(3, 4)",
      "config = {'name': 'alpha', 'nested': {'k': [1.5, None]}}"
    ].join("\n"),
    read: "rows.append(4); print(alias, p.norm2(), double(21), js_mod.dumps(config['nested']))",
    expected: "[1, 2, 3, 4] 25 42 {\"k\": [1.5, null]}"
  },
  js: {
    define: [
      "const config = { name: 'alpha', nested: { k: [1.5, null] } }",
      "let count = 41",
      "const rows = [1, 2, 3]",
      "const seen = new Map([['a', 1]])",
      "function double(v) { return 2 * v }"
    ].join("\n"),
    read: "count += 1; console.log(count, rows.length, seen.get('a'), double(21), JSON.stringify(config.nested))",
    expected: "42 3 1 42 {\"k\":[1.5,null]}"
  },
  rb: {
    define: [
      "class Point",
      "  attr_reader :x, :y",
      "  def initialize(x, y); @x = x; @y = y; end",
      "  def norm2; x * x + y * y; end",
      "end",
      "rows = [1, 2, 3]",
      "same = rows",
      "pt = Point.new(3, 4)",
      "config = { 'name' => 'alpha', 'k' => [1.5, nil] }"
    ].join("\n"),
    read: "rows << 4; puts \"#{same.inspect} #{pt.norm2} #{config['k'].inspect}\"",
    expected: "[1, 2, 3, 4] 25 [1.5, nil]"
  }
}

const languages = (["py", "js", "rb"] as const).filter((language) => language !== "rb" || rubyFound)

describe.skipIf(!integrationEnabled() || python === undefined)(
  titled("sessions outliving their kernels", skipReason(integrationOff(), python === undefined && "no python3 found")),
  () => {
    const tool = makeTool()

    for (const language of languages) {
      it(`${language}: after kill -9 the next cell sees the variables, with a notice naming the cell`, async () => {
        const sessionId = `killed-${language}`
        const defined = await tool.run(language, state[language].define, sessionId)
        expect(defined.status).toBe("ok")
        await snapshotSaved(sessionId, language, defined.executionCount)
        await killKernel(tool, language, sessionId)
        const after = await tool.run(language, state[language].read, sessionId)
        expect(after.status, after.text).toBe("ok")
        expect(printed(after)).toContain(state[language].expected)
        expect(after.notice).toMatch(new RegExp(`new ${language} kernel, so the session's state was restored as of cell \\d+`))
        expect(after.notice).toMatch(/\d+ names? came back/)
        const again = await tool.run(language, state[language].read, sessionId)
        expect(again.notice).toBeUndefined()
      })

      it(`${language}: reset forgets the snapshot too`, async () => {
        const sessionId = `reset-${language}`
        await tool.run(language, state[language].define, sessionId)
        await tool.run(language, "1", sessionId, { reset: true })
        await killKernel(tool, language, sessionId)
        const after = await tool.run(language, state[language].read, sessionId)
        expect(after.status).toBe("error")
        // Only what the cell after the reset defined (the pid cell's import, in Python) can come back.
        expect(after.notice ?? "").not.toMatch(/rows|config|count/)
      })
    }

    it("py: an idled-out kernel comes back with its variables", async () => {
      const idle = makeTool({ kernel: { idleTtlMs: 300 } })
      const kept = await idle.run("py", "import os\nkept = {'a': 1}\nprint(os.getpid())", "idle-py")
      await snapshotSaved("idle-py", "py", kept.executionCount)
      const pid = Number(printed(await idle.run("py", "print(os.getpid())", "idle-py")))
      await waitUntil(() => !isLive(pid), 30_000)
      const after = await idle.run("py", "print(kept['a'], os.getpid())", "idle-py")
      expect(printed(after)).toMatch(/^1 \d+$/)
      expect(Number(printed(after).split(" ")[1])).not.toBe(pid)
      expect(after.notice).toContain("restored as of cell")
      await idle.dispose()
    })

    it("py: a new process with the same session id restores it; a session with another id sees nothing", async () => {
      const first = makeTool()
      await first.run("py", "carried = 'over'", "restart-py")
      await first.dispose()
      const second = makeTool()
      const after = await second.run("py", "print(carried)", "restart-py")
      expect(printed(after)).toBe("over")
      expect(after.notice).toContain("restored as of cell 1")
      const other = await second.run("py", "print(globals().get('carried'))", "restart-other")
      expect(printed(other)).toBe("None")
      await second.dispose()
    })

    it("py: values that cannot be saved, or are over the budget, are named with why; the rest comes back", async () => {
      const small = makeTool({ session: { snapshotValueBudgetMb: 1 } })
      await small.run("py", "import socket\nconn = socket.socket()\nbig = bytes(3 * 1024 * 1024)\nfine = 7", "honest-py")
      await small.dispose()
      const after = makeTool({ session: { snapshotValueBudgetMb: 1 } })
      const result = await after.run("py", "print(fine, 'conn' in globals(), 'big' in globals())", "honest-py")
      expect(printed(result)).toBe("7 False False")
      expect(result.notice).toMatch(/conn: [^;]*socket[^;]*cannot be saved/)
      expect(result.notice).toMatch(/big: at least 3 MiB, over the 1 MiB per-value budget/)
      await after.dispose()
    })

    const sessionSnapshotDir = (sessionId: string) => sessionArtifactsDir(snapshotsRoot(artifactsDir), sessionId)

    it("py: a snapshot modified on disk is refused with a notice and never loaded", async () => {
      const writer = makeTool()
      await writer.run("py", "marker = 'original'", "tampered-py")
      await writer.dispose()
      const dir = sessionSnapshotDir("tampered-py")
      const payload = fs.readdirSync(dir).find((name) => name.endsWith(".payload"))!
      const bytes = fs.readFileSync(path.join(dir, payload))
      bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 0xff
      fs.writeFileSync(path.join(dir, payload), bytes)
      const reader = makeTool()
      const result = await reader.run("py", "print(globals().get('marker'))", "tampered-py")
      expect(printed(result)).toBe("None")
      expect(result.notice).toContain("was not loaded: its payload was modified after it was sealed")
      expect(fs.existsSync(path.join(dir, payload))).toBe(false)
      await reader.dispose()
    })

    it("py: another session's snapshot copied over this one's is refused", async () => {
      const writer = makeTool()
      await writer.run("py", "secret_of_a = 'a'", "owner-a")
      await writer.run("py", "mine = 'b'", "owner-b")
      await writer.dispose()
      const from = sessionSnapshotDir("owner-a")
      const to = sessionSnapshotDir("owner-b")
      fs.rmSync(to, { recursive: true })
      fs.cpSync(from, to, { recursive: true })
      const reader = makeTool()
      const result = await reader.run("py", "print(globals().get('secret_of_a'), globals().get('mine'))", "owner-b")
      expect(printed(result)).toBe("None None")
      expect(result.notice).toContain("was not loaded: it belongs to another session")
      await reader.dispose()
    })

    it("py: with snapshots off nothing is saved or restored", async () => {
      const off = makeTool({ session: { snapshots: "off" } })
      await off.run("py", "x = 1", "off-py")
      await off.dispose()
      expect(fs.existsSync(sessionSnapshotDir("off-py"))).toBe(false)
      const again = makeTool({ session: { snapshots: "off" } })
      const result = await again.run("py", "print(globals().get('x'))", "off-py")
      expect(printed(result)).toBe("None")
      expect(result.notice).toBeUndefined()
      await again.dispose()
    })

    it("py: the snapshot files are private and the key never reaches the kernel", async () => {
      const snapshots = snapshotsRoot(artifactsDir)
      expect(fs.statSync(snapshots).mode & 0o777).toBe(0o700)
      expect(fs.statSync(path.join(snapshots, "key")).mode & 0o777).toBe(0o600)
      const key = fs.readFileSync(path.join(snapshots, "key")).toString("hex")
      const environ = await tool.run("py", "import os; print('\\n'.join(f'{k}={v}' for k, v in os.environ.items()))", "key-py")
      expect(environ.text).not.toContain(key)
      expect(environ.text).not.toContain(".snapshots")
    })

  }
)
