import { Effect } from "effect"
import { EvalLive, EvalTool } from "veyyon-eval"

const program = Effect.gen(function*() {
  const tool = yield* EvalTool
  const context = { sessionId: "readme", cwd: process.cwd() }
  yield* tool.run({ language: "py", code: "import math\nr = 2" }, context)
  const result = yield* tool.run({ language: "py", code: "math.pi * r ** 2" }, context)
  console.log(result.text)
})

Effect.runPromise(program.pipe(Effect.provide(EvalLive)))
