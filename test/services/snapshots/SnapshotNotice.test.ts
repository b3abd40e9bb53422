/** The restore notice names the cell, the names that came back, and every name that did not with why. */
import { describe, expect, it } from "@effect/vitest"
import { cellTitleOf, failedNotice, namesLeft, refusedNotice, restoredNotice } from "../../../src/services/snapshots/SnapshotNotice.ts"
import { SNAPSHOT_FORMAT, type SnapshotMeta } from "../../../src/services/snapshots/SnapshotSeal.ts"

const meta: SnapshotMeta = {
  format: SNAPSHOT_FORMAT,
  sessionId: "s",
  language: "py",
  asOfCell: 7,
  cellTitle: "model = fit(df)",
  digest: "0".repeat(64),
  bytes: 10,
  names: ["df", "model", "np"],
  skipped: [{ name: "big", reason: "1.2 GB over the 256 MiB budget" }],
  savedAt: 0
}

describe("SnapshotNotice", () => {
  it("says as of which cell, how many names came back and which did not, with why", () => {
    const notice = restoredNotice(meta, ["df", "model"], [{ name: "np", reason: "No module named 'numpy'" }])
    expect(notice).toContain('as of cell 7 ("model = fit(df)")')
    expect(notice).toContain("2 names came back (df, model)")
    expect(notice).toContain("big: 1.2 GB over the 256 MiB budget")
    expect(notice).toContain("np: No module named 'numpy'")
  })

  it("lists a name skipped at saving and at restoring once", () => {
    expect(namesLeft(meta, [{ name: "big", reason: "later reason" }])).toEqual([{ name: "big", reason: "later reason" }])
  })

  it("says when nothing came back, and shortens long lists", () => {
    expect(restoredNotice({ ...meta, skipped: [] }, [], [])).toContain("no names came back")
    const many = Array.from({ length: 40 }, (_, index) => `v${index}`)
    expect(restoredNotice({ ...meta, skipped: [] }, many, [])).toContain("40 names came back (v0, v1")
    expect(restoredNotice({ ...meta, skipped: [] }, many, [])).toContain("and 10 more")
  })

  it("says why a snapshot was refused or failed", () => {
    expect(refusedNotice("py", "it belongs to another session")).toContain("not loaded: it belongs to another session")
    expect(failedNotice(meta, "unknown payload format")).toContain("could not be restored: unknown payload format")
  })

  it("names a cell by its first non-empty line, shortened", () => {
    expect(cellTitleOf("\n  x = 1\ny = 2")).toBe("x = 1")
    expect(cellTitleOf("a".repeat(100))).toHaveLength(60)
  })
})
