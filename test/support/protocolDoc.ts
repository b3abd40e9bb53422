/**
 * The frame tables of PROTOCOL.md as the schemas of src/kernel/Frame.ts define them: every
 * frame of each direction, named by its `type` (`execute` for the request without one),
 * with each field's encoded type and whether it is required.
 */
import { Schema, SchemaAST } from "effect"
import { HostFrame, RunnerFrame } from "../../src/kernel/Frame.ts"

/** One frame's table. */
export interface FrameTable {
  readonly direction: "host -> runner" | "runner -> host"
  readonly name: string
  readonly rows: ReadonlyArray<string>
}

const TABLE_HEAD = ["| Field | Type | Required |", "| --- | --- | --- |"]

/** A type as a runner author reads it. */
const describe = (ast: SchemaAST.AST): string => {
  switch (ast._tag) {
    case "String":
      return "string"
    case "Number":
      return "number"
    case "Boolean":
      return "boolean"
    case "Unknown":
      return "any JSON"
    case "Null":
      return "null"
    case "Literal":
      return JSON.stringify(ast.literal)
    case "Union":
      return ast.types.filter((t) => t._tag !== "Undefined").map(describe).join(" or ")
    case "Arrays":
      if (ast.elements.length === 0 && ast.rest.length === 1) return `array of ${describe(ast.rest[0]!)}`
      break
    case "Objects":
      if (ast.propertySignatures.length === 0 && ast.indexSignatures.length === 1) {
        const index = ast.indexSignatures[0]!
        const value = describe(index.type)
        return `object of ${describe(index.parameter)} to ${value.includes(" or ") ? `(${value})` : value}`
      }
      if (ast.indexSignatures.length === 0) {
        return `{ ${ast.propertySignatures.map((p) => `${String(p.name)}${SchemaAST.isOptional(p.type) ? "?" : ""}: ${describe(p.type)}`).join(", ")} }`
      }
      break
  }
  throw new Error(`PROTOCOL.md has no words for a ${ast._tag} yet: teach test/support/protocolDoc.ts`)
}

const tablesOf = (direction: FrameTable["direction"], members: ReadonlyArray<Schema.Top>): Array<FrameTable> =>
  members.map((member) => {
    const ast = SchemaAST.toEncoded(member.ast)
    if (!SchemaAST.isObjects(ast)) throw new Error(`a frame schema is not a struct: ${String(ast)}`)
    const type = ast.propertySignatures.find((p) => p.name === "type")
    const name = type !== undefined && SchemaAST.isLiteral(type.type) ? String(type.type.literal) : "execute"
    const rows = ast.propertySignatures.map((p) => `| \`${String(p.name)}\` | \`${describe(p.type)}\` | ${SchemaAST.isOptional(p.type) ? "no" : "yes"} |`)
    return { direction, name, rows: [...TABLE_HEAD, ...rows] }
  })

/** Every frame's table, host frames first, in the schemas' order. */
export const protocolTables = (): ReadonlyArray<FrameTable> => [
  ...tablesOf("host -> runner", HostFrame.members),
  ...tablesOf("runner -> host", RunnerFrame.members)
]

/** The frame tables a PROTOCOL.md text holds: under `## Host -> runner frames` / `## Runner -> host frames`, one `### \`name\`` each. */
export const documentedTables = (markdown: string): ReadonlyArray<FrameTable> => {
  const tables: Array<FrameTable> = []
  let direction: FrameTable["direction"] | undefined
  let current: { name: string; rows: Array<string> } | undefined
  const flush = () => {
    if (current !== undefined && direction !== undefined) tables.push({ direction, ...current })
    current = undefined
  }
  for (const line of markdown.split("\n")) {
    if (line.startsWith("## ")) {
      flush()
      direction = /^## Host -> runner frames/.test(line) ? "host -> runner" : /^## Runner -> host frames/.test(line) ? "runner -> host" : undefined
    } else if (line.startsWith("### ") && direction !== undefined) {
      flush()
      current = { name: /^### `([^`]+)`/.exec(line)?.[1] ?? line, rows: [] }
    } else if (current !== undefined && line.startsWith("|")) {
      current.rows.push(line.trimEnd())
    }
  }
  flush()
  return tables
}
