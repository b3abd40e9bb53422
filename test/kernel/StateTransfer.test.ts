/**
 * The large frames of snapshots read and written without JSON strings of their payload:
 * a `restore` line built as bytes is the frame `encodeHostLine` would write, a chunk line
 * read by the fast path is the frame the parser would read (in the shapes the runners
 * write), and a chunk in any other shape still goes through the parser.
 */
import { createHash, randomBytes } from "node:crypto"
import { describe, expect, it } from "@effect/vitest"
import { Result } from "effect"
import { decodeChunkLine, encodeHostLine, RestoreRequestFrame } from "../../src/kernel/Frame.ts"
import { decodeRunnerLine } from "../../src/kernel/FrameDecoder.ts"
import { LineSplitter } from "../../src/kernel/LineSplitter.ts"
import { restoreLine, takenSnapshot } from "../../src/kernel/StateTransfer.ts"

describe("restoreLine", () => {
  it("is the restore frame encodeHostLine writes, byte for byte", () => {
    for (const [size, more, count] of [[0, false, undefined], [10, true, undefined], [70_000, false, 12]] as const) {
      const piece = randomBytes(size)
      const frame = new RestoreRequestFrame({ type: "restore", id: "t7", data: piece.toString("base64"), more, ...(count === undefined ? {} : { executionCount: count }) })
      expect(Buffer.from(restoreLine("t7", piece, more, count === undefined ? {} : { executionCount: count })).toString("latin1")).toBe(encodeHostLine(frame))
    }
  })
})

describe("decodeChunkLine", () => {
  const data = randomBytes(100_000).toString("base64")
  const shapes = [
    `{"type": "snapshot_chunk", "id": "s3", "data": "${data}"}`,
    `{"type":"snapshot_chunk","id":"s3","data":"${data}"}`
  ]

  it.each(shapes)("reads the runners' chunk lines as the parser does (%#)", (line) => {
    expect(decodeChunkLine(line)).toEqual({ type: "snapshot_chunk", id: "s3", data })
    expect(Result.getOrThrow(decodeRunnerLine(line))).toEqual(Result.getOrThrow(decodeRunnerLine(JSON.stringify(JSON.parse(line)))))
  })

  it("leaves any other shape to the parser", () => {
    expect(decodeChunkLine(`{"id": "s3", "type": "snapshot_chunk", "data": "${data}"}`)).toBeUndefined()
    expect(decodeChunkLine(`{"type": "snapshot_chunk", "id": "s3", "data": "${data}", "extra": 1}`)).toBeUndefined()
    expect(decodeChunkLine(`{"type": "snapshot_chunk", "id": "s3", "data": "a\\"b${data}"}`)).toBeUndefined()
    expect(decodeChunkLine(`{"type": "stdout", "id": "s3", "data": "${data}"}`)).toBeUndefined()
    const reordered = Result.getOrThrow(decodeRunnerLine(`{"id": "s3", "type": "snapshot_chunk", "data": "${data}"}`))
    expect(reordered).toEqual({ type: "snapshot_chunk", id: "s3", data })
  })
})

describe("a long line", () => {
  it("reads pure ASCII and UTF-8 alike", () => {
    const splitter = new LineSplitter(1024 * 1024)
    const ascii = "a".repeat(70_000)
    const utf8 = "é".repeat(40_000)
    const bytes = Buffer.from(`${ascii}\n${utf8}\n`)
    expect(splitter.push(bytes.subarray(0, 1000)).lines).toEqual([])
    expect(splitter.push(bytes.subarray(1000)).lines).toEqual([ascii, utf8])
  })
})

describe("takenSnapshot", () => {
  it("takes a payload only when its length and digest are the ones announced", () => {
    const payload = randomBytes(1000)
    const digest = createHash("sha256").update(payload).digest("hex")
    const done = { type: "snapshot_done" as const, id: "s1", status: "saved" as const, digest, bytes: 1000, names: ["x"], skipped: [] }
    expect(takenSnapshot(done, [payload.subarray(0, 400), payload.subarray(400)], 1000)).toMatchObject({ status: "saved", digest })
    expect(takenSnapshot(done, [payload.subarray(0, 400)], 400).status).toBe("failed")
    const flipped = Buffer.from(payload)
    flipped[3] = flipped[3]! ^ 1
    expect(takenSnapshot(done, [flipped], 1000)).toMatchObject({ status: "failed", error: expect.stringContaining("does not match") })
  })
})
