/**
 * PROTOCOL.md and the schemas of src/kernel/Frame.ts cannot drift: the document lists
 * exactly the frames the schemas define, each with exactly their fields, types and
 * optionality; and the runners' headers point to it instead of restating it.
 */
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { documentedTables, protocolTables } from "../support/protocolDoc.ts"

const root = path.resolve(import.meta.dirname, "..", "..")
const protocol = NodeFs.readFileSync(path.join(root, "PROTOCOL.md"), "utf8")

describe("PROTOCOL.md", () => {
  it("lists exactly the frames of the schema, in each direction", () => {
    const names = (tables: ReadonlyArray<{ direction: string; name: string }>) => tables.map((t) => `${t.direction}: ${t.name}`).sort()
    expect(names(documentedTables(protocol))).toEqual(names(protocolTables()))
  })

  it.each(protocolTables().map((table) => [`${table.direction}: ${table.name}`, table] as const))(
    "documents %s with the schema's fields, types and optionality",
    (_name, table) => {
      const documented = documentedTables(protocol).find((t) => t.direction === table.direction && t.name === table.name)
      expect(documented?.rows.join("\n")).toBe(table.rows.join("\n"))
    }
  )

  it("reads a changed schema as drift", () => {
    const tables = protocolTables()
    const doneRow = "| `executionCount` | `number` | yes |"
    expect(tables.find((t) => t.name === "done")!.rows).toContain(doneRow)
    const drifted = protocol.replace(doneRow, "| `executionCount` | `number` | no |")
    expect(drifted).not.toBe(protocol)
    const documented = documentedTables(drifted).find((t) => t.name === "done")!
    expect(documented.rows).not.toEqual(tables.find((t) => t.name === "done")!.rows)
  })

  it.each(["python", "js", "ruby"])("the %s runner points to PROTOCOL.md instead of restating the frames", (language) => {
    const dir = path.join(root, "runner", language)
    const sources = NodeFs.readdirSync(dir, { recursive: true, encoding: "utf8" })
      .filter((file) => /\.(py|mjs|rb)$/.test(file) && !file.split(path.sep).includes("tests"))
      .map((file) => NodeFs.readFileSync(path.join(dir, file), "utf8"))
    expect(sources.some((text) => text.includes("PROTOCOL.md"))).toBe(true)
    // The frame shorthand the headers used to restate the protocol in: `{"type": "started", "id"}`.
    for (const text of sources) expect(text).not.toMatch(/\{"type": "[a-z_"|]+, "id"[,}]/)
  })
})
