/**
 * Where a runner runs a session's cells: the runner decides, not the client. A call without
 * a cwd runs in the session's own private directory under the runner's workspace root
 * (`VEYYON_RUNNER_WORKSPACE`, default `<state dir>/workspaces/runner`); a call naming a
 * cwd runs there only when its real path lies under one of the roots the runner allows
 * (`VEYYON_RUNNER_ALLOWED_ROOTS`, a `:`-separated list of absolute directories, none by
 * default) and is refused with `InvalidCwd` otherwise. The root `/` and system
 * directories cannot be allowed.
 */
import { Context, Data, Effect, Layer, Result } from "effect"
import { readText } from "../services/config/ConfigSources.ts"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { InvalidCwd, normalizeCwd } from "../services/registry/KernelRegistry.ts"
import { defaultWorkspaceRoot, makeSessionWorkspace, type SessionWorkspace } from "../services/storage/SessionWorkspace.ts"

/** The variable naming the root of the runner's per-session directories. */
export const WORKSPACE_ENV = "VEYYON_RUNNER_WORKSPACE"

/** The variable listing the directories under which clients may name a cwd. */
export const ALLOWED_ROOTS_ENV = "VEYYON_RUNNER_ALLOWED_ROOTS"

/** Directories that can never be an allowed root, nor hold one. */
export const FORBIDDEN_ROOTS: ReadonlyArray<string> = ["/", "/etc", "/proc", "/sys", "/dev", "/boot", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/run", "/var/run"]

/** The runner's workspace settings as resolved. */
export interface RunnerWorkspaceSettings {
  /** The root of the per-session directories. */
  readonly root: string
  /** The real paths of the allowed roots. */
  readonly allowedRoots: ReadonlyArray<string>
}

/** Workspace settings that cannot be used, with a sentence saying which and why. */
export class InvalidWorkspaceSettings extends Data.TaggedError("InvalidWorkspaceSettings")<{ readonly problem: string }> {
  override get message(): string {
    return this.problem
  }
}

const isWithin = (file: string, dir: string): boolean => file === dir || file.startsWith(dir.endsWith("/") ? dir : `${dir}/`)

const forbidden = (dir: string): boolean => FORBIDDEN_ROOTS.some((system) => (system === "/" ? dir === "/" : isWithin(dir, system)))

/** The workspace settings from `VEYYON_RUNNER_WORKSPACE` and `VEYYON_RUNNER_ALLOWED_ROOTS` of `env` (each allowed root must exist). */
export const resolveWorkspaceSettings = (
  env: Readonly<Record<string, string | undefined>>
): Result.Result<RunnerWorkspaceSettings, InvalidWorkspaceSettings> =>
  Result.gen(function*() {
    const rootRaw = readText(WORKSPACE_ENV, env)
    if (rootRaw !== undefined && !path.isAbsolute(rootRaw)) {
      return yield* Result.fail(new InvalidWorkspaceSettings({ problem: `${WORKSPACE_ENV} must be an absolute path, got ${JSON.stringify(rootRaw)}` }))
    }
    const root = rootRaw === undefined ? defaultWorkspaceRoot("runner") : path.resolve(rootRaw)
    const allowedRoots: Array<string> = []
    for (const entry of (readText(ALLOWED_ROOTS_ENV, env) ?? "").split(":").map((part) => part.trim()).filter((part) => part !== "")) {
      if (!path.isAbsolute(entry)) {
        return yield* Result.fail(new InvalidWorkspaceSettings({ problem: `${ALLOWED_ROOTS_ENV}: ${JSON.stringify(entry)} is not an absolute path` }))
      }
      let real: string
      try {
        real = NodeFs.realpathSync(entry)
        if (!NodeFs.statSync(real).isDirectory()) throw new Error("it is not a directory")
      } catch (error) {
        return yield* Result.fail(new InvalidWorkspaceSettings({ problem: `${ALLOWED_ROOTS_ENV}: ${entry} cannot be used (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})` }))
      }
      if (forbidden(real)) {
        return yield* Result.fail(new InvalidWorkspaceSettings({ problem: `${ALLOWED_ROOTS_ENV}: ${entry} is the root or a system directory, which clients may never use as a cwd` }))
      }
      allowedRoots.push(real)
    }
    return { root, allowedRoots }
  })

/** The runner's cwd decisions. */
export interface RunnerWorkspaceService {
  readonly settings: RunnerWorkspaceSettings
  /** The directory a call of `sessionId` asking for `requested` (or nothing) runs in, or why not. */
  readonly cwdFor: (sessionId: string, requested: string | undefined) => Effect.Effect<string, InvalidCwd>
  /** Removes the session's own directory (the session ended on purpose). */
  readonly endSession: (sessionId: string) => Effect.Effect<void>
}

/** Where a runner's kernels live. */
export class RunnerWorkspace extends Context.Service<RunnerWorkspace, RunnerWorkspaceService>()("veyyon/RunnerWorkspace") {
  /** The service for resolved settings. */
  static make = (settings: RunnerWorkspaceSettings): RunnerWorkspaceService => {
    const sessions: SessionWorkspace = makeSessionWorkspace(settings.root)
    const refusal = settings.allowedRoots.length === 0
      ? `this runner runs cells only in each session's own directory (${ALLOWED_ROOTS_ENV} allows no other); leave cwd out`
      : `this runner allows a cwd only under ${settings.allowedRoots.join(", ")} (${ALLOWED_ROOTS_ENV}); leave cwd out to run in the session's own directory`
    return {
      settings,
      cwdFor: (sessionId, requested) =>
        requested === undefined
          ? Effect.mapError(sessions.dirOf(sessionId), (error) => new InvalidCwd({ cwd: "(the session's directory)", problem: error.message }))
          : Effect.flatMap(normalizeCwd(requested), (real) =>
            settings.allowedRoots.some((root) => isWithin(real, root))
              ? Effect.succeed(real)
              : Effect.fail(new InvalidCwd({ cwd: requested, problem: refusal }))),
      endSession: sessions.remove
    }
  }

  /** The layer for resolved settings. */
  static layer = (settings: RunnerWorkspaceSettings): Layer.Layer<RunnerWorkspace> => Layer.succeed(RunnerWorkspace, RunnerWorkspace.make(settings))
}
