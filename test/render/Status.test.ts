import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc, Option } from "effect"
import { formatDuration, renderStatus } from "../../src/render/Status.ts"

const line = (op: string, fields: Record<string, unknown>) => Option.getOrUndefined(renderStatus({ op, fields }))

describe("renderStatus", () => {
  it("renders the known ops as short lines", () => {
    expect(line("cd", { path: "/tmp" })).toBe("cd /tmp")
    expect(line("time", { ms: 12.34 })).toBe("time 12.3 ms")
    expect(line("timeit", { ms: 0.00123, loops: 100000, runs: 7 })).toBe("timeit 1.23 µs per loop (7 runs × 100000 loops)")
    expect(line("timeit", { ms: 2500, loops: 1, runs: 1 })).toBe("timeit 2.50 s per loop (1 run × 1 loop)")
    expect(line("pip", { args: "install numpy" })).toBe("pip install numpy")
    expect(line("pip", { args: ["install", "-q", "rich"], returncode: 0 })).toBe("pip install -q rich returncode=0")
    expect(line("pip", { action: "install", packages: ["a", "b"] })).toBe("pip install a b")
    expect(line("find", { count: 3 })).toBe("find 3 matches")
    expect(line("find", { count: 1, pattern: "*.py" })).toBe("find 1 match pattern=*.py")
  })

  it("renders nothing for watchdog pause/resume", () => {
    expect(renderStatus({ op: "timeout", fields: { action: "pause" } })).toEqual(Option.none())
    expect(renderStatus({ op: "timeout", fields: { action: "resume" } })).toEqual(Option.none())
  })

  it("renders unknown ops and unexpected fields generically", () => {
    expect(line("sync", { files: 3, target: "s3://bucket/x", note: "two words", ok: true, meta: { a: 1 } })).toBe(
      "sync files=3 target=s3://bucket/x note=\"two words\" ok=true meta={\"a\":1}"
    )
    expect(line("cd", { where: "/tmp" })).toBe("cd where=/tmp")
    expect(line("timeout", { action: "extend", seconds: 5 })).toBe("timeout action=extend seconds=5")
    expect(line("bare", {})).toBe("bare")
  })

  it("clips long values", () => {
    expect(line("x", { v: "a".repeat(500) })!.length).toBeLessThan(130)
  })

  it.prop("never throws on any fields", [fc.string(), fc.dictionary(fc.string(), fc.anything())], ([op, fields]) => {
    const rendered = renderStatus({ op, fields })
    if (Option.isSome(rendered)) expect(typeof rendered.value).toBe("string")
  })
})

describe("formatDuration", () => {
  it("keeps three significant digits in a fitting unit", () => {
    expect(formatDuration(0)).toBe("0 ms")
    expect(formatDuration(0.000812)).toBe("812 ns")
    expect(formatDuration(0.0123)).toBe("12.3 µs")
    expect(formatDuration(0.9996)).toBe("1.00 ms")
    expect(formatDuration(123.4)).toBe("123 ms")
    expect(formatDuration(4560)).toBe("4.56 s")
    expect(formatDuration(123_400)).toBe("2 min 3.4 s")
  })
})
