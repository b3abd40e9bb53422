/**
 * Puts the runner scripts where kernels can spawn them:
 * `<cache root>/<hash>/{boot.py,runner.py,prelude.py}` for Python (from `runner/python/`) and
 * `<cache root>/<hash>/{runner.mjs,prelude.mjs}` for Node (from `runner/js/`) (each set in the directory named
 * by its own hash, so one changing leaves the other's cache alone). The cache root is
 * `runner` below the per-user cache directory (`$XDG_CACHE_HOME/veyyon`, `~/.cache/veyyon`,
 * see `PrivateDir`); it and every `<hash>` directory are private and checked before use.
 *
 * Python kernels spawn `boot.py`, which runs `runner.py` from a code object it caches
 * beside it per interpreter (`runner.<cache_tag>.pyc`), and lets the runner cache the
 * prelude's compiled code the same way (`prelude.<cache_tag>.pyc`), so neither is compiled
 * from source at every kernel start. Those files are written by the kernels, not here.
 *
 * The sources are read from the package's `runner/` directory on every call (they
 * are small), hashed together, and written only when the cached copy is missing or
 * differs. Each file is created exclusively (never through a symbolic link, mode 0600)
 * under a unique temp name in the same directory and renamed into place, so a reader never sees a partial file and two hosts racing
 * on the same hash both end up with the same, complete content. A missing
 * `prelude.py` counts as empty; the Node runner needs both of its files.
 */
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Context, Effect, Layer, Schema } from "effect"
import { createHash, randomBytes } from "node:crypto"
import * as NodeFs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { EXCLUSIVE_CREATE } from "./AtomicFile.ts"
import { ensurePrivateDir, PRIVATE_FILE_MODE, processUserDirsContext, userCacheDir } from "./PrivateDir.ts"

/** The package name looked for when walking up to the package root. */
export const PACKAGE_NAME = "veyyon-eval"

/** Where runners are cached below the per-user cache directory. */
export const RUNNER_CACHE_DIR_NAME = "runner"

/** The runner as written to the cache. */
export interface RunnerFiles {
  /** `<cache root>/<hash>`. */
  readonly dir: string
  /** The script to spawn: `<python> -u <runnerPath>`; it is `boot.py`, which runs `runner.py` beside it. */
  readonly runnerPath: string
  /** The prelude's cached copy (the kernel is sent `preludeSource` itself, and caches its code when it matches). */
  readonly preludePath: string
  /** Prelude source, sent to a new kernel as one silent request. */
  readonly preludeSource: string
  /** Short hex sha256 over the three sources. */
  readonly hash: string
  /** Whether this call wrote anything (false when the cache was reused). */
  readonly wrote: boolean
}

/** The Node runner as written to the cache. */
export interface JsRunnerFiles {
  /** `<cache root>/<hash>`. */
  readonly dir: string
  /** The script to spawn: `node <runnerPath>`; it imports the prelude beside it. */
  readonly runnerPath: string
  /** The prelude's cached copy. */
  readonly preludePath: string
  /** Short hex sha256 over both sources. */
  readonly hash: string
  /** Whether this call wrote anything (false when the cache was reused). */
  readonly wrote: boolean
}

/** The package does not contain a runner file. */
export class RunnerSourceMissing extends Schema.TaggedError<RunnerSourceMissing>()("RunnerSourceMissing", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `The runner file ${this.path} cannot be read (${this.reason}). ` +
      `The ${PACKAGE_NAME} installation is incomplete: reinstall it so runner/${path.basename(path.dirname(this.path))}/${path.basename(this.path)} is present.`
  }
}

/** The runner could not be written to the cache directory. */
export class RunnerCacheWriteFailed extends Schema.TaggedError<RunnerCacheWriteFailed>()("RunnerCacheWriteFailed", {
  dir: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `Could not write the runner to ${this.dir} (${this.reason}). ` +
      `Make sure it is a private directory of yours that can be written, or point XDG_CACHE_HOME at one.`
  }
}

/** Everything `ensure` can fail with. */
export type RunnerCacheError = RunnerSourceMissing | RunnerCacheWriteFailed

/** The content hash of named files: 16 hex chars of sha256, each part framed by its name and length. */
export const filesHash = (files: ReadonlyArray<readonly [name: string, source: string]>): string => {
  const hash = createHash("sha256")
  files.forEach(([name, source], index) => {
    hash.update(`${index === 0 ? "" : "\n"}${name} ${Buffer.byteLength(source)}\n`).update(source)
  })
  return hash.digest("hex").slice(0, 16)
}

/** The content hash of a Python runner, its prelude and its boot script. */
export const runnerHash = (runnerSource: string, preludeSource: string, bootSource: string): string =>
  filesHash([["runner.py", runnerSource], ["prelude.py", preludeSource], ["boot.py", bootSource]])

/** The content hash of a Node runner and prelude pair. */
export const jsRunnerHash = (runnerSource: string, preludeSource: string): string =>
  filesHash([["runner.mjs", runnerSource], ["prelude.mjs", preludeSource]])

/** The nearest directory at or above `start` holding this package's package.json. */
export const findPackageRoot = (
  start: string
): Effect.Effect<string, RunnerSourceMissing, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    let dir = path.resolve(start)
    while (true) {
      const manifest = path.join(dir, "package.json")
      const name = yield* fs.readFileString(manifest).pipe(
        Effect.map((text) => {
          try {
            return (JSON.parse(text) as { name?: unknown }).name
          } catch {
            return undefined
          }
        }),
        Effect.orElseSucceed(() => undefined)
      )
      if (name === PACKAGE_NAME) return dir
      const parent = path.dirname(dir)
      if (parent === dir) {
        return yield* new RunnerSourceMissing({
          path: path.join("runner", "python", "runner.py"),
          reason: `no ${PACKAGE_NAME} package.json found above ${start}`
        })
      }
      dir = parent
    }
  })

/** Where the cache and the sources are. */
export interface RunnerCacheOptions {
  /** The runner root: `python/` holding runner.py with boot.py and (optionally) prelude.py, `js/` holding runner.mjs with prelude.mjs. */
  readonly sourceDir: string
  /** Directory the `<hash>` directories go in. */
  readonly cacheRoot: string
}

/** The service: make sure the current runner is cached and say where. */
export interface RunnerCacheService {
  /** The Python runner. */
  readonly ensure: Effect.Effect<RunnerFiles, RunnerCacheError>
  /** The Node runner. */
  readonly ensureJs: Effect.Effect<JsRunnerFiles, RunnerCacheError>
}

const isNotFound = (error: PlatformError): boolean => error._tag === "SystemError" && error.reason === "NotFound"

const describeError = (error: PlatformError): string =>
  error._tag === "SystemError" ? `${error.reason}: ${error.message}` : error.message

/** Writes a new file (never an existing one, never through a symbolic link), mode 0600. */
const writeExclusive = async (file: string, content: string): Promise<void> => {
  const handle = await NodeFs.promises.open(file, EXCLUSIVE_CREATE, PRIVATE_FILE_MODE)
  try {
    await handle.writeFile(content, "utf8")
  } finally {
    await handle.close()
  }
}

/** Builds the service over explicit directories. */
export const makeRunnerCache = (
  options: RunnerCacheOptions
): Effect.Effect<RunnerCacheService, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem

    const readSource = (file: string, optional: boolean) =>
      fs.readFileString(file, "utf8").pipe(
        Effect.catchAll((error) =>
          optional && isNotFound(error)
            ? Effect.succeed("")
            : Effect.fail(new RunnerSourceMissing({ path: file, reason: describeError(error) }))
        )
      )

    const writeAtomically = (dir: string, name: string, content: string) =>
      Effect.gen(function*() {
        const target = path.join(dir, name)
        const current = yield* fs.readFileString(target, "utf8").pipe(Effect.orElseSucceed(() => undefined))
        if (current === content) return false
        const temp = path.join(dir, `.${name}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`)
        yield* Effect.tryPromise({
          try: () => writeExclusive(temp, content),
          catch: (error) => new RunnerCacheWriteFailed({ dir, reason: (error as Error).message })
        })
        yield* fs.rename(temp, target).pipe(
          Effect.catchAll((error) =>
            fs.readFileString(target, "utf8").pipe(
              Effect.flatMap((written) => (written === content ? Effect.void : Effect.fail(error))),
              Effect.orElseFail(() => error)
            )
          ),
          Effect.ensuring(fs.remove(temp, { force: true }).pipe(Effect.ignore))
        )
        return true
      }).pipe(
        Effect.mapError((error) => error._tag === "RunnerCacheWriteFailed" ? error : new RunnerCacheWriteFailed({ dir, reason: describeError(error) }))
      )

    const writeFiles = (hash: string, files: ReadonlyArray<readonly [name: string, source: string]>) =>
      Effect.gen(function*() {
        const dir = path.join(options.cacheRoot, hash)
        yield* ensurePrivateDir(dir).pipe(
          Effect.mapError((refused) => new RunnerCacheWriteFailed({ dir: refused.path, reason: refused.problem }))
        )
        let wrote = false
        for (const [name, source] of files) {
          if (yield* writeAtomically(dir, name, source)) wrote = true
        }
        return { dir, wrote }
      })

    const ensure = Effect.gen(function*() {
      const runnerSource = yield* readSource(path.join(options.sourceDir, "python", "runner.py"), false)
      const preludeSource = yield* readSource(path.join(options.sourceDir, "python", "prelude.py"), true)
      const bootSource = yield* readSource(path.join(options.sourceDir, "python", "boot.py"), false)
      const hash = runnerHash(runnerSource, preludeSource, bootSource)
      const { dir, wrote } = yield* writeFiles(hash, [["prelude.py", preludeSource], ["runner.py", runnerSource], ["boot.py", bootSource]])
      return {
        dir,
        runnerPath: path.join(dir, "boot.py"),
        preludePath: path.join(dir, "prelude.py"),
        preludeSource,
        hash,
        wrote
      }
    })

    const ensureJs = Effect.gen(function*() {
      const runnerSource = yield* readSource(path.join(options.sourceDir, "js", "runner.mjs"), false)
      const preludeSource = yield* readSource(path.join(options.sourceDir, "js", "prelude.mjs"), false)
      const hash = jsRunnerHash(runnerSource, preludeSource)
      const { dir, wrote } = yield* writeFiles(hash, [["prelude.mjs", preludeSource], ["runner.mjs", runnerSource]])
      return {
        dir,
        runnerPath: path.join(dir, "runner.mjs"),
        preludePath: path.join(dir, "prelude.mjs"),
        hash,
        wrote
      }
    })

    return { ensure, ensureJs }
  })

/** The default cache root: `runner` below the per-user cache directory. */
export const defaultRunnerCacheRoot = (): string => path.join(userCacheDir(processUserDirsContext()), RUNNER_CACHE_DIR_NAME)

/** Caches the runner scripts for kernels to spawn. */
export class RunnerCache extends Context.Tag("veyyon-eval/RunnerCache")<RunnerCache, RunnerCacheService>() {
  /** The service over explicit directories. */
  static layer(options: RunnerCacheOptions): Layer.Layer<RunnerCache, never, FileSystem.FileSystem> {
    return Layer.effect(RunnerCache, makeRunnerCache(options))
  }

  /** Always answers with `answer` and `js` (files or the error; no Node runner unless given), for tests of the cache's users. */
  static fixed(
    answer: RunnerFiles | RunnerCacheError,
    js: JsRunnerFiles | RunnerCacheError = new RunnerSourceMissing({ path: "runner/js/runner.mjs", reason: "this test layer has no Node runner" })
  ): Layer.Layer<RunnerCache> {
    const settle = <A>(value: A | RunnerCacheError): Effect.Effect<A, RunnerCacheError> =>
      value instanceof RunnerSourceMissing || value instanceof RunnerCacheWriteFailed ? Effect.fail(value) : Effect.succeed(value as A)
    return Layer.succeed(RunnerCache, { ensure: settle(answer), ensureJs: settle(js) })
  }

  /** Sources from this package's `runner/` directory, cache under the per-user cache directory. */
  static readonly Live: Layer.Layer<RunnerCache, never, FileSystem.FileSystem> = Layer.effect(
    RunnerCache,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const cache = yield* Effect.cached(
        findPackageRoot(path.dirname(fileURLToPath(import.meta.url))).pipe(
          Effect.flatMap((root) =>
            makeRunnerCache({ sourceDir: path.join(root, "runner"), cacheRoot: defaultRunnerCacheRoot() })
          ),
          Effect.provideService(FileSystem.FileSystem, fs)
        )
      )
      return {
        ensure: Effect.flatMap(cache, (service) => service.ensure),
        ensureJs: Effect.flatMap(cache, (service) => service.ensureJs)
      }
    })
  )
}
