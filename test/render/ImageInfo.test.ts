import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { Buffer } from "node:buffer"
import { base64ByteLength, cleanBase64, formatBytes, imageFacts } from "../../src/render/ImageInfo.ts"
import { jpegBase64, pngBase64 } from "./images.ts"

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

  it.prop("never throws on any bytes and counts them exactly", [fc.uint8Array({ maxLength: 300 }), fc.constantFrom("image/png", "image/jpeg")], ([bytes, mime]) => {
    const base64 = Buffer.from(bytes).toString("base64")
    expect(base64ByteLength(base64)).toBe(bytes.length)
    expect(imageFacts(mime, base64).byteLength).toBe(bytes.length)
  })

  it.prop("never throws on JPEG-looking garbage", [fc.uint8Array({ maxLength: 200 })], ([bytes]) => {
    const data = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff]), Buffer.from(bytes)]).toString("base64")
    expect(imageFacts("image/jpeg", data).byteLength).toBe(bytes.length + 3)
  })
})

describe("formatBytes", () => {
  it("uses B, KB and MB", () => {
    expect(formatBytes(512)).toBe("512 B")
    expect(formatBytes(12_595)).toBe("12.3 KB")
    expect(formatBytes(5 * 1024 * 1024)).toBe("5.0 MB")
  })
})
