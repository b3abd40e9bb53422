/**
 * The package's version, read from its package.json (two levels up from both
 * `src/cli` and `dist/cli`).
 */
import * as fs from "node:fs"

const readVersion = (): string => {
  try {
    const manifest = JSON.parse(fs.readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: unknown }
    return typeof manifest.version === "string" ? manifest.version : "0.0.0"
  } catch {
    return "0.0.0"
  }
}

/** The version `veyyon --version` and the MCP handshake report. */
export const VERSION: string = readVersion()
