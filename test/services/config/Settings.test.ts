import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Result, Schema } from "effect"
import * as path from "node:path"
import {
  backendSettingsOf,
  DEFAULT_ARTIFACTS_MAX_AGE_HOURS,
  DEFAULT_ARTIFACTS_MAX_SESSION_MB,
  DEFAULT_IDLE_TTL_MS,
  DEFAULT_SNAPSHOT_BUDGET_MB,
  DEFAULT_SNAPSHOT_MAX_AGE_DAYS,
  DEFAULT_OUTPUT_MAX_BYTES,
  DEFAULT_OUTPUT_MAX_LINES,
  defaultArtifactsDir,
  enabledLanguages,
  idleTtlMsOf,
  kernelModeOf,
  sparesOf,
  InvalidSettings,
  resolveSettings,
  Settings,
  type SettingsContext,
  type SettingsValues
} from "../../../src/services/config/Settings.ts"

const context: SettingsContext = { tmpdir: "/tmp", cwd: "/work/project", home: "/home/ada", uid: 1000 }

const resolve = (input: unknown, env: Record<string, string | undefined> = {}): SettingsValues =>
  Result.getOrThrowWith(resolveSettings(input, env, context), (e) => e)

const failure = (input: unknown, env: Record<string, string | undefined> = {}): InvalidSettings => {
  const result = resolveSettings(input, env, context)
  if (Result.isSuccess(result)) throw new Error("expected InvalidSettings")
  return result.failure
}

describe("Session snapshot settings", () => {
  it("come from their variables over the object", () => {
    expect(resolve({ session: { snapshots: "idle", snapshotBudgetMb: 10 } }).session)
      .toEqual({ snapshots: "idle", snapshotBudgetMb: 10, snapshotValueBudgetMb: 256, snapshotMaxAgeDays: 7 })
    expect(resolve({ session: { snapshots: "idle" } }, {
      VEYYON_SESSION_SNAPSHOTS: "off",
      VEYYON_SNAPSHOT_BUDGET_MB: "64",
      VEYYON_SNAPSHOT_VALUE_BUDGET_MB: "8",
      VEYYON_SNAPSHOT_MAX_AGE_DAYS: "2"
    }).session).toEqual({ snapshots: "off", snapshotBudgetMb: 64, snapshotValueBudgetMb: 8, snapshotMaxAgeDays: 2 })
  })

  it("refuse a mode that is not one", () => {
    expect(failure({}, { VEYYON_SESSION_SNAPSHOTS: "sometimes" }).message).toMatch(/not a snapshot mode/)
  })
})

describe("Settings defaults", () => {
  it("match the seed", () => {
    expect(resolve({})).toEqual({
      eval: { py: true, js: true, rb: false, jl: false, pyWorkspace: false },
      kernel: { mode: "session", idleTtlMs: DEFAULT_IDLE_TTL_MS, traceFrames: false, backends: { py: {}, js: {}, rb: {}, jl: {} } },
      artifactsDir: path.join("/home/ada", ".local", "state", "veyyon", "sessions"),
      artifacts: { maxSessionMb: DEFAULT_ARTIFACTS_MAX_SESSION_MB, maxAgeHours: DEFAULT_ARTIFACTS_MAX_AGE_HOURS },
      output: { maxBytes: DEFAULT_OUTPUT_MAX_BYTES, maxLines: DEFAULT_OUTPUT_MAX_LINES },
      sandbox: { mode: "off", network: "allow", allowHosts: { rules: [] }, readPaths: [], writePaths: [] },
      limits: { memoryMb: undefined, pids: undefined, fileSizeMb: undefined },
      session: { snapshots: "every-cell", snapshotBudgetMb: 256, snapshotValueBudgetMb: 256, snapshotMaxAgeDays: 7 }
    })
    expect(DEFAULT_IDLE_TTL_MS).toBe(600_000)
    expect(DEFAULT_SNAPSHOT_BUDGET_MB).toBe(256)
    expect(DEFAULT_SNAPSHOT_MAX_AGE_DAYS).toBe(7)
    expect(DEFAULT_OUTPUT_MAX_BYTES).toBe(102_400)
  })

  it("keep session state in the per-user state directory, the same for every process", () => {
    expect(defaultArtifactsDir(context, { XDG_STATE_HOME: "/xdg/state" })).toBe(path.join("/xdg/state", "veyyon", "sessions"))
    expect(resolve({}, { XDG_STATE_HOME: "/xdg/state" }).artifactsDir).toBe(path.join("/xdg/state", "veyyon", "sessions"))
    expect(defaultArtifactsDir(context, { XDG_STATE_HOME: "relative/state" })).toBe(path.join("/home/ada", ".local", "state", "veyyon", "sessions"))
    expect(defaultArtifactsDir({ ...context, home: undefined })).toBe(path.join("/tmp", "veyyon-1000", "state", "sessions"))
  })

  it("read the artifact retention from the object and VEYYON_ARTIFACTS_MAX_MB / _MAX_AGE_HOURS", () => {
    expect(resolve({ artifacts: { maxSessionMb: 5 } }).artifacts).toEqual({ maxSessionMb: 5, maxAgeHours: DEFAULT_ARTIFACTS_MAX_AGE_HOURS })
    expect(resolve({ artifacts: { maxSessionMb: 5 } }, { VEYYON_ARTIFACTS_MAX_MB: "9", VEYYON_ARTIFACTS_MAX_AGE_HOURS: " 2 " }).artifacts)
      .toEqual({ maxSessionMb: 9, maxAgeHours: 2 })
    expect(failure({}, { VEYYON_ARTIFACTS_MAX_MB: "0" }).source).toBe("VEYYON_ARTIFACTS_MAX_MB")
    expect(failure({}, { VEYYON_ARTIFACTS_MAX_AGE_HOURS: "1.5" }).message).toContain("positive whole number")
    expect(failure({ artifacts: { maxAgeHours: 0 } }).message).toContain("maxAgeHours")
  })
})

describe("Settings from an object", () => {
  it("takes every given field and defaults the rest", () => {
    const settings = resolve({
      eval: { js: false, rb: true, pyWorkspace: true },
      python: { kernelMode: "per-call", interpreter: "/opt/py/bin/python3", idleTtlMs: 0 },
      artifactsDir: "/data/artifacts",
      output: { maxLines: 50 }
    })
    expect(settings.eval).toEqual({ py: true, js: false, rb: true, jl: false, pyWorkspace: true })
    expect(backendSettingsOf(settings, "py")).toEqual({ interpreter: "/opt/py/bin/python3", skipCheck: false })
    expect(settings.kernel).toMatchObject({ mode: "per-call", idleTtlMs: 0 })
    expect(settings.artifactsDir).toBe("/data/artifacts")
    expect(settings.output).toEqual({ maxBytes: DEFAULT_OUTPUT_MAX_BYTES, maxLines: 50 })
  })

  it("resolves a relative artifacts dir against the process cwd", () => {
    expect(resolve({ artifactsDir: "out" }).artifactsDir).toBe(path.resolve("/work/project", "out"))
  })

  it("rejects bad values and unknown keys with the path of the problem", () => {
    expect(failure({ python: { kernelMode: "forever" } }).message).toContain("kernelMode")
    expect(failure({ python: { idleTtlMs: -1 } }).message).toContain("idleTtlMs")
    expect(failure({ output: { maxBytes: 0 } }).message).toContain("maxBytes")
    expect(failure({ eval: { py: "yes" } }).message).toContain("py")
    expect(failure({ evl: { py: true } }).message).toContain("evl")
    expect(failure({ python: { interpreter: "" } }).message).toContain("interpreter")
    expect(failure(null)._tag).toBe("InvalidSettings")
  })
})

describe("Settings from env", () => {
  it("lets each language flag override only its own setting", () => {
    const base = { eval: { py: false, js: false, rb: true, jl: true } }
    expect(resolve(base, { VEYYON_PY: "1" }).eval).toMatchObject({ py: true, js: false, rb: true, jl: true })
    expect(resolve(base, { VEYYON_JS: "yes" }).eval).toMatchObject({ py: false, js: true, rb: true, jl: true })
    expect(resolve(base, { VEYYON_RB: "off" }).eval).toMatchObject({ py: false, js: false, rb: false, jl: true })
    expect(resolve(base, { VEYYON_JL: "FALSE" }).eval).toMatchObject({ py: false, js: false, rb: true, jl: false })
  })

  it("covers the seed's mode combinations", () => {
    expect(enabledLanguages(resolve({}, { VEYYON_PY: "1", VEYYON_JS: "0" }))).toEqual(["py"])
    expect(enabledLanguages(resolve({}, { VEYYON_PY: "0", VEYYON_JS: "1" }))).toEqual(["js"])
    expect(enabledLanguages(resolve({}, { VEYYON_PY: "1", VEYYON_JS: "1" }))).toEqual(["py", "js"])
  })

  it("treats empty and blank values as unset", () => {
    expect(resolve({ eval: { py: false } }, { VEYYON_PY: "", VEYYON_JS: "  " }).eval).toMatchObject({ py: false, js: true })
    expect(backendSettingsOf(resolve({}, { VEYYON_PYTHON_INTERPRETER: " " }), "py").interpreter).toBeUndefined()
  })

  it("fails on an unreadable flag, naming the variable and the accepted spellings", () => {
    const error = failure({}, { VEYYON_JS: "flase" })
    expect(error.source).toBe("VEYYON_JS")
    expect(error.message).toContain('"flase"')
    expect(error.message).toContain("true/false")
  })

  it("reads each backend's interpreter and skip-check from its own variables, and the frame trace switch", () => {
    const settings = resolve(
      { kernel: { backends: { py: { skipCheck: false }, rb: { interpreter: "/obj/ruby" } } } },
      { VEYYON_PYTHON_SKIP_CHECK: "yes", VEYYON_IPC_TRACE: "1" }
    )
    expect(backendSettingsOf(settings, "py")).toEqual({ interpreter: undefined, skipCheck: true })
    expect(backendSettingsOf(settings, "rb")).toEqual({ interpreter: "/obj/ruby", skipCheck: false })
    expect(backendSettingsOf(resolve({ kernel: { backends: { py: { interpreter: "/new" } } }, python: { interpreter: "/old" } }), "py").interpreter)
      .toBe("/new")
    expect(settings.kernel.traceFrames).toBe(true)
    expect(resolve({}, { VEYYON_PYTHON_IPC_TRACE: "on" }).kernel.traceFrames).toBe(true)
    expect(resolve({}).kernel.traceFrames).toBe(false)
    expect(failure({}, { VEYYON_IPC_TRACE: "loud" }).source).toBe("VEYYON_IPC_TRACE")
  })

  it("reads interpreter, kernel mode, skip-check and artifacts dir", () => {
    const settings = resolve(
      { python: { interpreter: "/from/object", kernelMode: "session" }, artifactsDir: "/from/object" },
      {
        VEYYON_PYTHON_INTERPRETER: " /from/env/python ",
        VEYYON_PYTHON_KERNEL_MODE: "Per-Call",
        VEYYON_PYTHON_SKIP_CHECK: "1",
        VEYYON_ARTIFACTS_DIR: "rel/dir"
      }
    )
    expect(backendSettingsOf(settings, "py").interpreter).toBe("/from/env/python")
    expect(settings.kernel.mode).toBe("per-call")
    expect(backendSettingsOf(settings, "py").skipCheck).toBe(true)
    expect(settings.artifactsDir).toBe(path.resolve("/work/project", "rel/dir"))
  })

  it("fails on an unknown kernel mode", () => {
    expect(failure({}, { VEYYON_PYTHON_KERNEL_MODE: "sometimes" }).message).toContain('"session" or "per-call"')
  })

  it("ignores variables it does not own", () => {
    expect(resolve({}, { VEYYON_OTHER: "x", PY: "0" })).toEqual(resolve({}))
  })

  it.prop("an unset flag always falls back to the object's value", {
    py: Schema.Boolean,
    js: Schema.Boolean,
    flag: Schema.UndefinedOr(Schema.Literals(["1", "0", "true", "false", "yes", "no", "on", "off"]))
  }, ({ py, js, flag }) => {
    const settings = resolve({ eval: { py, js } }, { VEYYON_PY: flag })
    expect(settings.eval.js).toBe(js)
    expect(settings.eval.py).toBe(flag === undefined ? py : ["1", "true", "yes", "on"].includes(flag))
  })
})

describe("Settings precedence", () => {
  it("for every setting a variable sets: the variable, then the object, then the default", () => {
    const object = {
      eval: { rb: false },
      python: { skipCheck: false },
      kernel: { mode: "session", spares: 2 },
      artifacts: { maxAgeHours: 5 },
      sandbox: { mode: "auto", network: "none" },
      limits: { memoryMb: 100, pids: 10 }
    } as const
    const env = {
      VEYYON_RB: "1",
      VEYYON_PYTHON_SKIP_CHECK: "1",
      VEYYON_KERNEL_MODE: "per-call",
      VEYYON_KERNEL_SPARES: "4",
      VEYYON_ARTIFACTS_MAX_AGE_HOURS: "6",
      VEYYON_SANDBOX: "required",
      VEYYON_SANDBOX_NETWORK: "allow",
      VEYYON_KERNEL_MEMORY_MB: "200",
      VEYYON_KERNEL_PIDS: "20"
    }
    const pick = (settings: SettingsValues) => [
      settings.eval["rb"],
      backendSettingsOf(settings, "py").skipCheck,
      settings.kernel.mode,
      sparesOf(settings, "js", 0),
      settings.artifacts.maxAgeHours,
      settings.sandbox.mode,
      settings.sandbox.network,
      settings.limits.memoryMb,
      settings.limits.pids
    ]
    expect(pick(resolve(object, env))).toEqual([true, true, "per-call", 4, 6, "required", "allow", 200, 20])
    expect(pick(resolve(object))).toEqual([false, false, "session", 2, 5, "auto", "none", 100, 10])
    expect(pick(resolve({}))).toEqual([false, false, "session", 0, DEFAULT_ARTIFACTS_MAX_AGE_HOURS, "off", "allow", undefined, undefined])
  })
})

describe("kernel settings", () => {
  it("kernel.mode and kernel.idleTtlMs govern every backend; python.kernelMode and python.idleTtlMs are older names for them", () => {
    const generic = resolve({ kernel: { mode: "per-call", idleTtlMs: 5 } })
    expect([kernelModeOf(generic, "js"), idleTtlMsOf(generic, "rb")]).toEqual(["per-call", 5])
    const alias = resolve({ python: { kernelMode: "per-call", idleTtlMs: 7 } })
    expect([kernelModeOf(alias, "js"), idleTtlMsOf(alias, "py")]).toEqual(["per-call", 7])
    const both = resolve({ kernel: { mode: "session", idleTtlMs: 1 }, python: { kernelMode: "per-call", idleTtlMs: 2 } })
    expect([kernelModeOf(both, "py"), idleTtlMsOf(both, "py")]).toEqual(["session", 1])
  })

  it("VEYYON_KERNEL_MODE sets the mode; VEYYON_PYTHON_KERNEL_MODE still does, and the new name wins", () => {
    expect(resolve({}, { VEYYON_KERNEL_MODE: "per-call" }).kernel.mode).toBe("per-call")
    expect(resolve({}, { VEYYON_PYTHON_KERNEL_MODE: "per-call" }).kernel.mode).toBe("per-call")
    expect(resolve({}, { VEYYON_KERNEL_MODE: "session", VEYYON_PYTHON_KERNEL_MODE: "per-call" }).kernel.mode).toBe("session")
    expect(failure({}, { VEYYON_KERNEL_MODE: "often" }).source).toBe("VEYYON_KERNEL_MODE")
  })

  it("spares: a backend's own setting, else kernel.spares, else its default; VEYYON_KERNEL_SPARES sets every backend's", () => {
    expect([sparesOf(resolve({}), "py", 1), sparesOf(resolve({}), "js", 0)]).toEqual([1, 0])
    const set = resolve({ kernel: { spares: 2, backends: { js: { spares: 3 } } } })
    expect([sparesOf(set, "py", 1), sparesOf(set, "js", 0)]).toEqual([2, 3])
    const off = resolve({ kernel: { spares: 2, backends: { js: { spares: 3 } } } }, { VEYYON_KERNEL_SPARES: "0" })
    expect([sparesOf(off, "py", 1), sparesOf(off, "js", 0), sparesOf(off, "rb", 0)]).toEqual([0, 0, 0])
    expect(failure({}, { VEYYON_KERNEL_SPARES: "-1" }).source).toBe("VEYYON_KERNEL_SPARES")
  })

  it("kernel.backends.<id> overrides the mode and idle time for one backend only", () => {
    const settings = resolve({ kernel: { idleTtlMs: 9, backends: { rb: { mode: "per-call", idleTtlMs: 3 } } } })
    expect([kernelModeOf(settings, "rb"), idleTtlMsOf(settings, "rb")]).toEqual(["per-call", 3])
    expect([kernelModeOf(settings, "py"), idleTtlMsOf(settings, "py")]).toEqual(["session", 9])
  })

  it("a backend's interpreter variable fills kernel.backends.<id>.interpreter and wins over the object", () => {
    expect(resolve({ kernel: { backends: { rb: { interpreter: "/obj/ruby" } } } }).kernel.backends["rb"]?.interpreter).toBe("/obj/ruby")
    expect(resolve({ kernel: { backends: { rb: { interpreter: "/obj/ruby" } } } }, { VEYYON_RUBY_INTERPRETER: " /env/ruby " }).kernel.backends["rb"]?.interpreter)
      .toBe("/env/ruby")
  })

  it("refuses eval.<id> and kernel.backends.<id> for a backend that is not registered, naming the backends", () => {
    const error = failure({ eval: { cobol: true }, kernel: { backends: { zz: {} } } })
    expect(error.message).toContain("eval.cobol, kernel.backends.zz: no such backend")
    expect(error.message).toContain("py, js, rb, jl")
    expect(failure({ eval: { rb: "yes" } }).message).toContain("rb")
  })
})

describe("enabledLanguages", () => {
  it("lists enabled backends in the order py, js, rb, jl", () => {
    expect(enabledLanguages(resolve({ eval: { rb: true, jl: true } }))).toEqual(["py", "js", "rb", "jl"])
    expect(enabledLanguages(resolve({ eval: { py: false, jl: true } }))).toEqual(["js", "jl"])
    expect(enabledLanguages(resolve({ eval: { py: false, js: false } }))).toEqual([])
  })
})

describe("Settings layers", () => {
  it.effect("layer builds from the object alone", () =>
    Effect.gen(function*() {
      const settings = yield* Settings
      expect(settings.eval.js).toBe(false)
      expect(settings.kernel.mode).toBe("session")
    }).pipe(Effect.provide(Settings.layer({ eval: { js: false } }))))

  it.effect("fromEnv lets the env override the object", () =>
    Effect.gen(function*() {
      const settings = yield* Settings
      expect(settings.eval.js).toBe(true)
      expect(settings.eval.py).toBe(false)
    }).pipe(Effect.provide(Settings.fromEnv({ eval: { js: false } }, { VEYYON_JS: "on", VEYYON_PY: "0" }))))

  it.effect("a bad flag fails the layer with InvalidSettings", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Layer.build(Settings.fromEnv({}, { VEYYON_PY: "maybe" })).pipe(Effect.scoped))
      expect(Exit.isFailure(exit)).toBe(true)
      const error = yield* Effect.flip(Effect.scoped(Layer.build(Settings.fromEnv({}, { VEYYON_PY: "maybe" }))))
      expect(error).toBeInstanceOf(InvalidSettings)
    }))
})
