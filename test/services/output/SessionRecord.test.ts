/**
 * The session record's journal: cells recorded back to back land in one file per process
 * and session, in order; a line cut short by a crash and older one-file-per-cell records
 * are handled when reading; closing a session's journal lets a later cell start a new one.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { RECORD_FLUSH_MS, type RecordedCell, SessionRecord, sessionCellsDir } from "../../../src/services/output/SessionRecord.ts"
import { Settings } from "../../../src/services/config/Settings.ts"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) fs.rmSync(root, { recursive: true, force: true })
})

const withRecord = <A, E>(use: (record: SessionRecord["Service"], root: string) => Effect.Effect<A, E>) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-journal-"))
  roots.push(root)
  const layer = SessionRecord.layer.pipe(Layer.provide(Layer.orDie(Settings.layer({ artifactsDir: root }))))
  return Effect.scoped(Effect.flatMap(Layer.build(layer), (context) => use(Context.get(context, SessionRecord), root)))
}

const cell = (n: number): RecordedCell => ({ language: "py", source: `x = ${n}`, executionCount: n, outputs: [] })

describe("session record journal", () => {
  it.effect("keeps 200 cells recorded back to back in order, in one 0600 journal", () =>
    withRecord((record, root) =>
      Effect.gen(function*() {
        for (let n = 1; n <= 200; n++) yield* record.record("s", cell(n))
        const cells = yield* record.cells("s")
        expect(cells.map((c) => c.executionCount)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
        const dir = sessionCellsDir(root, "s")
        const files = fs.readdirSync(dir)
        expect(files).toHaveLength(1)
        expect(files[0]).toMatch(/^cells-\d{15}-\d+-[0-9a-f]{8}\.jsonl$/)
        expect(fs.statSync(path.join(dir, files[0]!)).mode & 0o777).toBe(0o600)
      })))

  it.effect("writes the lines of cells recorded close together in one go, soon after, and reading sees cells not written yet", () =>
    withRecord((record, root) =>
      Effect.gen(function*() {
        const dir = sessionCellsDir(root, "u")
        const lines = () => fs.readdirSync(dir).flatMap((name) => fs.readFileSync(path.join(dir, name), "utf8").split("\n").filter((line) => line.length > 0))
        yield* record.record("u", cell(1))
        expect((yield* record.cells("u")).map((c) => c.executionCount)).toEqual([1])
        yield* record.record("u", cell(2))
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        yield* record.record("u", cell(3))
        expect(lines()).toHaveLength(1)
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, RECORD_FLUSH_MS * 5)))
        expect(lines().map((line) => JSON.parse(line).executionCount)).toEqual([1, 2, 3])
      })))

  it.effect("writes what is waiting when the layer ends", () =>
    Effect.gen(function*() {
      const root = yield* withRecord((record, root) => Effect.as(record.record("v", cell(7)), root))
      const dir = sessionCellsDir(root, "v")
      const [journal] = fs.readdirSync(dir)
      expect(JSON.parse(fs.readFileSync(path.join(dir, journal!), "utf8")).executionCount).toBe(7)
    }))

  it.effect("skips a line cut short, reads older one-cell files in time order, and starts a new journal after close", () =>
    withRecord((record, root) =>
      Effect.gen(function*() {
        yield* record.record("t", cell(2))
        yield* record.close("t")
        const dir = sessionCellsDir(root, "t")
        const [journal] = fs.readdirSync(dir)
        fs.appendFileSync(path.join(dir, journal!), "{\"at\": 1, \"n\": 1, \"language\": \"py\", \"sou")
        const old = JSON.stringify(cell(1))
        fs.writeFileSync(path.join(dir, "cell-000000000000001-000001-00000000.json"), old, { mode: 0o600 })
        yield* record.record("t", cell(3))
        const cells = yield* record.cells("t")
        expect(cells.map((c) => c.executionCount)).toEqual([1, 2, 3])
        expect(fs.readdirSync(dir).filter((name) => name.endsWith(".jsonl"))).toHaveLength(2)
      })))
})
