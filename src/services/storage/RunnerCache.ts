/**
 * Puts a backend's runner where its kernels can spawn it: every regular file below the
 * backend's folder in the package's `runner/` directory (e.g. `runner/python/`), except
 * `tests/`, `__pycache__/` and `*.pyc`, is copied to `<cache root>/<hash>/` keeping its
 * relative path, where `<hash>` covers all of the folder's files (names and contents), so
 * each folder's copy lives in a directory of its own and one changing leaves the others'
 * alone. The cache root is `runner` below the per-user cache directory
 * (`$XDG_CACHE_HOME/veyyon`, `~/.cache/veyyon`, see `PrivateDir`); it, every `<hash>`
 * directory and every directory below one are private and checked before use.
 *
 * The cache does not know which files a runner has: a runner may be one script or a
 * package of modules. Kernels may write files of their own beside the copy (Python's boot
 * script caches compiled code there); those are left alone.
 *
 * The sources are read from the package, hashed together, and written only when the cached
 * copy is missing or differs. The answer is then memoized per folder for the life of the
 * service: a later call only lists the source folder and `lstat`s its files and the cached
 * copy's (a few dozen microseconds), and does the full read, hash and compare again when
 * anything changed (a source edited, added or removed; a cached file or directory replaced,
 * touched, or its mode or owner changed). Each file is created
 * exclusively (never through a symbolic link, mode 0600) under a unique temp name in the
 * same directory and renamed into place, so a reader never sees a partial file and two
 * hosts racing on the same hash both end up with the same, complete content.
 */
import { Context, Effect, FileSystem, Layer, type PlatformError, Schema } from "effect"
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

/** A runner folder as written to the cache. */
export interface CachedRunner {
  /** The folder below `runner/` it was copied from, e.g. `python`. */
  readonly folder: string
  /** `<cache root>/<hash>`: the folder's files keep their relative paths below it. */
  readonly dir: string
  /** The sources copied, by relative path (`/`-separated), e.g. the prelude a host sends. */
  readonly sources: ReadonlyMap<string, string>
  /** Short hex sha256 over the folder's files. */
  readonly hash: string
  /** Whether this call wrote anything (false when the cache was reused). */
  readonly wrote: boolean
}

/** The path of one of a cached runner's files. */
export const cachedPath = (runner: CachedRunner, relative: string): string => path.join(runner.dir, ...relative.split("/"))

/** The package does not contain a runner folder or a file a backend needs from it. */
export class RunnerSourceMissing extends Schema.TaggedError<RunnerSourceMissing>()("RunnerSourceMissing", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `The runner source ${this.path} cannot be read (${this.reason}). ` +
      `The ${PACKAGE_NAME} installation is incomplete: reinstall it so its runner/ directory is complete.`
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

/** Whether a path below a runner folder (`/`-separated) is left out of the cache: tests, bytecode, hidden entries (a tool's cache such as `.pytest_cache`). */
export const isExcludedRunnerPath = (relative: string): boolean => {
  const parts = relative.split("/")
  return parts.some((part) => part === "tests" || part === "__pycache__" || part.startsWith(".")) || relative.endsWith(".pyc")
}

/** The regular files below `root` that belong in the cache, as sorted `/`-separated relative paths (symbolic links are not followed). */
export const listRunnerFiles = (root: string): ReadonlyArray<string> => {
  const found: Array<string> = []
  const walk = (relative: string) => {
    for (const entry of NodeFs.readdirSync(path.join(root, relative), { withFileTypes: true })) {
      const child = relative === "" ? entry.name : `${relative}/${entry.name}`
      if (isExcludedRunnerPath(child)) continue
      if (entry.isDirectory()) walk(child)
      else if (entry.isFile()) found.push(child)
    }
  }
  walk("")
  return found.sort()
}

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
          path: "runner/",
          reason: `no ${PACKAGE_NAME} package.json found above ${start}`
        })
      }
      dir = parent
    }
  })

/** Where the cache and the sources are. */
export interface RunnerCacheOptions {
  /** The runner root: one folder per backend (`python/`, `js/`, `ruby/`). */
  readonly sourceDir: string
  /** Directory the `<hash>` directories go in. */
  readonly cacheRoot: string
}

/** The service: make sure a runner folder's current files are cached and say where. */
export interface RunnerCacheService {
  /** The folder below `runner/` (e.g. `python`) as cached now. */
  readonly ensure: (folder: string) => Effect.Effect<CachedRunner, RunnerCacheError>
}

const describeError = (error: PlatformError.PlatformError): string => error.message

/** Writes a new file (never an existing one, never through a symbolic link), mode 0600. */
const writeExclusive = async (file: string, content: string): Promise<void> => {
  const handle = await NodeFs.promises.open(file, EXCLUSIVE_CREATE, PRIVATE_FILE_MODE)
  try {
    await handle.writeFile(content, "utf8")
  } finally {
    await handle.close()
  }
}

/** What a file's `lstat` says about its identity and content; throws when it is missing. */
const fileStamp = (file: string): string => {
  const stat = NodeFs.lstatSync(file, { bigint: true })
  return `${stat.mode} ${stat.uid} ${stat.ino} ${stat.size} ${stat.mtimeNs} ${stat.ctimeNs}`
}

/** Builds the service over explicit directories. */
export const makeRunnerCache = (
  options: RunnerCacheOptions
): Effect.Effect<RunnerCacheService, never, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem

    const readFolder = Effect.fnUntraced(function*(folder: string) {
      const root = path.join(options.sourceDir, folder)
      const names = yield* Effect.try({
        try: () => listRunnerFiles(root),
        catch: (error) => new RunnerSourceMissing({ path: root, reason: (error as Error).message })
      })
      if (names.length === 0) return yield* new RunnerSourceMissing({ path: root, reason: "it holds no files" })
      const files: Array<readonly [string, string]> = []
      for (const name of names) {
        const file = path.join(root, ...name.split("/"))
        const source = yield* fs.readFileString(file, "utf8").pipe(
          Effect.mapError((error) => new RunnerSourceMissing({ path: file, reason: describeError(error) }))
        )
        files.push([name, source])
      }
      return files
    })

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
          Effect.catch((error) =>
            fs.readFileString(target, "utf8").pipe(
              Effect.flatMap((written) => (written === content ? Effect.void : Effect.fail(error))),
              Effect.mapError(() => error)
            )
          ),
          Effect.ensuring(fs.remove(temp, { force: true }).pipe(Effect.ignore))
        )
        return true
      }).pipe(
        Effect.mapError((error) => error._tag === "RunnerCacheWriteFailed" ? error : new RunnerCacheWriteFailed({ dir, reason: describeError(error) }))
      )

    const privateDir = (dir: string) =>
      ensurePrivateDir(dir).pipe(
        Effect.mapError((refused) => new RunnerCacheWriteFailed({ dir: refused.path, reason: refused.problem }))
      )

    const writeFiles = Effect.fnUntraced(function*(hash: string, files: ReadonlyArray<readonly [name: string, source: string]>) {
      const dir = path.join(options.cacheRoot, hash)
      yield* privateDir(dir)
      const made = new Set<string>()
      let wrote = false
      for (const [name, source] of files) {
        const parts = name.split("/")
        for (let depth = 1; depth < parts.length; depth++) {
          const sub = path.join(dir, ...parts.slice(0, depth))
          if (!made.has(sub)) {
            yield* privateDir(sub)
            made.add(sub)
          }
        }
        if (yield* writeAtomically(path.join(dir, ...parts.slice(0, -1)), parts[parts.length - 1]!, source)) wrote = true
      }
      return { dir, wrote }
    })

    const memo = new Map<string, { readonly runner: CachedRunner; readonly stamp: string }>()

    const stampOf = (folder: string, runner: CachedRunner): string | undefined => {
      try {
        const root = path.join(options.sourceDir, folder)
        const names = listRunnerFiles(root)
        const dirs = new Set<string>([runner.dir])
        for (const name of names) {
          const parts = name.split("/")
          for (let depth = 1; depth < parts.length; depth++) dirs.add(path.join(runner.dir, ...parts.slice(0, depth)))
        }
        return [
          ...names.map((name) => `s ${name} ${fileStamp(path.join(root, ...name.split("/")))}`),
          ...names.map((name) => `c ${fileStamp(cachedPath(runner, name))}`),
          ...[...dirs].map((dir) => `d ${fileStamp(dir)}`)
        ].join("\n")
      } catch {
        return undefined
      }
    }

    const ensureNow = Effect.fnUntraced(function*(folder: string) {
      const files = yield* readFolder(folder)
      const hash = filesHash(files)
      const { dir, wrote } = yield* writeFiles(hash, files)
      const runner: CachedRunner = { folder, dir, sources: new Map(files), hash, wrote }
      const stamp = stampOf(folder, runner)
      if (stamp === undefined) memo.delete(folder)
      else memo.set(folder, { runner: { ...runner, wrote: false }, stamp })
      return runner
    })

    const ensure = (folder: string) =>
      Effect.suspend(() => {
        const known = memo.get(folder)
        return known !== undefined && stampOf(folder, known.runner) === known.stamp ? Effect.succeed(known.runner) : ensureNow(folder)
      })

    return { ensure }
  })

/** The default cache root: `runner` below the per-user cache directory. */
export const defaultRunnerCacheRoot = (): string => path.join(userCacheDir(processUserDirsContext()), RUNNER_CACHE_DIR_NAME)

/** Caches the runner folders for kernels to spawn. */
export class RunnerCache extends Context.Service<RunnerCache, RunnerCacheService>()("veyyon-eval/RunnerCache") {
  /** The service over explicit directories. */
  static layer(options: RunnerCacheOptions): Layer.Layer<RunnerCache, never, FileSystem.FileSystem> {
    return Layer.effect(RunnerCache, makeRunnerCache(options))
  }

  /** Answers each folder with the given runner or error (a folder not given is missing), for tests of the cache's users. */
  static fixed(answers: Readonly<Record<string, CachedRunner | RunnerCacheError>>): Layer.Layer<RunnerCache> {
    return Layer.succeed(RunnerCache, {
      ensure: (folder) => {
        const answer = answers[folder]
        if (answer === undefined) return Effect.fail(new RunnerSourceMissing({ path: `runner/${folder}/`, reason: "this test layer has no such runner" }))
        return answer instanceof RunnerSourceMissing || answer instanceof RunnerCacheWriteFailed ? Effect.fail(answer) : Effect.succeed(answer as CachedRunner)
      }
    })
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
      return { ensure: (folder) => Effect.flatMap(cache, (service) => service.ensure(folder)) }
    })
  )
}
