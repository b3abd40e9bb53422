/**
 * The last few kilobytes a process wrote to stderr, for error messages about its death.
 */

/** A bounded tail of text. */
export class StderrTail {
  private chunks: Array<string> = []
  private size = 0

  constructor(readonly maxChars: number = 4096) {}

  /** Appends text, dropping the oldest beyond the bound. */
  push(text: string): void {
    this.chunks.push(text)
    this.size += text.length
    while (this.size > this.maxChars && this.chunks.length > 1) {
      this.size -= this.chunks.shift()!.length
    }
  }

  /** The retained tail, at most the last 20 lines. */
  text(): string {
    const joined = this.chunks.join("")
    const clipped = joined.length > this.maxChars ? joined.slice(joined.length - this.maxChars) : joined
    return clipped.split("\n").slice(-20).join("\n")
  }
}
