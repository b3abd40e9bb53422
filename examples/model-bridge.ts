import { Effect, Layer, Stream } from "effect"
import { LanguageModel } from "effect/ai"
import { EvalTool, evalLayer } from "veyyon-eval"
import { languageModelBridge } from "veyyon-eval/ai"

// Your provider's LanguageModel layer goes here; this stand-in always answers the same.
const Model = Layer.effect(LanguageModel.LanguageModel, LanguageModel.make({
  generateText: () => Effect.succeed([{ type: "text", text: "Kernels keep their state" }]),
  streamText: () => Stream.empty
}))

const program = Effect.gen(function*() {
  const tool = yield* EvalTool
  const result = yield* tool.run({ language: "py", code: "completion('Say one thing about kernels').upper()" }, { sessionId: "model", cwd: process.cwd() })
  console.log(result.text)
})

Effect.runPromise(program.pipe(Effect.provide(evalLayer({ bridge: languageModelBridge.pipe(Layer.provide(Model)) }))))
