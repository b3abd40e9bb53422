/**
 * The sink's artifact files as its shell handles them: every file it opens is closed (at
 * `finish`, at `close`, with its scope, when a stream fails), and a write that fails (a full
 * disk, mid-cell or as the file closes) leaves a bounded result that says why, for the text
 * artifact and for the omitted outputs' one alike. The full disk is the platform's own: once a
 * set amount was written, the rest of each write goes to /dev/full and fails with ENOSPC.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, FileSystem, Layer, Stream } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import { ArtifactStore, makeArtifactStore } from "../../../src/services/output/ArtifactStore.ts"
import { cellSink, makeCellSink, OutputSink, type SinkOutput } from "../../../src/services/output/OutputSink.ts"
import { skipReason, titled } from "../../support/skip.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const tempDir = (): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-sink-files-")))
  roots.push(dir)
  return dir
}

const noProcFds = fs.existsSync("/proc/self/fd") ? undefined : "this system has no /proc/self/fd to list open files"
const noDevFull = fs.existsSync("/dev/full") ? undefined : "this system has no /dev/full to fill a disk with"

/** The names of the files in `dir` this process holds open. */
const openIn = (dir: string): Array<string> =>
  fs.readdirSync("/proc/self/fd").flatMap((fd) => {
    try {
      const target = fs.readlinkSync(path.join("/proc/self/fd", fd))
      return path.dirname(target) === dir ? [path.basename(target)] : []
    } catch {
      return []
    }
  }).sort()

/**
 * The platform's file system on a disk with `room` bytes free: a write past it writes what
 * fits, then fails as the platform fails on a full disk. `failed` counts the writes that failed.
 */
const fillingDisk = (room: number) => {
  const disk = { left: room, failed: 0 }
  const layer = Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (real) =>
      FileSystem.FileSystem.of({
        ...real,
        open: (file, options) =>
          Effect.gen(function*() {
            const opened = yield* real.open(file, options)
            const full = yield* real.open("/dev/full", { flag: "w" })
            const writeAll = (data: Uint8Array) =>
              Effect.suspend(() => {
                if (data.length <= disk.left) {
                  disk.left -= data.length
                  return opened.writeAll(data)
                }
                const fits = data.subarray(0, disk.left)
                disk.left = 0
                return Effect.andThen(
                  opened.writeAll(fits),
                  full.writeAll(data.subarray(fits.length)).pipe(Effect.tapError(() => Effect.sync(() => disk.failed++)))
                )
              })
            return {
              [FileSystem.FileTypeId]: FileSystem.FileTypeId,
              stat: opened.stat,
              seek: (offset, from) => opened.seek(offset, from),
              sync: opened.sync,
              read: (buffer, readOptions) => opened.read(buffer, readOptions),
              readAlloc: (size, readOptions) => opened.readAlloc(size, readOptions),
              truncate: (length) => opened.truncate(length),
              write: (data) => Effect.as(writeAll(data), data.length),
              writeAll
            } satisfies FileSystem.File
          })
      }))
  ).pipe(Layer.provide(NodeFileSystem.layer))
  return { disk, layer }
}

const storeOn = (dir: string, layer: Layer.Layer<FileSystem.FileSystem> = NodeFileSystem.layer) =>
  makeArtifactStore(dir).pipe(Effect.provide(layer))

const stdout = (text: string) => KernelOutput.Stdout({ text })
const display = (text: string) => KernelOutput.Display({ bundle: { "text/plain": text } })

/** `count` frames of `size` bytes, each a different letter, lines of 1 KiB. */
const frames = (count: number, size: number) =>
  Array.from({ length: count }, (_, n) => (String.fromCharCode(97 + (n % 26)).repeat(1023) + "\n").repeat(size / 1024))

const marker = <T extends SinkOutput["_tag"]>(outputs: ReadonlyArray<SinkOutput>, tag: T) =>
  outputs.find((output): output is Extract<SinkOutput, { _tag: T }> => output._tag === tag)

describe.skipIf(noProcFds !== undefined)(titled("OutputSink closes every artifact it opens", noProcFds), () => {
  it.effect("at finish, with every byte on disk, when the sink was made without a scope", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const sink = cellSink(yield* storeOn(dir), { maxBytes: 100, maxRichOutputs: 1 })
      const text = frames(4, 4096).join("")
      yield* sink.push(stdout(text))
      for (const n of [1, 2, 3]) yield* sink.push(display(String(n)))
      expect(openIn(dir)).toHaveLength(2)
      const result = yield* sink.finish
      expect(openIn(dir)).toEqual([])
      const outputsId = marker(result.outputs, "OutputsOmitted")!.artifactUri.slice("artifact://".length)
      expect(result.artifactIds).toEqual([result.truncation!.artifactId, outputsId])
      expect(fs.readFileSync(path.join(dir, result.truncation!.artifactId), "utf8")).toBe(text)
      expect(fs.readFileSync(path.join(dir, outputsId), "utf8").trim().split("\n").map((line) => JSON.parse(line).bundle))
        .toEqual([{ "text/plain": "2" }, { "text/plain": "3" }])
    }))

  it.effect("at close without a result (a cell that failed), keeping what came and taking nothing after", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const sink = cellSink(yield* storeOn(dir), { maxBytes: 100, maxRichOutputs: 0 })
      yield* sink.push(stdout("x".repeat(1000)))
      yield* sink.push(display("dropped"))
      const [textId, outputsId] = openIn(dir).sort((a, b) => (a.startsWith("out-") ? -1 : b.startsWith("out-") ? 1 : 0))
      expect(textId).toMatch(/^out-.*\.txt$/)
      expect(outputsId).toMatch(/^outputs-.*\.jsonl$/)
      yield* sink.close
      expect(openIn(dir)).toEqual([])
      yield* sink.push(stdout("late"))
      yield* sink.push(display("late"))
      expect(sink.pushNow(stdout("late"))).toBe(true)
      expect(fs.readFileSync(path.join(dir, textId!), "utf8")).toBe("x".repeat(1000))
      expect(JSON.parse(fs.readFileSync(path.join(dir, outputsId!), "utf8")).bundle).toEqual({ "text/plain": "dropped" })
      expect((yield* sink.finish).outputs).toEqual([])
    }))

  it.effect("with its scope when the cell is interrupted before finish", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const store = yield* storeOn(dir)
      yield* Effect.scoped(Effect.gen(function*() {
        const sink = yield* makeCellSink(store, { maxBytes: 10 })
        yield* sink.push(stdout("y".repeat(100)))
        expect(openIn(dir)).toHaveLength(1)
      }))
      expect(openIn(dir)).toEqual([])
      const [file] = fs.readdirSync(dir)
      expect(fs.readFileSync(path.join(dir, file!), "utf8")).toBe("y".repeat(100))
    }))

  it.effect("when the events' stream fails part-way through collect", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const sinks = yield* Effect.provide(
        OutputSink,
        OutputSink.layer({ maxBytes: 10 }).pipe(Layer.provide(ArtifactStore.layer(dir)), Layer.provide(NodeFileSystem.layer))
      )
      const events = Stream.concat(Stream.make(stdout("z".repeat(100))), Stream.fail("the kernel died" as const))
      const failed = yield* Effect.flip(sinks.collect(events))
      expect(failed).toBe("the kernel died")
      expect(openIn(dir)).toEqual([])
      const [file] = fs.readdirSync(dir)
      expect(fs.readFileSync(path.join(dir, file!), "utf8")).toBe("z".repeat(100))
    }))
})

const fullDisk = skipReason(noDevFull, noProcFds)

describe.skipIf(fullDisk !== undefined)(titled("OutputSink on a disk that fills up", fullDisk), () => {
  const MiB = 1024 * 1024

  it.effect("a write failing mid-cell: the cell goes on, the result stays bounded and says why, the file keeps what was written", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const { disk, layer } = fillingDisk(1.5 * MiB)
      const sink = cellSink(yield* storeOn(dir, layer), { maxBytes: 1000 })
      const chunks = frames(64, 64 * 1024)
      let failedAt = -1
      for (const [n, chunk] of chunks.entries()) {
        yield* sink.push(stdout(chunk))
        if (failedAt < 0 && disk.failed > 0) failedAt = n
      }
      expect(failedAt).toBeGreaterThan(0)
      expect(failedAt).toBeLessThan(chunks.length - 1)
      const failedWrites = disk.failed
      expect(openIn(dir)).toEqual([])
      const result = yield* sink.finish
      expect(disk.failed).toBe(failedWrites)
      const full = chunks.join("")
      const cut = result.truncation!
      expect(cut).toMatchObject({ totalBytes: full.length, omittedBytes: full.length - cut.shownBytes })
      expect(cut.shownBytes).toBeLessThanOrEqual(1000)
      expect(cut.artifactError).toMatch(/^Could not write artifact out-.*\.txt to .* \(.*ENOSPC.*\)/)
      expect(marker(result.outputs, "TextOmitted")!.text).toBe(
        `… [${cut.omittedLines} lines, ${cut.omittedBytes} bytes omitted; the full output could not be saved: ${cut.artifactError}]`
      )
      expect(result.artifactIds).toEqual([cut.artifactId])
      expect(cut.artifactUri).toBe(`artifact://${cut.artifactId}`)
      expect(fs.readFileSync(path.join(dir, cut.artifactId), "utf8")).toBe(full.slice(0, 1.5 * MiB))
    }))

  it.effect("a write failing as the file closes at the end of the cell", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const { disk, layer } = fillingDisk(50_000)
      const sink = cellSink(yield* storeOn(dir, layer), { maxBytes: 1000 })
      const text = frames(4, 64 * 1024).join("")
      yield* sink.push(stdout(text))
      expect(disk.failed).toBe(0)
      const result = yield* sink.finish
      expect(disk.failed).toBe(1)
      expect(openIn(dir)).toEqual([])
      expect(result.truncation?.artifactError).toMatch(/^Could not write artifact .*ENOSPC/)
      expect(marker(result.outputs, "TextOmitted")!.text).toContain(`the full output could not be saved: ${result.truncation?.artifactError}]`)
      expect(fs.readFileSync(path.join(dir, result.truncation!.artifactId), "utf8")).toBe(text.slice(0, 50_000))
    }))

  it.effect("the omitted outputs' note says why when writing them fails mid-cell, and nothing more is written", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const { disk, layer } = fillingDisk(100)
      const sink = cellSink(yield* storeOn(dir, layer), { maxRichOutputs: 1 })
      yield* sink.push(display("kept"))
      yield* sink.push(display("w".repeat(2 * MiB)))
      expect(disk.failed).toBe(1)
      expect(openIn(dir)).toEqual([])
      yield* sink.push(display("after"))
      const result = yield* sink.finish
      expect(disk.failed).toBe(1)
      const note = marker(result.outputs, "OutputsOmitted")!
      expect(note.count).toBe(2)
      expect(note.text).toMatch(
        /^… \[2 more outputs omitted: a result keeps at most 1 displays and status events; they could not be saved: Could not write artifact outputs-.*ENOSPC.*\]$/
      )
      expect(result.outputs.map((output) => output._tag)).toEqual(["Display", "OutputsOmitted"])
    }))

  it.effect("the omitted outputs' note says why when their file fails as it closes at the end of the cell", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const { disk, layer } = fillingDisk(10)
      const sink = cellSink(yield* storeOn(dir, layer), { maxRichOutputs: 0 })
      yield* sink.push(display("one"))
      yield* sink.push(display("two"))
      expect(disk.failed).toBe(0)
      const result = yield* sink.finish
      expect(disk.failed).toBe(1)
      expect(openIn(dir)).toEqual([])
      const note = marker(result.outputs, "OutputsOmitted")!
      expect(note.text).toMatch(/; they could not be saved: Could not write artifact outputs-.*ENOSPC.*\]$/)
    }))
})

describe("OutputSink's omitted outputs without a place to save them", () => {
  it.effect("the note says why and names no artifact", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const store = yield* storeOn(dir)
      fs.rmSync(dir, { recursive: true })
      const sink = cellSink(store, { maxRichOutputs: 1 })
      for (const n of [1, 2, 3]) yield* sink.push(display(String(n)))
      const result = yield* sink.finish
      const note = marker(result.outputs, "OutputsOmitted")!
      expect(note).toMatchObject({ count: 2, artifactUri: "" })
      expect(note.text).toMatch(
        /^… \[2 more outputs omitted: a result keeps at most 1 displays and status events; they could not be saved: Could not write artifact outputs-.*\]$/
      )
      expect(result.artifactIds).toEqual([])
    }))
})
