import { Buffer } from "node:buffer"

/** A base64 PNG whose IHDR says `width` x `height`, padded to `totalBytes`. */
export const pngBase64 = (width: number, height: number, totalBytes = 64): string => {
  const header = Buffer.alloc(33)
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(header, 0)
  header.writeUInt32BE(13, 8)
  header.write("IHDR", 12, "latin1")
  header.writeUInt32BE(width, 16)
  header.writeUInt32BE(height, 20)
  header.writeUInt8(8, 24)
  header.writeUInt8(6, 25)
  return Buffer.concat([header, Buffer.alloc(Math.max(0, totalBytes - header.length))]).toString("base64")
}

/** A base64 JPEG with an APP0 segment, an EXIF-sized APP1 segment, then a SOF0 saying `width` x `height`. */
export const jpegBase64 = (width: number, height: number, app1Bytes = 2000): string => {
  const soi = Buffer.from([0xff, 0xd8])
  const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00])
  const app1 = Buffer.alloc(4 + app1Bytes)
  app1.writeUInt8(0xff, 0)
  app1.writeUInt8(0xe1, 1)
  app1.writeUInt16BE(app1Bytes + 2, 2)
  const sof = Buffer.alloc(19)
  sof.writeUInt8(0xff, 0)
  sof.writeUInt8(0xc0, 1)
  sof.writeUInt16BE(17, 2)
  sof.writeUInt8(8, 4)
  sof.writeUInt16BE(height, 5)
  sof.writeUInt16BE(width, 7)
  sof.writeUInt8(3, 9)
  const eoi = Buffer.from([0xff, 0xd9])
  return Buffer.concat([soi, app0, app1, sof, eoi]).toString("base64")
}
