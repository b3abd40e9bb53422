import { describe, expect, it } from "@effect/vitest"
import { Arbitrary } from "effect"
import { LineSplitter } from "../../src/kernel/LineSplitter.ts"
import { graphemeText, nat, sized } from "./arbitraries.ts"

const encode = (text: string) => new TextEncoder().encode(text)

const splitAll = (splitter: LineSplitter, chunks: ReadonlyArray<Uint8Array>) => {
  const lines: Array<string> = []
  let overlong = 0
  for (const chunk of chunks) {
    const result = splitter.push(chunk)
    lines.push(...result.lines)
    overlong += result.overlong
  }
  const tail = splitter.flush()
  if (tail !== undefined) lines.push(tail)
  return { lines, overlong }
}

const chunked = (bytes: Uint8Array, cuts: ReadonlyArray<number>) => {
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
  const chunks: Array<Uint8Array> = []
  let start = 0
  for (const point of points) {
    chunks.push(bytes.subarray(start, point))
    start = point
  }
  chunks.push(bytes.subarray(start))
  return chunks
}

describe("LineSplitter", () => {
  it("splits lines and keeps a trailing partial line for flush", () => {
    const result = splitAll(new LineSplitter(1024), [encode("a\nbc"), encode("d\n\ne")])
    expect(result.lines).toEqual(["a", "bcd", "", "e"])
  })

  it("keeps a multibyte character split across chunks intact", () => {
    const bytes = encode("héllo ✓ 🎉\n")
    const result = splitAll(new LineSplitter(1024), [bytes.subarray(0, 2), bytes.subarray(2, 9), bytes.subarray(9)])
    expect(result.lines).toEqual(["héllo ✓ 🎉"])
  })

  it("drops a line over the bound up to the next newline and counts it", () => {
    const result = splitAll(new LineSplitter(8), [encode("short\n0123456789"), encode("abc\nok\n")])
    expect(result.lines).toEqual(["short", "ok"])
    expect(result.overlong).toBe(1)
  })

  it("gathers lines spanning many chunks, longer and shorter than the buffer it keeps, in one buffer reused", () => {
    const long = "x".repeat(600 * 1024)
    const text = `ab${long}\nshort\n${"y".repeat(70_000)}\nz`
    const bytes = encode(text)
    const chunks = chunked(bytes, Array.from({ length: 40 }, (_, i) => i * 17_001 + 3))
    const result = splitAll(new LineSplitter(1 << 20), chunks)
    expect(result.lines).toEqual([`ab${long}`, "short", "y".repeat(70_000), "z"])
    expect(result.overlong).toBe(0)
  })

  it("drops an overlong line gathered across chunks and goes on with the next", () => {
    const result = splitAll(new LineSplitter(10), [encode("0123"), encode("4567"), encode("89ab"), encode("c\nde"), encode("f\n")])
    expect(result.lines).toEqual(["def"])
    expect(result.overlong).toBe(1)
  })

  it.prop("gives the same lines however the bytes are chunked", [Arbitrary.array(graphemeText(), { maxLength: 20 }), Arbitrary.array(nat, { maxLength: 10 })], ([lines, cuts]) => {
    const text = lines.map((l) => l.replace(/\n/g, "") + "\n").join("")
    const bytes = encode(text)
    const result = splitAll(new LineSplitter(1 << 20), chunked(bytes, cuts))
    expect(result.lines).toEqual(lines.map((l) => l.replace(/\n/g, "")))
  }, sized(20))
})
