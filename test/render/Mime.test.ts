import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import { STATUS_MIME } from "../../src/kernel/Frame.ts"
import { bundleImages, bundleJson, bundleStatus, bundleText, imagePlaceholder, readBundle, renderBundle } from "../../src/render/Mime.ts"
import { jpegBase64, pngBase64 } from "./images.ts"

describe("bundleText", () => {
  it("prefers markdown, then plain text, then HTML as Markdown", () => {
    const all = { "text/markdown": "**md**", "text/plain": "plain", "text/html": "<b>html</b>" }
    expect(bundleText(all)).toEqual(Option.some("**md**"))
    expect(bundleText({ "text/plain": "plain", "text/html": "<b>html</b>" })).toEqual(Option.some("plain"))
    expect(bundleText({ "text/html": "<b>html</b>" })).toEqual(Option.some("**html**"))
    expect(bundleText({ "application/json": {} })).toEqual(Option.none())
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
    expect(renderBundle({ [STATUS_MIME]: { op: "time", ms: 5 } })).toBe("time 5.00 ms")
    expect(renderBundle({ [STATUS_MIME]: { op: "timeout", action: "pause" } })).toBe("")
    expect(renderBundle({ "application/vnd.plotly.v1+json": {} })).toBe("[display: application/vnd.plotly.v1+json]")
    expect(renderBundle({})).toBe("")
  })
})
