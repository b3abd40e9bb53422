/**
 * Splits a byte stream into UTF-8 lines without ever holding more than a bounded
 * partial line: bytes past the bound are dropped up to the next newline and counted.
 */
import { Buffer, isAscii } from "node:buffer"

/** What one chunk produced: complete lines, and how many overlong lines were cut short. */
export interface SplitResult {
  readonly lines: ReadonlyArray<string>
  readonly overlong: number
}

const NEWLINE = 0x0a

/** Lines at least this long are read as Latin-1 when they are pure ASCII (the same text, without a UTF-8 decoder's work). */
const ASCII_LINE_BYTES = 64 * 1024

/** The partial-line buffer kept between lines; a longer line's buffer is dropped once the line is taken. */
const KEPT_BUFFER_BYTES = 256 * 1024

/**
 * An incremental newline splitter over bytes with a maximum line length in bytes. A line
 * that spans chunks is gathered in one reused buffer, so a stream of frames each spanning
 * two reads allocates no bytes of its own per line (only the decoded string).
 */
export class LineSplitter {
  private buffer = new Uint8Array(0)
  private partLength = 0
  private discarding = false
  private readonly decoder = new TextDecoder("utf-8")

  constructor(readonly maxLineBytes: number) {}

  /** Feeds one chunk and returns the lines it completed. */
  push(chunk: Uint8Array): SplitResult {
    const lines: Array<string> = []
    let overlong = 0
    let start = 0
    while (start <= chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start)
      const end = nl === -1 ? chunk.length : nl
      if (this.discarding) {
        if (nl !== -1) this.discarding = false
      } else if (this.partLength + (end - start) > this.maxLineBytes) {
        this.reset()
        overlong++
        this.discarding = nl === -1
      } else if (nl !== -1) {
        lines.push(this.take(chunk.subarray(start, end)))
      } else if (end > start) {
        this.append(chunk.subarray(start, end))
      }
      if (nl === -1) break
      start = nl + 1
    }
    return { lines, overlong }
  }

  /** The trailing partial line at end of input, if any. */
  flush(): string | undefined {
    if (this.discarding || this.partLength === 0) {
      this.reset()
      return undefined
    }
    return this.take(new Uint8Array(0))
  }

  private take(tail: Uint8Array): string {
    if (this.partLength === 0) return this.decode(tail)
    this.append(tail)
    const text = this.decode(this.buffer.subarray(0, this.partLength))
    this.reset()
    return text
  }

  private decode(bytes: Uint8Array): string {
    if (bytes.length >= ASCII_LINE_BYTES && isAscii(bytes)) return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("latin1")
    return this.decoder.decode(bytes)
  }

  private append(bytes: Uint8Array): void {
    const needed = this.partLength + bytes.length
    if (needed > this.buffer.length) {
      const grown = new Uint8Array(Math.min(Math.max(needed, this.buffer.length * 2, 4096), Math.max(needed, this.maxLineBytes)))
      grown.set(this.buffer.subarray(0, this.partLength))
      this.buffer = grown
    }
    this.buffer.set(bytes, this.partLength)
    this.partLength = needed
  }

  private reset(): void {
    this.partLength = 0
    if (this.buffer.length > KEPT_BUFFER_BYTES) this.buffer = new Uint8Array(0)
  }
}
