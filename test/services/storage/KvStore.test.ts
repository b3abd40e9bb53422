/**
 * The host-side kv store: the limits hold for the whole store under concurrent writers
 * (the store's own fibers, and Python and JavaScript kernels of one session at once),
 * files are private and in the preludes' format, and the bridge answers are what the
 * preludes expect.
 */
import * as NodeCrypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, ManagedRuntime } from "effect"
import type { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import { evalLayer } from "../../../src/layers/EvalLive.ts"
import { sessionArtifactsDir } from "../../../src/services/output/ArtifactStore.ts"
import { KernelRegistry } from "../../../src/services/registry/KernelRegistry.ts"
import { KV_STORE_MAX, KV_VALUE_MAX, kvFileName, kvKeyProblem, makeKvStore } from "../../../src/services/storage/KvStore.ts"
import { findPython, integrationEnabled } from "../../support/python.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})
const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-kv-test-")))
  roots.push(dir)
  return dir
}

/** Entry files of a kv directory: key -> value, each checked against the shared format. */
const entries = (kvDir: string): Map<string, unknown> => {
  const found = new Map<string, unknown>()
  for (const name of fs.readdirSync(kvDir)) {
    expect(name).toMatch(/^[0-9a-f]{64}\.json$/)
    const entry = JSON.parse(fs.readFileSync(path.join(kvDir, name), "utf8")) as { key: string; value: unknown }
    expect(NodeCrypto.createHash("sha256").update(entry.key, "utf8").digest("hex") + ".json").toBe(name)
    found.set(entry.key, entry.value)
  }
  return found
}

const storedBytes = (kvDir: string): number =>
  fs.readdirSync(kvDir).reduce((sum, name) => sum + fs.statSync(path.join(kvDir, name)).size, 0)

describe("KvStore", () => {
  it.effect("writes entries in the preludes' format, private, keeping the value's JSON text as given", () =>
    Effect.gen(function*() {
      const store = makeKvStore()
      const dir = path.join(tempDir(), "kv")
      yield* store.set(dir, "n", "123456789012345678901234567890")
      yield* store.set(dir, "é✓", `{"a":[1,2.5,null]}`)
      expect(fs.readFileSync(path.join(dir, kvFileName("n")), "utf8")).toBe(`{"key":"n","value":123456789012345678901234567890}`)
      expect(entries(dir)).toEqual(new Map<string, unknown>([["n", 123456789012345678901234567890], ["é✓", { a: [1, 2.5, null] }]]))
      if (process.platform !== "win32") {
        expect(fs.statSync(dir).mode & 0o777).toBe(0o700)
        expect(fs.statSync(path.join(dir, kvFileName("n"))).mode & 0o777).toBe(0o600)
      }
      expect(yield* store.delete(dir, "n")).toBe(true)
      expect(yield* store.delete(dir, "n")).toBe(false)
      expect([...entries(dir).keys()]).toEqual(["é✓"])
    }))

  it.effect("refuses bad keys, values that are not JSON or too big, and a store that would pass 4 MiB", () =>
    Effect.gen(function*() {
      const store = makeKvStore()
      const dir = path.join(tempDir(), "kv")
      expect(kvKeyProblem("a/b")).toContain('may not contain "/"')
      expect(kvKeyProblem("")).toContain("1 to 256 characters")
      expect(kvKeyProblem("\ud800")).toContain("lone surrogates")
      expect(kvKeyProblem("k".repeat(256))).toBeUndefined()
      expect((yield* Effect.flip(store.set(dir, "a\\b", "1"))).name).toBe("KvInvalid")
      expect((yield* Effect.flip(store.set(dir, "k", "{nope"))).reason).toContain("not valid JSON")
      expect((yield* Effect.flip(store.set(dir, "k", JSON.stringify("x".repeat(KV_VALUE_MAX))))).reason).toContain("256 KiB")
      const big = JSON.stringify("x".repeat(KV_VALUE_MAX - 10))
      for (let i = 0; i < 15; i++) yield* store.set(dir, `k${i}`, big)
      const full = yield* Effect.flip(store.set(dir, "k15", big))
      expect(full.name).toBe("KvStoreFull")
      expect(full.reason).toContain("kv store is full")
      yield* store.set(dir, "k3", JSON.stringify("replaced"))
      expect(storedBytes(dir)).toBeLessThanOrEqual(KV_STORE_MAX)
    }))

  it.effect("keeps the total under 4 MiB when many writers race", () =>
    Effect.gen(function*() {
      const store = makeKvStore()
      const dir = path.join(tempDir(), "kv")
      const big = JSON.stringify("y".repeat(200 * 1024))
      const results = yield* Effect.all(
        Array.from({ length: 48 }, (_, i) => Effect.exit(store.set(dir, `w${i}`, big))),
        { concurrency: "unbounded" }
      )
      const stored = results.filter(Exit.isSuccess).length
      expect(stored).toBeGreaterThan(0)
      expect(stored).toBeLessThan(48)
      expect(storedBytes(dir)).toBeLessThanOrEqual(KV_STORE_MAX)
      expect(entries(dir).size).toBe(stored)
    }))

  it.effect("answers bridge calls as the preludes expect", () =>
    Effect.gen(function*() {
      const store = makeKvStore()
      const dir = path.join(tempDir(), "kv")
      expect(yield* store.answer(dir, { op: "set", key: "a", value: "[1]" })).toBeNull()
      expect(yield* store.answer(dir, { op: "delete", key: "a" })).toBe(true)
      expect(yield* store.answer(dir, { op: "delete", key: "a" })).toBe(false)
      const bad = yield* Effect.flip(store.answer(dir, { op: "rename", key: "a" }))
      expect(bad).toMatchObject({ name: "KvInvalid" })
      expect((yield* Effect.flip(store.answer(dir, { op: "set", key: "a", value: 1 }))).message).toContain("JSON text")
      expect((yield* Effect.flip(store.answer(dir, null))).name).toBe("KvInvalid")
    }))

  it.effect("answers reads through the host from the files too: the value's text as written, keys by code point, links not followed", () =>
    Effect.gen(function*() {
      const store = makeKvStore()
      const dir = path.join(tempDir(), "kv")
      expect(store.spaceOf("any", "/session")).toBe(path.join("/session", "kv"))
      expect(store.kernelEnv).toEqual({})
      expect(yield* store.answer(dir, { op: "list" })).toEqual([])
      for (const key of ["\u{1F600}", "\uFFFD", "a"]) yield* store.set(dir, key, "123456789012345678901234567890")
      const backslash = JSON.stringify({ x: "\\\"" })
      yield* store.set(dir, "q\"uote", backslash)
      expect(yield* store.answer(dir, { op: "get", key: "a" })).toBe("123456789012345678901234567890")
      expect(yield* store.answer(dir, { op: "get", key: "q\"uote" })).toBe(backslash)
      expect(yield* store.answer(dir, { op: "get", key: "missing" })).toBeNull()
      expect(yield* store.answer(dir, { op: "list" })).toEqual(["a", "q\"uote", "\uFFFD", "\u{1F600}"])
      fs.symlinkSync(path.join(dir, kvFileName("a")), path.join(dir, kvFileName("linked")))
      expect(yield* store.get(dir, "linked")).toBeUndefined()
      expect((yield* store.list(dir)).length).toBe(4)
    }))
})

const python = findPython()

describe.skipIf(!integrationEnabled() || python === undefined)(titled("kv cap with Python and JavaScript kernels writing at once", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const root = tempDir()
  const artifactsDir = path.join(root, "sessions")
  const runtime = ManagedRuntime.make(evalLayer({ env: false, settings: { artifactsDir, python: { interpreter: python! } } }))
  afterAll(() => runtime.dispose())

  const runCell = (language: "py" | "js", code: string) =>
    runtime.runPromise(Effect.flatMap(KernelRegistry, (registry) => {
      const outputs: Array<KernelOutput> = []
      return Effect.map(
        registry.run({ language, sessionId: "kv-race", cwd: root, code, timeoutSeconds: 120 }, (output) => Effect.sync(() => void outputs.push(output))),
        (outcome) => ({ outcome, stdout: outputs.flatMap((o) => (o._tag === "Stdout" ? [o.text] : [])).join("") })
      )
    }))

  it("stores at most 4 MiB in all, refusing the rest with a clear error in each language", async () => {
    const py = [
      "from concurrent.futures import ThreadPoolExecutor",
      "def put(i):",
      "    try:",
      "        kv.set('py-%d' % i, 'p' * 200000)",
      "        return 'ok'",
      "    except ValueError as exc:",
      "        return str(exc)",
      "with ThreadPoolExecutor(8) as pool:",
      "    answers = list(pool.map(put, range(24)))",
      "print(answers.count('ok'), sum('kv store is full' in a for a in answers))"
    ].join("\n")
    const js = [
      "const answers = await Promise.all(Array.from({ length: 24 }, (_, i) =>",
      "  kv.set(`js-${i}`, 'j'.repeat(200000)).then(() => 'ok', (error) => `${error.name}: ${error.message}`)))",
      "console.log(answers.filter((a) => a === 'ok').length, answers.filter((a) => a.includes('RangeError: kv store is full')).length)"
    ].join("\n")
    const [pyRun, jsRun] = await Promise.all([runCell("py", py), runCell("js", js)])
    expect(pyRun.outcome.status).toBe("ok")
    expect(jsRun.outcome.status).toBe("ok")
    const [pyOk, pyFull] = pyRun.stdout.trim().split(" ").map(Number)
    const [jsOk, jsFull] = jsRun.stdout.trim().split(" ").map(Number)
    expect(pyOk! + pyFull!).toBe(24)
    expect(jsOk! + jsFull!).toBe(24)
    const kvDir = path.join(sessionArtifactsDir(artifactsDir, "kv-race"), "kv")
    const stored = entries(kvDir)
    expect(stored.size).toBe(pyOk! + jsOk!)
    expect(pyFull! + jsFull!).toBeGreaterThan(0)
    expect(storedBytes(kvDir)).toBeLessThanOrEqual(KV_STORE_MAX)
    expect(fs.readdirSync(kvDir).filter((name) => name.endsWith(".tmp"))).toEqual([])
  })
})
