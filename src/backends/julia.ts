/**
 * Julia: no runner ships (no Julia can be installed where veyyon-eval is tested, and an
 * untested runner is not shipped), so with `eval.jl` on a `jl` cell fails with an error
 * that says what is missing, and the other backends keep working.
 */
import { Effect } from "effect"
import { makeBackend, RuntimeUnavailable } from "./Backend.ts"

/** The error every `jl` cell gets. */
export const noJulia = (): RuntimeUnavailable =>
  new RuntimeUnavailable({
    language: "jl",
    detail: "no Julia runtime is available here: this veyyon-eval ships no Julia runner, so jl cells cannot run",
    fix: "run the cell as py, js or rb, or turn eval.jl off (VEYYON_JL=0) so agents are not offered jl"
  })

/** The Julia backend: listed when enabled, never able to start a kernel. */
export const julia = makeBackend({
  id: "jl",
  displayName: "Julia",
  guidance: ["Julia: no Julia runtime is available here; jl cells fail with an error saying so."],
  enabledByDefault: false,
  notebook: {
    kernelspec: { name: "julia", display_name: "Julia", language: "julia" },
    language_info: { name: "julia", file_extension: ".jl", mimetype: "application/julia" }
  },
  introspects: false,
  memoryLimit: "none",
  runtime: () => Effect.succeed({
    resolve: () => Effect.fail(noJulia()),
    env: () => ({})
  })
})
