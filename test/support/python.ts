/**
 * Interpreter discovery for tests: resolves shims (pyenv and similar) to the real
 * executable once, so each spawn costs the interpreter's start-up and nothing more.
 */
import { execFileSync } from "node:child_process"

const realExecutable = (candidate: string): string | undefined => {
  try {
    const out = execFileSync(candidate, ["-c", "import sys; print(sys.executable)"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 20_000
    }).trim()
    return out.length > 0 ? out : undefined
  } catch {
    return undefined
  }
}

const hasModules = (python: string, modules: ReadonlyArray<string>): boolean => {
  try {
    execFileSync(python, ["-c", modules.map((m) => `import ${m}`).join("; ")], {
      stdio: "ignore",
      timeout: 60_000
    })
    return true
  } catch {
    return false
  }
}

let cached: string | undefined | null = null

/** The real executable behind `VEYYON_TEST_PYTHON`, `python3` or `python` on PATH, or undefined when none runs. */
export const findPython = (): string | undefined => {
  if (cached === null) {
    const candidates = [process.env.VEYYON_TEST_PYTHON, "python3", "python"].filter(
      (c): c is string => typeof c === "string" && c.length > 0
    )
    cached = undefined
    for (const candidate of candidates) {
      const real = realExecutable(candidate)
      if (real !== undefined) {
        cached = real
        break
      }
    }
  }
  return cached
}

const withModules = new Map<string, string | undefined>()

/** An interpreter that can import every module named, preferring the default one, then `/usr/bin/python3`. */
export const findPythonWith = (modules: ReadonlyArray<string>): string | undefined => {
  const key = modules.join(",")
  if (!withModules.has(key)) {
    const candidates = [findPython(), "/usr/bin/python3"].filter((c): c is string => c !== undefined)
    withModules.set(key, candidates.find((c) => hasModules(c, modules)))
  }
  return withModules.get(key)
}

/** Whether integration tests that spawn a real Python are enabled (`VEYYON_PYTHON_INTEGRATION=1`). */
export const integrationEnabled = (): boolean => process.env.VEYYON_PYTHON_INTEGRATION === "1"
