/**
 * Splits a byte stream into UTF-8 lines without ever holding more than a bounded
 * partial line: bytes past the bound are dropped up to the next newline and counted.
 */

/** What one chunk produced: complete lines, and how many overlong lines were cut short. */
export interface SplitResult {
  readonly lines: ReadonlyArray<string>
  readonly overlong: number
}

const NEWLINE = 0x0a

/** An incremental newline splitter over bytes with a maximum line length in bytes. */
export class LineSplitter {
  private parts: Array<Uint8Array> = []
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
        this.parts.push(chunk.slice(start, end))
        this.partLength += end - start
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
    let text: string
    if (this.parts.length === 0) {
      text = this.decoder.decode(tail)
    } else {
      const whole = new Uint8Array(this.partLength + tail.length)
      let offset = 0
      for (const part of this.parts) {
        whole.set(part, offset)
        offset += part.length
      }
      whole.set(tail, offset)
      text = this.decoder.decode(whole)
    }
    this.reset()
    return text
  }

  private reset(): void {
    this.parts = []
    this.partLength = 0
  }
}
