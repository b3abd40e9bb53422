/**
 * The `sandbox.*` and `limits.*` settings: their schema, their environment variables and
 * the default sandbox mode of each front door.
 *
 *   VEYYON_SANDBOX            sandbox.mode: off | auto | required
 *   VEYYON_SANDBOX_NETWORK    sandbox.network: allow | none
 *   VEYYON_KERNEL_MEMORY_MB   limits.memoryMb (a positive integer)
 */
import { Either, Schema } from "effect"
import type { EnvRecord } from "./EnvPolicy.ts"
import { isUnsetEnvValue } from "./Flags.ts"

/** `off`: no sandbox; `auto`: sandbox when it works here, else run without and say so once; `required`: never without. */
export const SandboxMode = Schema.Literal("off", "auto", "required")

/** One sandbox mode. */
export type SandboxMode = typeof SandboxMode.Type

/** `allow`: the host's network; `none`: an own network namespace, not even the host's loopback. */
export const SandboxNetwork = Schema.Literal("allow", "none")

/** One network policy. */
export type SandboxNetwork = typeof SandboxNetwork.Type

/** The places kernels are started from; each has its own default sandbox mode. */
export type FrontDoor = "library" | "eval" | "repl" | "mcp" | "mcp-http" | "runner"

/** The default sandbox mode of a front door: `auto` for the doors serving remote callers, else `off`. */
export const defaultSandboxMode = (door: FrontDoor): SandboxMode =>
  door === "mcp-http" || door === "runner" ? "auto" : "off"

/** Resolved sandbox settings. */
export interface SandboxSettings {
  readonly mode: SandboxMode
  readonly network: SandboxNetwork
  /** Extra host paths visible read-only inside the sandbox. */
  readonly readPaths: ReadonlyArray<string>
  /** Extra host paths visible read-write inside the sandbox. */
  readonly writePaths: ReadonlyArray<string>
}

/** Resolved per-kernel limits; `undefined` means no limit. */
export interface KernelLimits {
  /** Address space of a Python kernel (RLIMIT_AS), or the V8 heap of a JavaScript kernel, in MiB. */
  readonly memoryMb: number | undefined
  /** Processes and threads of a kernel's whole tree. */
  readonly pids: number | undefined
  /** The largest file a kernel may write, in MiB. */
  readonly fileSizeMb: number | undefined
}

const PositiveInt = Schema.Int.pipe(Schema.positive())
const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })
const AbsolutePath = Schema.String.pipe(
  Schema.filter((value) => value.startsWith("/") || "must be an absolute path")
)

/** Schema of the `sandbox` part of a settings object. */
export const SandboxInput = Schema.Struct({
  mode: optional(SandboxMode),
  network: optional(SandboxNetwork),
  readPaths: optional(Schema.Array(AbsolutePath)),
  writePaths: optional(Schema.Array(AbsolutePath))
})

/** Schema of the `limits` part of a settings object. */
export const LimitsInput = Schema.Struct({
  memoryMb: optional(PositiveInt),
  pids: optional(PositiveInt),
  fileSizeMb: optional(PositiveInt)
})

/** A setting read from the environment that cannot be used. */
export interface EnvProblem {
  readonly source: string
  readonly problem: string
}

const envWord = <A extends string>(
  env: EnvRecord,
  name: string,
  words: ReadonlyArray<A>
): Either.Either<A | undefined, EnvProblem> => {
  const raw = env[name]
  if (raw === undefined || isUnsetEnvValue(raw)) return Either.right(undefined)
  const word = raw.trim().toLowerCase()
  return (words as ReadonlyArray<string>).includes(word)
    ? Either.right(word as A)
    : Either.left({ source: name, problem: `${JSON.stringify(raw)} is not one of ${words.join(", ")}; use one, or unset it.` })
}

const envPositiveInt = (env: EnvRecord, name: string): Either.Either<number | undefined, EnvProblem> => {
  const raw = env[name]
  if (raw === undefined || isUnsetEnvValue(raw)) return Either.right(undefined)
  const value = Number(raw.trim())
  return Number.isSafeInteger(value) && value > 0
    ? Either.right(value)
    : Either.left({ source: name, problem: `${JSON.stringify(raw)} is not a positive whole number of MiB; fix it, or unset it.` })
}

/** The sandbox settings from the object with the environment on top. */
export const resolveSandbox = (
  given: typeof SandboxInput.Type | undefined,
  env: EnvRecord
): Either.Either<SandboxSettings, EnvProblem> =>
  Either.gen(function*() {
    const mode = yield* envWord(env, "VEYYON_SANDBOX", SandboxMode.literals)
    const network = yield* envWord(env, "VEYYON_SANDBOX_NETWORK", SandboxNetwork.literals)
    return {
      mode: mode ?? given?.mode ?? "off",
      network: network ?? given?.network ?? "allow",
      readPaths: given?.readPaths ?? [],
      writePaths: given?.writePaths ?? []
    }
  })

/** The limits from the object with the environment on top; none by default. */
export const resolveLimits = (
  given: typeof LimitsInput.Type | undefined,
  env: EnvRecord
): Either.Either<KernelLimits, EnvProblem> =>
  Either.map(envPositiveInt(env, "VEYYON_KERNEL_MEMORY_MB"), (memoryMb) => ({
    memoryMb: memoryMb ?? given?.memoryMb,
    pids: given?.pids,
    fileSizeMb: given?.fileSizeMb
  }))
