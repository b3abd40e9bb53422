/**
 * veyyon-eval/cluster: the eval tool as a client of a veyyon cluster (`evalClusterLayer`) and
 * the cluster's runner (`runnerLayer`), on `effect/cluster` and PostgreSQL. Kept apart from
 * `veyyon-eval` so an embedder that runs kernels in its own process loads none of it.
 */

/** The eval tool as a client of a veyyon cluster: cells run on its runners. */
export { evalClusterLayer } from "./cluster/EvalClusterLayer.ts"
/** What `evalClusterLayer` takes: the cluster, the tool's settings, the environment. */
export type { EvalClusterLayerOptions } from "./cluster/EvalClusterLayer.ts"
/** The services `evalClusterLayer` provides: `EvalTool`, `Settings`, `ArtifactStore`. */
export type { EvalClusterServices } from "./cluster/EvalClusterLayer.ts"
/** Every error building `evalClusterLayer` can fail with. */
export type { EvalClusterLayerError } from "./cluster/EvalClusterLayer.ts"
/** A cluster runner as a layer: serves kernel sessions for the shards it owns. */
export { runnerLayer } from "./cluster/RunnerLayer.ts"
/** Every error starting a runner can fail with. */
export type { RunnerLayerError } from "./cluster/RunnerLayer.ts"
/** The cluster settings from an object with `VEYYON_CLUSTER_*` on top. */
export { resolveClusterSettings } from "./cluster/ClusterSettings.ts"
/** Cluster settings that cannot be used, with why. */
export { InvalidClusterSettings } from "./cluster/ClusterSettings.ts"
/** The resolved cluster settings. */
export type { ClusterSettings } from "./cluster/ClusterSettings.ts"
/** Cluster settings as given (every field optional). */
export type { ClusterSettingsInput } from "./cluster/ClusterSettings.ts"
