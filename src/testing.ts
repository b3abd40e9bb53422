/**
 * veyyon-eval/testing: a scripted fake of the kernel spawner, so code built on the library
 * can be tested without Python or Node kernels. Each fake process speaks the runner
 * protocol from a tiny command language (`print X; sleep; raise; exit N; ...`, see
 * `makeScriptedSpawner`) and records the requests and signals it receives.
 */

/** A `KernelSpawner` layer of scripted fake processes, and the records of what it spawned. */
export { makeScriptedSpawner } from "./layers/ScriptedKernelSpawner.ts"
/** Whether every process a scripted spawner started has exited. */
export { allExited } from "./layers/ScriptedKernelSpawner.ts"
/** The record of a scripted spawner's most recent spawn. */
export { lastSpawn } from "./layers/ScriptedKernelSpawner.ts"
/** Everything a scripted spawner started. */
export type { ScriptedSpawns } from "./layers/ScriptedKernelSpawner.ts"
/** What a test can observe of one fake process: command, requests, signals, exit. */
export type { ScriptedProcessRecord } from "./layers/ScriptedKernelSpawner.ts"
