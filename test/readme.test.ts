import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { findPython, integrationEnabled } from "./support/python.ts"

const root = path.resolve(import.meta.dirname, "..")
const readme = fs.readFileSync(path.join(root, "README.md"), "utf8")
const example = fs.readFileSync(path.join(root, "examples/embed.ts"), "utf8")
const toolkitExample = fs.readFileSync(path.join(root, "examples/toolkit.ts"), "utf8")
const modelExample = fs.readFileSync(path.join(root, "examples/model-bridge.ts"), "utf8")
const embeddingDoc = fs.readFileSync(path.join(root, "docs/embedding.md"), "utf8")

/** A liveness bound for the example's child process: about 5 s when quiet, several times that under load. */
const LIVENESS_MS = 240_000

describe("README", () => {
  it("shows the embedding example exactly as it is in examples/embed.ts, in under 20 lines", () => {
    expect(readme).toContain("```ts\n" + example + "```")
    expect(example.trimEnd().split("\n").length).toBeLessThan(20)
  })

  it("docs/embedding.md shows the effect/ai example exactly as it is in examples/toolkit.ts (type-checked by the tarball test)", () => {
    expect(embeddingDoc).toContain("```ts\n" + toolkitExample + "```")
  })

  it("docs/embedding.md shows the language-model bridge example exactly as it is in examples/model-bridge.ts", () => {
    expect(embeddingDoc).toContain("```ts\n" + modelExample + "```")
  })

  it("stays a front door: under 15 KB, every docs/ page in its table", () => {
    expect(Buffer.byteLength(readme)).toBeLessThan(15_000)
    for (const page of fs.readdirSync(path.join(root, "docs")).filter((name) => name.endsWith(".md"))) {
      expect({ page, linked: readme.includes(`](docs/${page})`) }).toEqual({ page, linked: true })
    }
  })

  it("names the two set-up commands", () => {
    expect(readme).toContain("npm ci && npm run demo")
    expect(readme).toContain("npm ci && npm test")
  })

  it.skipIf(!integrationEnabled() || findPython() === undefined)("embedding example runs and prints the area", () => {
    const state = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-readme-state-"))
    try {
      const out = execFileSync(process.execPath, ["--import", "tsx", "examples/embed.ts"], {
        cwd: root,
        encoding: "utf8",
        env: { ...process.env, VEYYON_PYTHON_INTERPRETER: findPython()!, XDG_STATE_HOME: state },
        timeout: LIVENESS_MS
      })
      expect(out.trim()).toBe("12.566370614359172")
    } finally {
      fs.rmSync(state, { recursive: true, force: true })
    }
  }, LIVENESS_MS)

  it.skipIf(!integrationEnabled() || findPython() === undefined)("the language-model bridge example runs and prints the model's answer as the cell changed it", () => {
    const state = fs.mkdtempSync(path.join(os.tmpdir(), "veyyon-readme-state-"))
    try {
      const out = execFileSync(process.execPath, ["--import", "tsx", "examples/model-bridge.ts"], {
        cwd: root,
        encoding: "utf8",
        env: { ...process.env, VEYYON_PYTHON_INTERPRETER: findPython()!, XDG_STATE_HOME: state },
        timeout: LIVENESS_MS
      })
      expect(out.trim()).toBe("'KERNELS KEEP THEIR STATE'")
    } finally {
      fs.rmSync(state, { recursive: true, force: true })
    }
  }, LIVENESS_MS)
})
