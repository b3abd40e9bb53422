import { Effect, Layer } from "effect"
import { LanguageModel } from "effect/ai"
import { EvalLive } from "veyyon-eval"
import { EvalSession, EvalToolkit, EvalToolkitLive } from "veyyon-eval/ai"

export const turn = LanguageModel.generateText({ prompt: "Plot sin(x) and say where it peaks", toolkit: EvalToolkit }).pipe(
  Effect.provideService(EvalSession, { sessionId: "conversation-1", cwd: process.cwd() }),
  Effect.provide(EvalToolkitLive.pipe(Layer.provide(EvalLive)))
) // with your provider's LanguageModel layer
