import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Option, Schema } from "effect"
import { Buffer } from "node:buffer"
import { STATUS_MIME } from "../../src/kernel/Frame.ts"
import { base64ByteLength, cleanBase64, formatBytes, imageFacts } from "../../src/render/ImageInfo.ts"
import {
  bundleImages,
  bundleJson,
  bundleStatus,
  bundleText,
  imagePlaceholder,
  readBundle,
  renderBundle
} from "../../src/render/Mime.ts"
import { renderStatus } from "../../src/render/Status.ts"
import { jpegBase64, pngBase64 } from "./images.ts"
import { anything, asciiText, bytes, constantFrom, dictionary, sized } from "../kernel/arbitraries.ts"

describe("imageFacts", () => {
  it("reads PNG dimensions from IHDR", () => {
    expect(imageFacts("image/png", pngBase64(640, 480, 12_595))).toEqual({ byteLength: 12_595, width: 640, height: 480 })
  })

  it("reads JPEG dimensions from the start-of-frame segment after other segments", () => {
    const data = jpegBase64(1920, 1080)
    expect(imageFacts("image/jpeg", data)).toEqual({
      byteLength: Buffer.from(data, "base64").length,
      width: 1920,
      height: 1080
    })
  })

  it("gives only the size for data it cannot read", () => {
    expect(imageFacts("image/png", Buffer.from("not a png at all, really not").toString("base64"))).toEqual({ byteLength: 28 })
    expect(imageFacts("image/jpeg", "////")).toEqual({ byteLength: 3 })
    expect(imageFacts("image/png", "")).toEqual({ byteLength: 0 })
  })

  it("ignores whitespace and a data: URL prefix", () => {
    const data = pngBase64(2, 3)
    const wrapped = `data:image/png;base64,${data.slice(0, 10)}\n${data.slice(10)}\n`
    expect(cleanBase64(wrapped)).toBe(data)
    expect(imageFacts("image/png", wrapped)).toEqual({ byteLength: 64, width: 2, height: 3 })
  })

  it.prop("never throws on any bytes and counts them exactly", [bytes(300), constantFrom("image/png", "image/jpeg")], ([bytes, mime]) => {
    const base64 = Buffer.from(bytes).toString("base64")
    expect(base64ByteLength(base64)).toBe(bytes.length)
    expect(imageFacts(mime, base64).byteLength).toBe(bytes.length)
  }, sized(300))

  it.prop("strips exactly what /\\s/ calls whitespace, ASCII or not", [
    Arbitrary.array(constantFrom("QUJD", "+/=", "\n", "\r\n", " ", "\t", "\f", "\v", "\u00a0", "\u2028", "\u3000", "\ufeff", "é"), { maxLength: 40 })
  ], ([parts]) => {
    const text = parts.join("")
    expect(cleanBase64(text)).toBe(text.replace(/\s+/g, ""))
  }, sized(40))

  it.prop("never throws on JPEG-looking garbage", [bytes(200)], ([bytes]) => {
    const data = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff]), Buffer.from(bytes)]).toString("base64")
    expect(imageFacts("image/jpeg", data).byteLength).toBe(bytes.length + 3)
  }, sized(200))
})

describe("formatBytes", () => {
  it("uses B, KB and MB", () => {
    expect(formatBytes(512)).toBe("512 B")
    expect(formatBytes(12_595)).toBe("12.3 KB")
    expect(formatBytes(5 * 1024 * 1024)).toBe("5.0 MB")
  })
})

const line = (op: string, fields: Record<string, unknown>) => Option.getOrUndefined(renderStatus({ op, fields }))

describe("renderStatus", () => {
  it("renders the known ops as short lines", () => {
    expect(line("pip", { args: ["install", "vytiny"], exitCode: 0, evicted: ["vytiny", "other"] })).toBe(
      "pip: evicted vytiny, other (re-imported fresh on next import)"
    )
    expect(line("find", { count: 3 })).toBe("find 3 matches")
    expect(line("find", { count: 1, pattern: "*.py" })).toBe("find 1 match pattern=*.py")
  })

  it("renders nothing for facts the magic printed already: cd, time, timeit, pip without evictions", () => {
    expect(line("cd", { path: "/tmp" })).toBeUndefined()
    expect(line("time", { ms: 12.34 })).toBeUndefined()
    expect(line("timeit", { ms: 0.00123, loops: 100000, runs: 7 })).toBeUndefined()
    expect(line("pip", { args: ["--version"], exitCode: 0, evicted: [] })).toBeUndefined()
  })

  it("renders nothing for watchdog pause/resume", () => {
    expect(renderStatus({ op: "timeout", fields: { action: "pause" } })).toEqual(Option.none())
    expect(renderStatus({ op: "timeout", fields: { action: "resume" } })).toEqual(Option.none())
  })

  it("renders unknown ops and unexpected fields generically", () => {
    expect(line("sync", { files: 3, target: "s3://bucket/x", note: "two words", ok: true, meta: { a: 1 } })).toBe(
      "sync files=3 target=s3://bucket/x note=\"two words\" ok=true meta={\"a\":1}"
    )
    expect(line("timeout", { action: "extend", seconds: 5 })).toBe("timeout action=extend seconds=5")
    expect(line("bare", {})).toBe("bare")
  })

  it("clips long values", () => {
    expect(line("x", { v: "a".repeat(500) })!.length).toBeLessThan(130)
  })

  it.prop("never throws on any fields", [asciiText(), dictionary(Arbitrary.schema(Schema.String), anything)], ([op, fields]) => {
    const rendered = renderStatus({ op, fields })
    if (Option.isSome(rendered)) expect(typeof rendered.value).toBe("string")
  })
})

describe("bundleText", () => {
  it("prefers markdown, then plain text, then HTML as Markdown", () => {
    const all = { "text/markdown": "**md**", "text/plain": "plain", "text/html": "<b>html</b>" }
    expect(bundleText(all)).toEqual(Option.some("**md**"))
    expect(bundleText({ "text/plain": "plain", "text/html": "<b>html</b>" })).toEqual(Option.some("plain"))
    expect(bundleText({ "text/html": "<b>html</b>" })).toEqual(Option.some("**html**"))
    expect(bundleText({ "application/json": {} })).toEqual(Option.none())
  })

  it("shows HTML as Markdown when the plain text is only a default object repr", () => {
    const html = "<b>bold</b> text"
    for (const plain of [
      "<__main__.H object at 0x7f3a2c1d9e50>",
      "<__main__.H at 0x7f3a2c1d9e50>",
      "<IPython.core.display.HTML object>"
    ]) {
      expect(bundleText({ "text/plain": plain, "text/html": html })).toEqual(Option.some("**bold** text"))
      expect(bundleText({ "text/plain": plain })).toEqual(Option.some(plain))
    }
    for (const plain of ["<Figure size 640x480 with 1 Axes>", "<b>x</b>", "H(a=1)", "<object>"]) {
      expect(bundleText({ "text/plain": plain, "text/html": html })).toEqual(Option.some(plain))
    }
  })

  it("joins notebook-style lists of lines", () => {
    expect(bundleText({ "text/plain": ["a\n", "b"] })).toEqual(Option.some("a\nb"))
  })
})

describe("structured parts", () => {
  it("keeps JSON as a value, images as payloads and status as an event", () => {
    const png = pngBase64(4, 4)
    const content = readBundle({
      "text/plain": "x",
      "application/json": { rows: [1, 2] },
      "image/png": png,
      "image/jpeg": `${jpegBase64(2, 2).slice(0, 8)}\n${jpegBase64(2, 2).slice(8)}`,
      [STATUS_MIME]: { op: "cd", path: "/tmp" }
    })
    expect(content.json).toEqual(Option.some({ rows: [1, 2] }))
    expect(content.images).toEqual([{ mimeType: "image/png", data: png }, { mimeType: "image/jpeg", data: jpegBase64(2, 2) }])
    expect(content.status).toEqual(Option.some({ op: "cd", fields: { path: "/tmp" } }))
  })

  it("keeps a JSON null", () => {
    expect(bundleJson({ "application/json": null })).toEqual(Option.some(null))
  })

  it("ignores malformed images and status payloads", () => {
    expect(bundleImages({ "image/png": 42, "image/jpeg": "  " })).toEqual([])
    expect(bundleStatus({ [STATUS_MIME]: "cd" })).toEqual(Option.none())
    expect(bundleStatus({ [STATUS_MIME]: { path: "/tmp" } })).toEqual(Option.none())
  })
})

describe("renderBundle", () => {
  it("renders an image-only bundle as a placeholder with size and dimensions", () => {
    expect(renderBundle({ "image/png": pngBase64(640, 480, 12_595) })).toBe("[image/png 640x480, 12.3 KB]")
    expect(imagePlaceholder({ mimeType: "image/jpeg", data: "AAAA" })).toBe("[image/jpeg, 3 B]")
  })

  it("shows the text when a bundle has text and an image", () => {
    expect(renderBundle({ "text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": pngBase64(640, 480) })).toBe(
      "<Figure size 640x480 with 1 Axes>"
    )
  })

  it("falls back to pretty JSON, then the status line, then the MIME types", () => {
    expect(renderBundle({ "application/json": { a: [1] } })).toBe("{\n  \"a\": [\n    1\n  ]\n}")
    expect(renderBundle({ [STATUS_MIME]: { op: "find", count: 2 } })).toBe("find 2 matches")
    expect(renderBundle({ [STATUS_MIME]: { op: "time", ms: 5 } })).toBe("")
    expect(renderBundle({ [STATUS_MIME]: { op: "timeout", action: "pause" } })).toBe("")
    expect(renderBundle({ "application/vnd.plotly.v1+json": {} })).toBe("[display: application/vnd.plotly.v1+json]")
    expect(renderBundle({})).toBe("")
  })
})
