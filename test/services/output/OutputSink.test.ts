import { NodeFileSystem } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Arbitrary, Effect, Layer, Schema, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import { ArtifactStore, makeArtifactStore } from "../../../src/services/output/ArtifactStore.ts"
import { DEFAULT_MAX_IMAGE_BYTES, MAX_PENDING_SAVE_BYTES } from "../../../src/services/output/ImageSaves.ts"
import {
  DEFAULT_MAX_RICH_OUTPUTS,
  makeCellSink,
  type OutputLimits,
  OutputSink,
  SinkOutput,
  type SinkResult
} from "../../../src/services/output/OutputSink.ts"
import { DEFAULT_ARTIFACTS_MAX_AGE_HOURS, DEFAULT_ARTIFACTS_MAX_SESSION_MB, Settings } from "../../../src/services/config/Settings.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-sink-test-")))
  roots.push(dir)
  return dir
}

const storeAt = (dir: string) => makeArtifactStore(dir).pipe(Effect.provide(NodeFileSystem.layer))

const DONE = KernelOutput.Done({ status: "ok", executionCount: 1, cancelled: false, timedOut: false, killed: false })

/** Runs `outputs` through a fresh sink over a fresh directory. */
const runSink = (outputs: ReadonlyArray<KernelOutput>, limits: Partial<OutputLimits>, dir = tempDir()) =>
  Effect.gen(function*() {
    const store = yield* storeAt(dir)
    const result = yield* Effect.scoped(Effect.gen(function*() {
      const sink = yield* makeCellSink(store, limits)
      for (const output of outputs) yield* sink.push(output)
      return yield* sink.finish
    }))
    return { result, store, dir }
  })

const isText = (output: SinkOutput): output is Extract<SinkOutput, { _tag: "Stdout" | "Stderr" }> =>
  output._tag === "Stdout" || output._tag === "Stderr"

const textOf = (outputs: ReadonlyArray<SinkOutput>): string => outputs.filter(isText).map((o) => o.text).join("")

/** The text before and after the marker. */
const headAndTail = (result: SinkResult) => {
  const at = result.outputs.findIndex((output) => output._tag === "TextOmitted")
  return { head: textOf(result.outputs.slice(0, at)), tail: textOf(result.outputs.slice(at + 1)) }
}

const bytes = (text: string) => Buffer.byteLength(text, "utf8")

const lineCount = (text: string) => {
  const newlines = text.split("\n").length - 1
  return newlines + (text.length > 0 && !text.endsWith("\n") ? 1 : 0)
}

/** Lines of `full` that `[0, headEnd)` or `[tailStart, end)` touch, counted independently of the sink. */
const touchedLines = (full: string, headEnd: number, tailStart: number) => {
  const touched = new Set<number>()
  let line = 0
  for (let at = 0; at < full.length; at++) {
    if (at < headEnd || at >= tailStart) touched.add(line)
    if (full[at] === "\n") line++
  }
  return touched.size
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

const stdout = (text: string) => KernelOutput.Stdout({ text })
const numbered = (count: number, width: number, from = 0) =>
  Array.from({ length: count }, (_, i) => `line ${String(from + i).padStart(4, "0")} `.padEnd(width - 1, "x") + "\n")

describe("OutputSink: within budget", () => {
  it.effect("keeps small output as it came, coalesces chunks, and writes no artifact", () =>
    Effect.gen(function*() {
      const display = KernelOutput.Display({ bundle: { "text/plain": "42" } })
      const status = KernelOutput.Status({ op: "cd", fields: { cwd: "/x" } })
      const error = KernelOutput.Error({ ename: "ValueError", evalue: "bad", traceback: ["tb"] })
      const { dir, result } = yield* runSink([
        stdout("a\n"),
        stdout("b\n"),
        KernelOutput.Stderr({ text: "warn\n" }),
        display,
        stdout("c"),
        status,
        error,
        DONE
      ], {})
      expect(result.outputs).toEqual([
        SinkOutput.Stdout({ text: "a\nb\n" }),
        SinkOutput.Stderr({ text: "warn\n" }),
        display,
        SinkOutput.Stdout({ text: "c" }),
        status,
        error
      ])
      expect(result.truncation).toBeUndefined()
      expect(result.artifactIds).toEqual([])
      expect(result.outcome).toEqual({ status: "ok", executionCount: 1, cancelled: false, timedOut: false, killed: false })
      expect(fs.readdirSync(dir)).toEqual([])
    }))

  it.effect("is not truncated at exactly the budget, and is one byte or one line later", () =>
    Effect.gen(function*() {
      const atBytes = yield* runSink([stdout("a".repeat(100))], { maxBytes: 100 })
      expect(atBytes.result.truncation).toBeUndefined()
      const overBytes = yield* runSink([stdout("a".repeat(100)), stdout("b")], { maxBytes: 100 })
      expect(overBytes.result.truncation?.totalBytes).toBe(101)
      const atLines = yield* runSink([stdout("x\n".repeat(9) + "x")], { maxLines: 10 })
      expect(atLines.result.truncation).toBeUndefined()
      const overLines = yield* runSink([stdout("x\n".repeat(10) + "x")], { maxLines: 10 })
      expect(overLines.result.truncation?.totalLines).toBe(11)
    }))

  it.effect("ignores events after finish and gives the same result again", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, {})
        yield* sink.push(stdout("one"))
        const first = yield* sink.finish
        yield* sink.push(stdout("two"))
        expect(yield* sink.finish).toBe(first)
        expect(textOf(first.outputs)).toBe("one")
      }))
    }))
})

describe("OutputSink: over budget", () => {
  it.effect("keeps head and tail around one marker, with exact metadata and the full text saved", () =>
    Effect.gen(function*() {
      const lines = numbered(100, 20)
      const full = lines.join("")
      const { result, store } = yield* runSink([...lines.map(stdout), DONE], { maxBytes: 1000, maxLines: 1000 })
      const cut = result.truncation!
      expect(cut).toEqual({
        totalBytes: 2000,
        totalLines: 100,
        shownBytes: 1000,
        shownLines: 50,
        omittedBytes: 1000,
        omittedLines: 50,
        artifactId: cut.artifactId,
        artifactUri: `artifact://${cut.artifactId}`
      })
      expect(cut.artifactId).toMatch(/^out-[a-z0-9]+-[0-9a-f]{8}\.txt$/)
      expect(result.outputs).toEqual([
        SinkOutput.Stdout({ text: lines.slice(0, 25).join("") }),
        SinkOutput.TextOmitted({
          text: `… [50 lines, 1000 bytes omitted; full output: artifact://${cut.artifactId}]`,
          omittedBytes: 1000,
          omittedLines: 50,
          artifactUri: cut.artifactUri
        }),
        SinkOutput.Stdout({ text: lines.slice(75).join("") })
      ])
      expect(result.artifactIds).toEqual([cut.artifactId])
      expect(yield* store.read(cut.artifactId)).toBe(full)
      expect(yield* store.resolve(cut.artifactUri)).toBe(path.join(store.dir, cut.artifactId))
    }))

  it.effect("cuts the same way whether the text comes in one chunk or many", () =>
    Effect.gen(function*() {
      const full = numbered(100, 20).join("")
      const many = yield* runSink([...numbered(100, 20).map(stdout)], { maxBytes: 1000 })
      const one = yield* runSink([stdout(full)], { maxBytes: 1000 })
      expect(one.result.outputs.map((o) => o._tag === "TextOmitted" ? o.omittedBytes : o))
        .toEqual(many.result.outputs.map((o) => o._tag === "TextOmitted" ? o.omittedBytes : o))
    }))

  it.effect("the lines budget alone triggers truncation", () =>
    Effect.gen(function*() {
      const { result } = yield* runSink([stdout("x\n".repeat(11))], { maxBytes: 100_000, maxLines: 10 })
      expect(result.truncation).toMatchObject({
        totalBytes: 22,
        totalLines: 11,
        shownBytes: 20,
        shownLines: 10,
        omittedBytes: 2,
        omittedLines: 1
      })
      expect(headAndTail(result)).toEqual({ head: "x\n".repeat(5), tail: "x\n".repeat(5) })
      expect(result.outputs[1]!._tag === "TextOmitted" && result.outputs[1]!.text).toMatch(/^… \[1 line, 2 bytes omitted;/)
    }))

  it.effect("the bytes budget alone triggers truncation, even inside one line", () =>
    Effect.gen(function*() {
      const { result } = yield* runSink([stdout("a".repeat(100) + "b".repeat(150))], { maxBytes: 100, maxLines: 1000 })
      expect(result.truncation).toMatchObject({
        totalBytes: 250,
        totalLines: 1,
        shownBytes: 100,
        shownLines: 1,
        omittedBytes: 150,
        omittedLines: 0
      })
      expect(headAndTail(result)).toEqual({ head: "a".repeat(50), tail: "b".repeat(50) })
      expect(result.outputs[1]!._tag === "TextOmitted" && result.outputs[1]!.text).toMatch(/^… \[150 bytes omitted;/)
    }))

  it.effect("prefers to cut at a line boundary when one is close", () =>
    Effect.gen(function*() {
      const lines = numbered(100, 30)
      const { result } = yield* runSink(lines.map(stdout), { maxBytes: 1000 })
      const { head, tail } = headAndTail(result)
      expect(head).toBe(lines.slice(0, 16).join(""))
      expect(tail).toBe(lines.slice(84).join(""))
      expect(result.truncation).toMatchObject({ shownLines: 32, omittedLines: 68, omittedBytes: 68 * 30 })
    }))

  it.effect("keeps stdout and stderr apart and in order across the cut", () =>
    Effect.gen(function*() {
      const outputs = Array.from({ length: 40 }, (_, i) =>
        i % 2 === 0 ? stdout(`out ${i}\n`) : KernelOutput.Stderr({ text: `err ${i}\n` }))
      const { result } = yield* runSink(outputs, { maxLines: 6 })
      expect(result.outputs.map((o) => (isText(o) ? `${o._tag}:${o.text}` : o._tag))).toEqual([
        "Stdout:out 0\n",
        "Stderr:err 1\n",
        "Stdout:out 2\n",
        "TextOmitted",
        "Stderr:err 37\n",
        "Stdout:out 38\n",
        "Stderr:err 39\n"
      ])
    }))

  it.effect("keeps rich outputs in order: before the cut in place, from the omitted middle after the marker", () =>
    Effect.gen(function*() {
      const display = (name: string) => KernelOutput.Display({ bundle: { "text/plain": name } })
      const { result } = yield* runSink([
        display("A"),
        stdout("a".repeat(40)),
        display("B"),
        stdout("b".repeat(200)),
        display("C"),
        stdout("c".repeat(200)),
        display("D"),
        stdout("d".repeat(10))
      ], { maxBytes: 100 })
      expect(result.outputs.map((o) => (isText(o) ? o.text : o._tag === "Display" ? o.bundle["text/plain"] : o._tag)))
        .toEqual(["A", "a".repeat(40), "B", "b".repeat(10), "TextOmitted", "C", "c".repeat(40), "D", "d".repeat(10)])
      expect(result.truncation).toMatchObject({ totalBytes: 450, shownBytes: 100, omittedBytes: 350 })
    }))

  it.effect("still bounds the result when the full output cannot be saved", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const store = yield* storeAt(dir)
      fs.rmSync(dir, { recursive: true })
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, { maxBytes: 10 })
        yield* sink.push(stdout("z".repeat(100)))
        return yield* sink.finish
      }))
      expect(result.truncation).toMatchObject({ totalBytes: 100, shownBytes: 10, omittedBytes: 90 })
      expect(result.truncation?.artifactError).toContain("Could not write artifact")
      expect(result.artifactIds).toEqual([])
      const marker = result.outputs.find((output) => output._tag === "TextOmitted")
      expect(marker?.text).toContain("the full output could not be saved")
    }))
})

describe("OutputSink: Unicode", () => {
  it.effect("never splits a surrogate pair and counts UTF-8 bytes", () =>
    Effect.gen(function*() {
      const { result, store } = yield* runSink([stdout("😀".repeat(10))], { maxBytes: 10 })
      expect(result.truncation).toMatchObject({ totalBytes: 40, shownBytes: 8, omittedBytes: 32 })
      expect(headAndTail(result)).toEqual({ head: "😀", tail: "😀" })
      expect(yield* store.read(result.truncation!.artifactId)).toBe("😀".repeat(10))
    }))

  it.effect("joins a surrogate pair split across two chunks", () =>
    Effect.gen(function*() {
      const small = yield* runSink([stdout("x\ud83d"), stdout("\ude00y")], {})
      expect(small.result.outputs).toEqual([SinkOutput.Stdout({ text: "x😀y" })])
      const big = yield* runSink([stdout("x".repeat(20) + "\ud83d"), stdout("\ude00" + "y".repeat(20))], { maxBytes: 10 })
      expect(big.result.truncation?.totalBytes).toBe(44)
      expect(fs.readFileSync(path.join(big.store.dir, big.result.truncation!.artifactId), "utf8"))
        .toBe("x".repeat(20) + "😀" + "y".repeat(20))
    }))

  it.effect("keeps a surrogate left dangling at the end of the cell", () =>
    Effect.gen(function*() {
      const { result } = yield* runSink([stdout("end\ud83d")], {})
      expect(result.outputs).toEqual([SinkOutput.Stdout({ text: "end\ud83d" })])
    }))

  /** The code units a cell prints in the property below: ASCII, two- and three-byte characters, surrogate pairs, newlines (twice as likely). */
  const UNITS = ["a", "é", "字", "😀", "\n", "\n", "𝄞", "b"] as const
  const intBetween = (minimum: number, maximum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum }))

  it.effect.prop(
    "shown + omitted = total, the artifact holds the input, no lone surrogates (pairs split within a stream)",
    {
      units: Arbitrary.array(Arbitrary.map(Arbitrary.schema(intBetween(0, UNITS.length - 1)), (at) => UNITS[at]!), { maxLength: 300 }),
      cuts: Arbitrary.array(Arbitrary.schema(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))), { maxLength: 12 }),
      streams: Arbitrary.array(Arbitrary.schema(Schema.Boolean), { minLength: 13, maxLength: 13 }),
      maxBytes: intBetween(1, 200),
      maxLines: intBetween(1, 20)
    },
    ({ cuts, maxBytes, maxLines, streams, units }) =>
      Effect.gen(function*() {
        const full = units.join("")
        const points = [...new Set(cuts.map((cut) => cut % (full.length + 1)))].sort((a, b) => a - b)
        const chunks = [0, ...points].map((start, i) => full.slice(start, [...points, full.length][i]))
        const onStdout = chunks.map((_, i) => streams[i]!)
        for (let i = 1; i < chunks.length; i++) {
          if (/[\ud800-\udbff]$/.test(chunks[i - 1]!)) onStdout[i] = onStdout[i - 1]!
        }
        const outputs = chunks.map((text, i) => onStdout[i] ? stdout(text) : KernelOutput.Stderr({ text }))
        const { result, store } = yield* runSink(outputs, { maxBytes, maxLines })
        for (const output of result.outputs) if (isText(output)) expect(output.text).not.toMatch(LONE_SURROGATE)
        const cut = result.truncation
        if (cut === undefined) {
          expect(textOf(result.outputs)).toBe(full)
          expect(bytes(full)).toBeLessThanOrEqual(maxBytes)
          expect(lineCount(full)).toBeLessThanOrEqual(maxLines)
          expect(result.artifactIds).toEqual([])
          return
        }
        const { head, tail } = headAndTail(result)
        expect(full.startsWith(head)).toBe(true)
        expect(full.endsWith(tail)).toBe(true)
        expect(head.length + tail.length).toBeLessThan(full.length)
        expect(cut.totalBytes).toBe(bytes(full))
        expect(cut.totalLines).toBe(lineCount(full))
        expect(cut.shownBytes).toBe(bytes(head) + bytes(tail))
        expect(cut.shownBytes + cut.omittedBytes).toBe(cut.totalBytes)
        expect(cut.shownLines + cut.omittedLines).toBe(cut.totalLines)
        expect(cut.shownLines).toBe(touchedLines(full, head.length, full.length - tail.length))
        expect(cut.shownBytes).toBeLessThanOrEqual(maxBytes)
        expect(cut.shownLines).toBeLessThanOrEqual(maxLines)
        expect(yield* store.read(cut.artifactId)).toBe(full)
      }),
    { arbitrary: { runs: 150 } }
  )
})

/** A liveness bound, not a speed target: 50 MB through the sink takes seconds when quiet and far longer under load. */
const LIVENESS_MS = 300_000

describe("OutputSink: bounded memory", () => {
  it.effect("retains about the budget while ~50 MB arrives in 1 KB chunks", () =>
    Effect.gen(function*() {
      const maxBytes = 100 * 1024
      const store = yield* storeAt(tempDir())
      const chunk = "y".repeat(1023) + "\n"
      const chunks = 50 * 1024
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, { maxBytes, maxLines: 2000 })
        let largest = 0
        for (let i = 0; i < chunks; i++) {
          yield* sink.push(i % 2 === 0 ? stdout(chunk) : KernelOutput.Stderr({ text: chunk }))
          if (i % 512 === 0) largest = Math.max(largest, (yield* sink.retained).textChars)
        }
        const retained = yield* sink.retained
        expect(retained.textChars).toBeLessThanOrEqual(maxBytes)
        expect(retained.entries).toBeLessThan(200)
        expect(largest).toBeLessThanOrEqual(maxBytes + chunk.length)
        return yield* sink.finish
      }))
      expect(result.truncation).toMatchObject({
        totalBytes: chunks * 1024,
        totalLines: chunks,
        shownBytes: 100 * 1024,
        shownLines: 100
      })
      expect(fs.statSync(path.join(store.dir, result.truncation!.artifactId)).size).toBe(chunks * 1024)
    }), LIVENESS_MS)

  it.effect("lets go of each 64 KiB frame once the tail has moved past it (the runner's frame size)", () =>
    Effect.gen(function*() {
      const maxBytes = 100 * 1024
      const store = yield* storeAt(tempDir())
      const frame = ("z".repeat(1023) + "\n").repeat(64)
      yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, { maxBytes, maxLines: 2000 })
        let largest = 0
        for (let i = 0; i < 400; i++) {
          yield* sink.push(stdout(frame))
          largest = Math.max(largest, (yield* sink.retained).textChars)
        }
        expect(largest).toBeLessThanOrEqual(maxBytes + frame.length)
        return yield* sink.finish
      }))
    }), LIVENESS_MS)

  it.effect("after the spill, frames the artifact writer takes at once and frames that make it write keep every byte in order", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const frames = Array.from({ length: 48 }, (_, i) => `${String(i).padStart(4, "0")}:${"é✓x".repeat(21_000)}\n`)
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, { maxBytes: 4096, maxLines: 100 })
        for (const [i, frame] of frames.entries()) {
          yield* sink.push(i % 3 === 2 ? KernelOutput.Stderr({ text: frame }) : stdout(frame))
        }
        return yield* sink.finish
      }))
      const full = frames.join("")
      expect(result.truncation).toMatchObject({ totalBytes: Buffer.byteLength(full, "utf8"), totalLines: 48 })
      expect((yield* store.read(result.truncation!.artifactId)) === full).toBe(true)
      expect(headAndTail(result).tail.endsWith(frames[47]!.slice(-100))).toBe(true)
    }))

  it.effect("bounds one chunk far larger than the whole budget", () =>
    Effect.gen(function*() {
      const store = yield* storeAt(tempDir())
      const huge = "h".repeat(3 * 1024 * 1024) + "\n" + "t".repeat(1024 * 1024)
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, { maxBytes: 1000 })
        yield* sink.push(stdout(huge))
        expect((yield* sink.retained).textChars).toBe(1000)
        return yield* sink.finish
      }))
      expect(headAndTail(result)).toEqual({ head: "h".repeat(500), tail: "t".repeat(500) })
      expect(result.truncation).toMatchObject({ totalLines: 2, shownLines: 2, omittedLines: 0 })
      expect(yield* store.read(result.truncation!.artifactId)).toBe(huge)
    }))
})

describe("OutputSink: rich outputs", () => {
  const png = (size: number, fill: number) => Buffer.alloc(size, fill).toString("base64")

  it.effect("keeps images up to the image budget and saves later ones behind a note; every image is an artifact", () =>
    Effect.gen(function*() {
      const first = KernelOutput.Display({ bundle: { "image/png": png(45, 1), "text/plain": "<Figure 1>" } })
      const second = KernelOutput.Result({ bundle: { "image/png": png(45, 2), "text/plain": "<Figure 2>" } })
      const { result, store } = yield* runSink([first, second], { maxImageBytes: 100 })
      expect(result.outputs[0]).toBe(first)
      const replaced = result.outputs[1]!
      expect(replaced._tag).toBe("Result")
      if (replaced._tag !== "Result") return
      expect(Object.keys(replaced.bundle)).toEqual(["text/plain"])
      const note = String(replaced.bundle["text/plain"])
      expect(note).toMatch(/^<Figure 2>\n\[image\/png \(45 bytes\) not shown: .*; saved to artifact:\/\/img-.*\.png\]$/)
      expect(result.truncation).toBeUndefined()
      expect(result.artifactIds).toHaveLength(2)
      expect(note).toContain(`artifact://${result.artifactIds[1]}]`)
      for (const id of result.artifactIds) expect(id).toMatch(/^img-.*\.png$/)
      expect(Buffer.from(yield* store.readBytes(result.artifactIds[0]!))).toEqual(Buffer.alloc(45, 1))
      expect(Buffer.from(yield* store.readBytes(result.artifactIds[1]!))).toEqual(Buffer.alloc(45, 2))
    }))

  it.effect("saves every image past the budget, behind the cell and in order, however many wait", () =>
    Effect.gen(function*() {
      const size = 1024 * 1024
      const payloads = Array.from({ length: Math.ceil((2 * MAX_PENDING_SAVE_BYTES) / size) + 2 }, (_, n) => png(size + n, n))
      const outputs = payloads.map((payload, n) => KernelOutput.Display({ bundle: { "image/png": payload, "text/plain": `<Figure ${n}>` } }))
      const budget = payloads[0]!.length + payloads[1]!.length
      const { result, store } = yield* runSink([...outputs, stdout("after\n")], { maxImageBytes: budget })
      expect(result.outputs[0] === outputs[0] && result.outputs[1] === outputs[1]).toBe(true)
      expect(result.outputs.map((output) => output._tag)).toEqual([...outputs.map(() => "Display"), "Stdout"])
      expect(result.artifactIds).toHaveLength(outputs.length)
      for (let n = 0; n < 2; n++) {
        expect(Buffer.from(yield* store.readBytes(result.artifactIds[n]!)).equals(Buffer.alloc(size + n, n))).toBe(true)
      }
      for (let n = 2; n < outputs.length; n++) {
        const shown = result.outputs[n]!
        const id = result.artifactIds[n]!
        expect(shown._tag === "Display" && shown.bundle).toEqual({
          "text/plain": `<Figure ${n}>\n[image/png (${size + n} bytes) not shown: this result already holds ` +
            `${Math.round((budget / (1024 * 1024)) * 10) / 10} MiB of images; saved to artifact://${id}]`
        })
        expect(Buffer.from(yield* store.readBytes(id)).equals(Buffer.alloc(size + n, n))).toBe(true)
      }
    }))

  it.effect("says so in the note when an image cannot be saved", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const store = yield* storeAt(dir)
      fs.rmSync(dir, { recursive: true })
      const image = KernelOutput.Display({ bundle: { "image/png": png(45, 1) } })
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, { maxImageBytes: 100 })
        yield* sink.push(image)
        yield* sink.push(image)
        return yield* sink.finish
      }))
      expect(result.outputs[0]).toBe(image)
      const noted = result.outputs[1]!
      if (noted._tag !== "Display") return
      expect(noted.bundle).toEqual({ "text/plain": expect.stringMatching(/^\[image\/png \(45 bytes\) not shown: .*; it could not be saved: Could not write artifact/) })
      expect(result.artifactIds).toEqual([])
    }))

  it.effect("saves displays beyond the count limit to one artifact, and always keeps errors", () =>
    Effect.gen(function*() {
      const display = (n: number) => KernelOutput.Display({ bundle: { "text/plain": String(n) } })
      const error = KernelOutput.Error({ ename: "E", evalue: "v", traceback: [] })
      const { result, store } = yield* runSink([
        display(1),
        display(2),
        display(3),
        display(4),
        stdout("text\n"),
        display(5),
        error,
        KernelOutput.Status({ op: "time", fields: { ms: 1 } })
      ], { maxRichOutputs: 3 })
      expect(result.outputs.map((o) => o._tag)).toEqual([
        "Display",
        "Display",
        "Display",
        "OutputsOmitted",
        "Stdout",
        "Error"
      ])
      const marker = result.outputs[3]!
      if (marker._tag !== "OutputsOmitted") return
      expect(marker.count).toBe(3)
      expect(marker.text).toContain("3 more outputs omitted")
      const id = marker.artifactUri.slice("artifact://".length)
      expect(result.artifactIds).toEqual([id])
      const saved = (yield* store.read(id)).trim().split("\n").map((line) => JSON.parse(line))
      expect(saved.map((o) => o._tag)).toEqual(["Display", "Display", "Status"])
      expect(saved[0].bundle).toEqual({ "text/plain": "4" })
    }))

  it.effect("keeps no watchdog pause/resume events, so a cell's many bridge calls use up none of the rich-output budget", () =>
    Effect.gen(function*() {
      const pair = [
        KernelOutput.Status({ op: "timeout", fields: { action: "pause" } }),
        KernelOutput.Status({ op: "timeout", fields: { action: "resume" } })
      ]
      const display = KernelOutput.Display({ bundle: { "text/plain": "shown" } })
      const { result } = yield* runSink([...Array.from({ length: 50 }, () => pair).flat(), display, ...pair], { maxRichOutputs: 3 })
      expect(result.outputs.map((o) => o._tag)).toEqual(["Display"])
      expect(result.artifactIds).toEqual([])
    }))
})

describe("OutputSink service", () => {
  const settings = (maxBytes: number, artifactsDir: string) =>
    Settings.value({
      eval: { py: true, js: true, rb: false, jl: false, pyWorkspace: false },
        kernel: { mode: "session", idleTtlMs: 1000, traceFrames: false, backends: {} },
      artifactsDir,
      artifacts: { maxSessionMb: DEFAULT_ARTIFACTS_MAX_SESSION_MB, maxAgeHours: DEFAULT_ARTIFACTS_MAX_AGE_HOURS },
      output: { maxBytes, maxLines: 7 },
      sandbox: { mode: "off", network: "allow", allowHosts: { rules: [] }, readPaths: [], writePaths: [] },
      limits: { memoryMb: undefined, pids: undefined, fileSizeMb: undefined },
      session: { snapshots: "every-cell", snapshotBudgetMb: 256, snapshotValueBudgetMb: 256, snapshotMaxAgeDays: 7 }
    })

  it.effect("Live takes its budgets from the settings", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const sinks = yield* Effect.provide(
        OutputSink,
        OutputSink.Live.pipe(Layer.provideMerge(ArtifactStore.Live), Layer.provide(settings(123, dir)))
      )
      expect(sinks.limits).toEqual({
        maxBytes: 123,
        maxLines: 7,
        maxImageBytes: DEFAULT_MAX_IMAGE_BYTES,
        maxRichOutputs: DEFAULT_MAX_RICH_OUTPUTS
      })
    }))

  it.effect("collect forwards every event in order and returns the bounded result", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const events = [...numbered(30, 10).map(stdout), KernelOutput.Display({ bundle: { "text/plain": "x" } }), DONE]
      const seen: Array<KernelOutput> = []
      const sinks = yield* Effect.provide(
        OutputSink,
        OutputSink.layer({ maxLines: 10 }).pipe(Layer.provide(ArtifactStore.layer(dir)), Layer.provide(NodeFileSystem.layer))
      )
      const result = yield* sinks.collect(Stream.fromIterable(events), {
        onEvent: (event) => Effect.sync(() => void seen.push(event))
      })
      expect(seen).toEqual(events)
      expect(result.truncation).toMatchObject({ totalLines: 30, shownLines: 10, omittedLines: 20 })
      expect(result.outcome?.status).toBe("ok")
      expect(fs.readFileSync(path.join(dir, result.truncation!.artifactId), "utf8")).toBe(numbered(30, 10).join(""))
    }))

  it.effect("open can use another store and other budgets", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const other = yield* storeAt(tempDir())
      const sinks = yield* Effect.provide(
        OutputSink,
        OutputSink.layer().pipe(Layer.provide(ArtifactStore.layer(dir)), Layer.provide(NodeFileSystem.layer))
      )
      const result = yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* sinks.open({ store: other, limits: { maxBytes: 4 } })
        yield* sink.push(stdout("123456789"))
        return yield* sink.finish
      }))
      expect(result.truncation?.shownBytes).toBe(4)
      expect(fs.readdirSync(other.dir)).toEqual([result.truncation!.artifactId])
      expect(fs.readdirSync(dir)).toEqual([])
    }))
})
