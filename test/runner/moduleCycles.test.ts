/**
 * The runners' own modules import each other without a cycle, like `src/` (whose layering
 * dependency-cruiser checks): a cycle in a runner means a module that cannot be read, or
 * loaded, without the one that needs it.
 */
import { describe, expect, it } from "@effect/vitest"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"

const runnerRoot = NodePath.resolve(import.meta.dirname, "../../runner")

interface Dialect {
  readonly dir: string
  readonly extension: string
  readonly imports: (source: string) => ReadonlyArray<string>
}

const matches = (source: string, pattern: RegExp): ReadonlyArray<string> => [...source.matchAll(pattern)].map((match) => match[1]!)

const pythonImports = (source: string): ReadonlyArray<string> => [
  ...matches(source, /^\s*from \.([A-Za-z_]\w*) import /gm),
  ...matches(source, /^\s*from \. import ([\w, ]+)$/gm).flatMap((names) => names.split(",").map((name) => name.trim()))
]

const dialects: Record<string, Dialect> = {
  python: { dir: "python/_veyyon_runner", extension: ".py", imports: pythonImports },
  js: { dir: "js", extension: ".mjs", imports: (source) => matches(source, /(?:from |import\()\s*"\.\/([\w-]+)\.mjs"/g) },
  ruby: { dir: "ruby", extension: ".rb", imports: (source) => matches(source, /^\s*require_relative "([\w-]+)"/gm) }
}

/** Each module's imports of its siblings, by module name. */
const graphOf = (dialect: Dialect): Map<string, ReadonlyArray<string>> => {
  const dir = NodePath.join(runnerRoot, dialect.dir)
  const graph = new Map<string, ReadonlyArray<string>>()
  for (const file of NodeFs.readdirSync(dir).filter((name) => name.endsWith(dialect.extension))) {
    graph.set(NodePath.basename(file, dialect.extension), dialect.imports(NodeFs.readFileSync(NodePath.join(dir, file), "utf8")))
  }
  return graph
}

/** A cycle in the graph as the modules along it, or undefined. */
const findCycle = (graph: ReadonlyMap<string, ReadonlyArray<string>>): ReadonlyArray<string> | undefined => {
  const done = new Set<string>()
  const path: Array<string> = []
  const visit = (node: string): ReadonlyArray<string> | undefined => {
    const at = path.indexOf(node)
    if (at !== -1) return [...path.slice(at), node]
    if (done.has(node)) return undefined
    path.push(node)
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next)
      if (cycle !== undefined) return cycle
    }
    path.pop()
    done.add(node)
    return undefined
  }
  for (const node of graph.keys()) {
    const cycle = visit(node)
    if (cycle !== undefined) return cycle
  }
  return undefined
}

describe("the runners' module graphs", () => {
  it("are read from every import form the runners use", () => {
    const python = graphOf(dialects.python!)
    expect(python.get("server")).toEqual(expect.arrayContaining(["egress", "protocol", "state", "output", "display"]))
    expect(pythonImports("    from .display import x\n")).toEqual(["display"])
    expect(graphOf(dialects.js!).get("runner")).toEqual(expect.arrayContaining(["protocol", "execution", "egress"]))
    expect(graphOf(dialects.ruby!).get("runner")).toEqual(["egress", "introspect", "snapshot"])
  })

  it("finds a cycle where there is one", () => {
    expect(findCycle(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]]]))).toEqual(["a", "b", "c", "a"])
    expect(findCycle(new Map([["a", ["b", "c"]], ["b", ["c"]], ["c", []]]))).toBeUndefined()
  })

  for (const [name, dialect] of Object.entries(dialects)) {
    it(`${name}: no module imports itself through others`, () => {
      expect(findCycle(graphOf(dialect))).toBeUndefined()
    })
  }
})
