/**
 * The registered backends. Adding a language is one file in this folder, its runner folder
 * below `runner/`, and one line in the list below.
 */
import type { KernelBackend } from "./Backend.ts"
import { javascript } from "./javascript.ts"
import { julia } from "./julia.ts"
import { python } from "./python/PythonBackend.ts"
import { ruby } from "./ruby.ts"

const registrations = () =>
  [
    python,
    javascript,
    ruby,
    julia
  ] as const

let registered: ReturnType<typeof registrations> | undefined

/** Every registered backend, in the order the tool lists them (read lazily, so modules may import this one in any order). */
export const registeredBackends = (): ReturnType<typeof registrations> => (registered ??= registrations())

/** The id of a registered backend: the tool's `language`. */
export type BackendId = ReturnType<typeof registeredBackends>[number]["id"]

/** The backend a call without a language runs in: the first registered. */
export const defaultBackendId = (): BackendId => registeredBackends()[0].id

/** The registered backend with this id, if any. */
export const backendOf = (id: string) => registeredBackends().find((backend) => backend.id === id)

type Registered = ReturnType<typeof registeredBackends>[number]

/** What the registered backends' runtimes need from the context. */
export type BackendsContext = Registered extends KernelBackend<string, infer R, infer _E> ? R : never

/** Why a registered backend cannot resolve an interpreter. */
export type BackendRuntimeError = Registered extends KernelBackend<string, infer _R, infer E> ? E : never
