/**
 * package.json against the built types: an app must end up with one copy of effect and of
 * every Effect package whose types our public API carries (a Layer or a Tag from a second
 * copy is another type, and another service), so each is a peer dependency, tested
 * against by a devDependency of the same range, and never a dependency of our own.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

const root = path.resolve(import.meta.dirname, "..", "..")
const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as {
  readonly exports: Record<string, string | { readonly types: string }>
  readonly dependencies: Record<string, string>
  readonly devDependencies: Record<string, string>
  readonly peerDependencies: Record<string, string>
}

/** The packages the declaration files reachable from `entry` import, by the files importing them. */
const typeImports = (entry: string): Map<string, Set<string>> => {
  const packages = new Map<string, Set<string>>()
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const [, specifier] of fs.readFileSync(file, "utf8").matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*)"([^"]+)"/g)) {
      if (specifier!.startsWith(".")) visit(path.resolve(path.dirname(file), specifier!.replace(/\.(ts|js)$/, ".d.ts")))
      else if (!specifier!.startsWith("node:")) {
        const name = specifier!.split("/").slice(0, specifier!.startsWith("@") ? 2 : 1).join("/")
        packages.set(name, (packages.get(name) ?? new Set()).add(path.relative(root, file)))
      }
    }
  }
  visit(path.join(root, entry))
  return packages
}

const publicTypeImports = Object.values(manifest.exports).flatMap((target) =>
  typeof target === "string" ? [] : [...typeImports(target.types).keys()]
)
const effectPackages = [...new Set(publicTypeImports)].filter((name) => name === "effect" || name.startsWith("@effect/")).sort()

describe("package.json", () => {
  it("the public types import effect and Effect packages (the walk sees them)", () => {
    expect(effectPackages).toContain("effect")
    expect(effectPackages).toContain("@effect/opentelemetry")
  })

  it.each(effectPackages)("%s, whose types the public API carries, is a peer dependency with a devDependency of the same range", (name) => {
    expect({ name, dependency: manifest.dependencies[name], peer: manifest.peerDependencies[name], dev: manifest.devDependencies[name] })
      .toEqual({ name, dependency: undefined, peer: manifest.peerDependencies[name] ?? "(missing)", dev: manifest.peerDependencies[name] })
  })
})
