/**
 * A layer whose build failure is reported as another error: how a command turns the
 * eval layer's setting and directory errors into its own exit codes.
 */
import { Cause, Effect, Layer } from "effect"

/** `layer`, failing with `f` of the error it would have failed with. */
export const mapLayerError = <A, E, R, E2>(layer: Layer.Layer<A, E, R>, f: (error: E) => E2): Layer.Layer<A, E2, R> =>
  Layer.catchCause(layer, (cause) => Layer.unwrap<A, never, never, E2, never>(Effect.failCause(Cause.map(cause, f))))
