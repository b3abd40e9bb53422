/**
 * Complete settings for tests, from the defaults plus overrides.
 */
import * as os from "node:os"
import * as path from "node:path"
import { Result } from "effect"
import { resolveSettings, type SettingsInput, type SettingsValues } from "../../src/services/config/Settings.ts"
import { removeWhenDone } from "./tempDirs.ts"

/** Default settings with `input` applied, artifacts under a fresh temp directory (removed when the process exits), no spare kernels unless asked; the environment is ignored. */
export const testSettings = (input: SettingsInput = {}): SettingsValues =>
  Result.getOrThrow(
    resolveSettings(
      {
        artifactsDir: removeWhenDone(path.join(os.tmpdir(), `veyyon-test-artifacts-${process.pid}-${Math.random().toString(36).slice(2)}`)),
        ...input,
        kernel: { spares: 0, ...input.kernel }
      },
      {},
      { tmpdir: os.tmpdir(), cwd: process.cwd(), home: os.homedir(), uid: process.getuid?.() ?? 0 }
    )
  )
