/**
 * `veyyon session list` shows the sessions whose state is kept (their snapshots: language,
 * as of which cell, size, age); `veyyon session rm ID [--all]` forgets a session's saved
 * state, and with `--all` its kv store and artifacts too. Exit 0 done, 1 when the store
 * cannot be read or written, 2 on bad usage.
 */
import * as NodeFs from "node:fs"
import { Effect, Result } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { hostVariables } from "../../services/config/ConfigSources.ts"
import { Settings } from "../../services/config/Settings.ts"
import { sessionArtifactsDir } from "../../services/output/ArtifactStore.ts"
import { makeFileSnapshotStore, snapshotsRoot } from "../../services/snapshots/FileSnapshotStore.ts"
import { openMeta, type SnapshotMeta } from "../../services/snapshots/SnapshotSeal.ts"
import { ownDirProblem } from "../../services/storage/PrivateDir.ts"
import { CliFailure, ExitCode, failureOf } from "../exitCodes.ts"
import { mapLayerError } from "../layerFailure.ts"
import { cliSettings } from "../session.ts"

const DAY_MS = 24 * 60 * 60 * 1000

/** A byte count for people: `512 B`, `3.4 KiB`, `1.2 MiB`. */
export const formatSize = (bytes: number): string => {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`
}

/** An age for people: `42 s`, `5 min`, `3 h`, `2 d`. */
export const formatAge = (ms: number): string => {
  const seconds = Math.max(0, Math.round(ms / 1000))
  if (seconds < 60) return `${seconds} s`
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h`
  return `${Math.round(seconds / 86400)} d`
}

const storeOfSettings = Effect.gen(function*() {
  const settings = yield* Settings
  const store = yield* makeFileSnapshotStore(snapshotsRoot(settings.artifactsDir), settings.session.snapshotMaxAgeDays * DAY_MS).pipe(
    Effect.mapError((error) => new CliFailure({ code: ExitCode.CellFailed, sentence: error.message }))
  )
  return { settings, store }
})

const provideSettings = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provide(effect, mapLayerError(Settings.fromEnv(cliSettings(), hostVariables()), failureOf))

/** The kept snapshots whose seal holds, one line each, newest first. */
export const listLines = (metas: ReadonlyArray<SnapshotMeta>, now: number): ReadonlyArray<string> =>
  [...metas].sort((a, b) => b.savedAt - a.savedAt).map((meta) =>
    `${meta.sessionId}\t${meta.language}\tcell ${meta.asOfCell}\t${formatSize(meta.bytes)}\t${formatAge(now - meta.savedAt)} ago\t${meta.names.length} names`
  )

const listCommand = Command.make("list", {}, () =>
  provideSettings(Effect.gen(function*() {
    const { store } = yield* storeOfSettings
    const stored = yield* Effect.mapError(store.list, (error) => new CliFailure({ code: ExitCode.CellFailed, sentence: error.message }))
    const metas = stored.flatMap(({ sealed }) => {
      const sessionId = (() => {
        try {
          const parsed = JSON.parse(sealed.text) as { sessionId?: unknown; language?: unknown }
          return typeof parsed.sessionId === "string" && typeof parsed.language === "string" ? [parsed.sessionId, parsed.language] as const : undefined
        } catch {
          return undefined
        }
      })()
      if (sessionId === undefined) return []
      const opened = openMeta(store.key, sealed, sessionId[0], sessionId[1])
      return Result.isSuccess(opened) ? [opened.success] : []
    })
    if (metas.length === 0) {
      process.stderr.write("veyyon: no session state is kept (a session's variables are saved after its cells when it has an id: eval --session, mcp --session)\n")
      return
    }
    process.stdout.write(["session\tlanguage\tas of\tsize\tsaved\tnames", ...listLines(metas, Date.now())].join("\n") + "\n")
  }))).pipe(Command.withDescription("List the sessions whose variables are kept: language, as of which cell, size, age."))

const id = Argument.String("ID").pipe(Argument.withDescription("The session id (as given to eval --session or mcp --session)."))
const all = Flag.Boolean("all").pipe(Flag.withDescription("Also remove the session's kv store and artifacts."), Flag.withDefault(false))

const rmCommand = Command.make("rm", { id, all }, (flags) =>
  provideSettings(Effect.gen(function*() {
    const { settings, store } = yield* storeOfSettings
    yield* Effect.mapError(store.remove(flags.id), (error) => new CliFailure({ code: ExitCode.CellFailed, sentence: error.message }))
    if (flags.all) {
      const dir = sessionArtifactsDir(settings.artifactsDir, flags.id)
      const stats = NodeFs.lstatSync(dir, { throwIfNoEntry: false })
      if (stats !== undefined) {
        const problem = ownDirProblem(stats)
        if (problem !== undefined) return yield* new CliFailure({ code: ExitCode.CellFailed, sentence: `not removing ${dir}: ${problem}` })
        NodeFs.rmSync(dir, { recursive: true, force: true })
      }
    }
    process.stderr.write(`veyyon: forgot the saved state of session ${flags.id}${flags.all ? ", and removed its kv store and artifacts" : ""}\n`)
  }))).pipe(Command.withDescription("Forget a session's saved variables (its snapshots); with --all, its kv store and artifacts too."))

/** The `session` command. */
export const sessionCommand = Command.make("session").pipe(
  Command.withDescription("The sessions whose state is kept across processes: list them, or forget one."),
  Command.withSubcommands([listCommand, rmCommand])
)
