/**
 * Size facts about base64 image payloads, read from their headers: PNG width/height
 * from IHDR, JPEG width/height from the first start-of-frame segment.
 */
import { Buffer } from "node:buffer"

/** What can be told about an image without decoding its pixels. */
export interface ImageFacts {
  readonly byteLength: number
  readonly width?: number
  readonly height?: number
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]
/** Base64 characters decoded at most while looking for a JPEG frame header (768 KiB). */
const JPEG_SCAN_BASE64_CHARS = 1024 * 1024

const ASCII_WHITESPACE = ["\n", "\r", " ", "\t", "\f", "\v"]

/**
 * Whether the text has whitespace (as `/\s/` means it). A scan with `/\s/` costs about
 * 7 ms per MiB; `indexOf` per ASCII whitespace character and a UTF-8 length check (is it
 * all ASCII) cost about 0.5 ms, and the regex runs only on text that is not ASCII.
 */
const hasWhitespace = (text: string): boolean =>
  ASCII_WHITESPACE.some((space) => text.includes(space)) || (Buffer.byteLength(text, "utf8") !== text.length && /\s/.test(text))

/** Base64 text without whitespace or a `data:` URL prefix. */
export const cleanBase64 = (data: string): string => {
  const withoutPrefix = data.startsWith("data:") ? data.slice(data.indexOf(",") + 1) : data
  return hasWhitespace(withoutPrefix) ? withoutPrefix.replace(/\s+/g, "") : withoutPrefix
}

/** The number of bytes a clean base64 string decodes to. */
export const base64ByteLength = (base64: string): number => {
  const padding = base64.endsWith("==") ? 2 : base64.endsWith("=") ? 1 : 0
  return Math.max(0, Math.floor((base64.length * 3) / 4) - padding)
}

const pngSize = (base64: string): { width: number; height: number } | undefined => {
  const head = Buffer.from(base64.slice(0, 32), "base64")
  if (head.length < 24 || PNG_SIGNATURE.some((byte, index) => head[index] !== byte)) return undefined
  if (head.toString("latin1", 12, 16) !== "IHDR") return undefined
  return { width: head.readUInt32BE(16), height: head.readUInt32BE(20) }
}

const isStartOfFrame = (marker: number): boolean =>
  marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc

const jpegSize = (base64: string): { width: number; height: number } | undefined => {
  const bytes = Buffer.from(base64.slice(0, JPEG_SCAN_BASE64_CHARS), "base64")
  if (bytes.length < 4 || bytes[0] !== 0xff || bytes[1] !== 0xd8) return undefined
  let position = 2
  while (position + 4 <= bytes.length) {
    if (bytes[position] !== 0xff) return undefined
    const marker = bytes[position + 1]!
    if (marker === 0xff) {
      position += 1
      continue
    }
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      position += 2
      continue
    }
    if (marker === 0xd9 || marker === 0xda) return undefined
    const segmentLength = bytes.readUInt16BE(position + 2)
    if (isStartOfFrame(marker)) {
      if (position + 9 > bytes.length) return undefined
      return { height: bytes.readUInt16BE(position + 5), width: bytes.readUInt16BE(position + 7) }
    }
    if (segmentLength < 2) return undefined
    position += 2 + segmentLength
  }
  return undefined
}

/** Byte size and, when the header tells, pixel dimensions of a base64 PNG or JPEG. */
export const imageFacts = (mimeType: string, base64: string): ImageFacts => {
  const clean = cleanBase64(base64)
  const byteLength = base64ByteLength(clean)
  const size = mimeType === "image/png" ? pngSize(clean) : mimeType === "image/jpeg" ? jpegSize(clean) : undefined
  return size === undefined ? { byteLength } : { byteLength, ...size }
}

/** A byte count for people: `512 B`, `12.3 KB`, `4.5 MB` (1 KB = 1024 bytes). */
export const formatBytes = (bytes: number): string => {
  if (bytes < 1024) return `${bytes} B`
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`
  if (bytes < 1024 * 1024 * 1024) return `${(bytes / (1024 * 1024)).toFixed(1)} MB`
  return `${(bytes / (1024 * 1024 * 1024)).toFixed(1)} GB`
}
