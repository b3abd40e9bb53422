/**
 * kv end to end: values outlive %reset and the kernel, and two writer processes on
 * different keys lose no update. The files are read back here with the documented format
 * (hex SHA-256 name, {"key", "value"} content), as another runtime would.
 */
import { spawn } from "node:child_process"
import * as NodeCrypto from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { AgentBridgeNotConfigured } from "../../src/kernel/AgentBridge.ts"
import { integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { baseLayer, doneOf, preludePath, python, resultOf, run, startKernel, stdoutOf, tempDir } from "./kernel.ts"

const layer = Layer.merge(baseLayer, AgentBridgeNotConfigured)

const WRITER = `
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("veyyon_prelude_writer", sys.argv[1])
prelude = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prelude)
name, rounds, root = sys.argv[2], int(sys.argv[3]), os.environ["VEYYON_ARTIFACTS_DIR"]
open(os.path.join(root, "ready-" + name), "w").close()
deadline = time.time() + 10
while not all(os.path.exists(os.path.join(root, "ready-" + w)) for w in ("a", "b")) and time.time() < deadline:
    time.sleep(0.005)
for i in range(rounds):
    prelude.kv.set("%s-%d" % (name, i % 50), {"writer": name, "i": i})
    prelude.kv.set(name + "-count", i + 1)
`

const ROUNDS = 200

/** Runs one writer process to its exit; a process still running when the scope closes is killed. */
const writer = (name: string, artifactsDir: string) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(python!, ["-B", "-c", WRITER, preludePath, name, String(ROUNDS)], {
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", VEYYON_ARTIFACTS_DIR: artifactsDir },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let stderr = ""
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      const exited = new Promise<{ code: number | null; stderr: string }>((resolve) =>
        child.once("exit", (code) => resolve({ code, stderr }))
      )
      return { child, exited }
    }),
    ({ child }) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
  ).pipe(Effect.flatMap(({ exited }) => Effect.promise(() => exited)))

/** Every entry of a kv directory, checked against the documented file naming. */
const readEntries = (kvDir: string): Map<string, unknown> => {
  const entries = new Map<string, unknown>()
  for (const name of NodeFs.readdirSync(kvDir)) {
    expect(name).toMatch(/^[0-9a-f]{64}\.json$/)
    const entry = JSON.parse(NodeFs.readFileSync(path.join(kvDir, name), "utf8")) as { key: string; value: unknown }
    expect(NodeCrypto.createHash("sha256").update(entry.key, "utf8").digest("hex") + ".json").toBe(name)
    entries.set(entry.key, entry.value)
  }
  return entries
}

describe.skipIf(!integrationEnabled() || python === undefined)(titled("prelude kv store", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  it.live("values survive %reset and a new kernel of the same artifacts directory", () =>
    Effect.gen(function*() {
      const artifacts = yield* tempDir("prelude-kv-")
      yield* Effect.scoped(
        Effect.gen(function*() {
          const kernel = yield* startKernel(artifacts)
          yield* run(kernel, "kv.set('cursor_handle', {'id': 'callback-17'})\nkv.set('n', 3)\nscratch = 1")
          const reset = yield* run(kernel, "%reset -f\nprint('scratch' in globals(), kv.get('cursor_handle'), kv.list())")
          expect(stdoutOf(reset)).toBe("False {'id': 'callback-17'} ['cursor_handle', 'n']\n")
        })
      )
      const kernel = yield* startKernel(artifacts)
      const outputs = yield* run(kernel, "kv.get('cursor_handle'), kv.get('missing', 'dflt'), kv.delete('n'), kv.list()")
      expect(resultOf(outputs)).toBe("({'id': 'callback-17'}, 'dflt', True, ['cursor_handle'])")
      expect([...readEntries(path.join(artifacts, "kv"))]).toEqual([["cursor_handle", { id: "callback-17" }]])
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("bad keys and oversized values are refused with a ValueError", () =>
    Effect.gen(function*() {
      const kernel = yield* startKernel(yield* tempDir("prelude-kv-"))
      const outputs = yield* run(kernel, [
        "for key, value in (('a/b', 1), ('', 1), ('k', 'x' * 300000)):",
        "    try:",
        "        kv.set(key, value)",
        "    except ValueError as exc:",
        "        print(exc)"
      ].join("\n"))
      expect(doneOf(outputs).status).toBe("ok")
      expect(stdoutOf(outputs).split("\n")).toEqual([
        "kv keys may not contain \"/\": 'a/b'",
        "kv keys have 1 to 256 characters; this one has 0",
        "kv value for 'k' encodes to 300002 bytes; one value may have at most 262144 (256 KiB)",
        ""
      ])
    }).pipe(Effect.scoped, Effect.provide(layer)))

  it.live("two writer processes hammering different keys lose no update", () =>
    Effect.gen(function*() {
      const artifacts = yield* tempDir("prelude-kv-")
      const [a, b] = yield* Effect.all([writer("a", artifacts), writer("b", artifacts)], { concurrency: 2 }).pipe(
        Effect.timeoutOrElse({ duration: Duration.seconds(25), orElse: () => Effect.fail(new Error("the writers did not finish")) })
      )
      expect(a).toEqual({ code: 0, stderr: "" })
      expect(b).toEqual({ code: 0, stderr: "" })
      const entries = readEntries(path.join(artifacts, "kv"))
      expect(entries.size).toBe(2 * 51)
      for (const name of ["a", "b"]) {
        expect(entries.get(`${name}-count`)).toBe(ROUNDS)
        for (let k = 0; k < 50; k++) expect(entries.get(`${name}-${k}`)).toEqual({ writer: name, i: ROUNDS - 50 + k })
      }
    }).pipe(Effect.scoped))
})
