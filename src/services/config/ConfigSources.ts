/**
 * The one reader of settings: the environment's variables and a settings object as
 * Effect `ConfigProvider`s, and `readConfig`, which runs a `Config` over them and turns
 * its failure into `InvalidSettings` naming the variable (or the object's key) that held
 * the value. Every setting a variable sets is read here; the host environment passed
 * (filtered) to kernels and child processes is not a setting and is not read here.
 *
 * A variable's empty or blank value counts as unset. A variable with no setting is read
 * by its name (`Config.schema(FlagText, "VEYYON_CLUSTER")` over `fromVariables()`); a
 * setting is read by its path (`["kernel", "mode"]`) over `fromSettings`, which looks for
 * its variables first (newest name first), then the object (its older keys after its
 * own); a `Config.withDefault` supplies the rest.
 */
import { Config, ConfigProvider, Effect, Result, Schema, SchemaIssue } from "effect"
import type { EnvRecord } from "../isolation/EnvPolicy.ts"
import { isUnsetEnvValue } from "./Flags.ts"
import { TrimmedText } from "./Spellings.ts"

/** Settings that could not be read; says which source and what was wrong. */
export class InvalidSettings extends Schema.TaggedError<InvalidSettings>()("InvalidSettings", {
  source: Schema.String,
  problem: Schema.String
}) {
  override get message(): string {
    return `Invalid veyyon-eval settings (${this.source}): ${this.problem}`
  }
}

/** Where settings are read from: a config provider, and the variable (if any) that supplied a path's value. */
export interface SettingsSource {
  readonly provider: ConfigProvider.ConfigProvider
  readonly variableAt: (path: ConfigProvider.Path) => string | undefined
}

/** The variables of this process's environment, as settings read them. */
export const hostVariables = (): EnvRecord => process.env

/** The value of variable `name` in `env`, or undefined when it is unset, empty or blank. */
const valueOf = (env: EnvRecord, name: string): string | undefined => {
  const raw = Object.hasOwn(env, name) ? env[name] : undefined
  return raw === undefined || isUnsetEnvValue(raw) ? undefined : raw
}

/** The variables of `env` (the process's by default), each at the path of its name. */
export const fromVariables = (env: EnvRecord = hostVariables()): SettingsSource => ({
  provider: ConfigProvider.make((path) => {
    const value = path.length === 1 && typeof path[0] === "string" ? valueOf(env, path[0]) : undefined
    return Effect.succeed(value === undefined ? undefined : ConfigProvider.makeValue(value))
  }),
  variableAt: (path) => (path.length === 1 && typeof path[0] === "string" ? path[0] : undefined)
})

/** The names one setting is read under, besides its own path. */
export interface SettingNames {
  /** The variables that set it, the newest name first. */
  readonly variables: ReadonlyArray<string>
  /** Older keys of the settings object that still set it, after its own. */
  readonly olderKeys: ReadonlyArray<ConfigProvider.Path>
}

const NO_NAMES: SettingNames = { variables: [], olderKeys: [] }

/**
 * Settings by path: a setting's first set variable of `env` wins, then its key in
 * `object` (an already validated settings object), then its older keys there.
 * `namesOf` gives a setting's variables and older keys from its dotted path.
 */
export const fromSettings = (
  env: EnvRecord,
  object: unknown,
  namesOf: (path: string) => SettingNames | undefined
): SettingsSource => {
  const names = (path: ConfigProvider.Path) => namesOf(path.join(".")) ?? NO_NAMES
  const variableAt = (path: ConfigProvider.Path) => names(path).variables.find((name) => valueOf(env, name) !== undefined)
  const variables = ConfigProvider.make((path) => {
    const name = variableAt(path)
    return Effect.succeed(name === undefined ? undefined : ConfigProvider.makeValue(valueOf(env, name)!))
  })
  const given = ConfigProvider.fromUnknown(object)
  const olderKeys = ConfigProvider.make((path) =>
    Effect.gen(function*() {
      for (const older of names(path).olderKeys) {
        const node = yield* given.load(older)
        if (node !== undefined) return node
      }
      return undefined
    })
  )
  return { provider: variables.pipe(ConfigProvider.orElse(given), ConfigProvider.orElse(olderKeys)), variableAt }
}

/** The setting at dotted `path`, read as `codec` spells it. */
export const setting = <T>(codec: Schema.ConstraintCodec<T, unknown>, path: string): Config.Config<T> =>
  Config.schema(codec, path.split("."))

/** The setting at dotted `path`, or undefined when no source holds it. */
export const optionalSetting = <T>(codec: Schema.ConstraintCodec<T, unknown>, path: string): Config.Config<T | undefined> =>
  setting(codec, path).pipe(Config.withDefault(undefined))

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

const pathText = (path: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }>): string =>
  path.map((segment) => String(typeof segment === "object" ? segment.key : segment)).join(".")

/** The settings error for a config failure over `source`: the variable and its problem, else the object's keys and theirs. */
const invalidSettings = (error: Config.ConfigError, source: SettingsSource): InvalidSettings => {
  if (!Schema.isSchemaError(error.cause)) return new InvalidSettings({ source: "settings", problem: error.cause.message })
  const issues = formatIssues(error.cause.issue).issues
  const [first] = issues
  const variable = first?.path === undefined ? undefined : source.variableAt(first.path.map((segment) => typeof segment === "object" ? segment.key as string : segment as string))
  return variable !== undefined
    ? new InvalidSettings({ source: variable, problem: first!.message })
    : new InvalidSettings({
      source: "settings object",
      problem: issues.map((issue) => issue.path === undefined || issue.path.length === 0 ? issue.message : `${pathText(issue.path)}: ${issue.message}`).join("; ")
    })
}

/** Reads `config` from `source` now (every source here answers at once); a failure names where the bad value came from. */
export const readConfig = <A>(config: Config.Config<A>, source: SettingsSource): Result.Result<A, InvalidSettings> =>
  Result.mapError(Effect.runSync(Effect.result(config.parse(source.provider))), (error) => invalidSettings(error, source))

/** The trimmed value of variable `name` in `env` (the process's by default), or undefined when it is unset, empty or blank. */
export const readText = (name: string, env?: EnvRecord): string | undefined =>
  Result.getOrUndefined(readConfig(optionalSetting(TrimmedText, name), fromVariables(env)))
