/**
 * `languageModelBridge`: an embedder's `effect/ai` `LanguageModel` (scripted here) answers
 * a real Python cell's completion(), agent() with a schema and the branches of parallel();
 * the model sees the system prompt and the cell's prompt; input() gets end of input, and
 * a failing model reaches the cell as ModelFailed.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, Stream } from "effect"
import { AiError, LanguageModel, type Prompt, type Response } from "effect/ai"
import { languageModelBridge } from "../../src/ai/LanguageModelBridge.ts"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import { EvalTool } from "../../src/services/tool/EvalTool.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"
import { tempDir } from "../support/tempDirs.ts"

const python = findPython()
const root = tempDir("veyyon-lm-bridge-")

/** What the scripted model was asked: each prompt's system and user text. */
const asked: Array<{ readonly system: string; readonly user: string; readonly files: ReadonlyArray<string> }> = []

const textOf = (message: Prompt.Message): string =>
  typeof message.content === "string"
    ? message.content
    : message.content.map((part) => (part.type === "text" ? part.text : "")).join("")

/** A model answering `answer to <prompt>`, a JSON object when the system prompt asks for JSON, and failing on "fail". */
const scriptedModel = Layer.effect(
  LanguageModel.LanguageModel,
  LanguageModel.make({
    generateText: (options) => {
      const system = textOf(options.prompt.content.find((message) => message.role === "system")!)
      const message = options.prompt.content.find((message) => message.role === "user")!
      const user = textOf(message)
      const files = typeof message.content === "string" ? [] : message.content.flatMap((part) => (part.type === "file" ? [part.mediaType] : []))
      asked.push({ system, user, files })
      if (user === "fail") {
        return Effect.fail(AiError.make({ module: "Scripted", method: "generateText", reason: new AiError.UnknownError({ description: "the provider is down" }) }))
      }
      const text = system.includes("JSON Schema") ? "```json\n{\"rows\": 3}\n```" : `answer to ${user}`
      return Effect.succeed<Array<Response.PartEncoded>>([
        { type: "text", text },
        { type: "finish", reason: "stop", usage: { inputTokens: { total: 1 }, outputTokens: { total: 1 } } }
      ])
    },
    streamText: () => Stream.empty
  })
)

describe.skipIf(!integrationEnabled() || python === undefined)(titled("an effect/ai LanguageModel answers cells' host calls", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const runtime = ManagedRuntime.make(
    evalLayer({
      env: false,
      settings: { artifactsDir: `${root}/artifacts`, python: { interpreter: python! } },
      bridge: languageModelBridge.pipe(Layer.provide(scriptedModel))
    })
  )
  afterAll(() => runtime.dispose())

  const run = (code: string) =>
    runtime.runPromise(Effect.flatMap(Effect.service(EvalTool), (tool) => tool.run({ language: "py", code }, { sessionId: "embedder", cwd: root })))

  it("answers completion() and parallel()'s branches, the model seeing what asks", async () => {
    const one = await run("completion('name a colour')")
    expect(one).toMatchObject({ status: "ok", text: "'answer to name a colour'" })
    expect(asked[0]!.system).toContain("completion()")
    const many = await run("parallel(completion.defer('a'), agent.defer('b'))")
    expect(many.text).toContain("['answer to a', 'answer to b']")
    expect(asked.some((entry) => entry.user === "b" && entry.system.includes("sub-agent"))).toBe(true)
  })

  it("gives the model the images a cell passes as file parts", async () => {
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    await run(`import base64\ncompletion('look', images=[base64.b64decode('${png}')])`)
    expect(asked.at(-1)).toMatchObject({ user: "look", files: ["image/png"] })
  })

  it("puts agent()'s schema in the system prompt and the answer through the prelude's parse and check", async () => {
    const result = await run("agent('count rows', schema={'type': 'object', 'required': ['rows']})")
    expect(result).toMatchObject({ status: "ok", text: "{'rows': 3}" })
  })

  it("gives input() end of input and a failing model's error to the cell, each with a sentence", async () => {
    const input = await run("input('?')")
    expect(input).toMatchObject({ status: "error", error: { ename: "EOFError" } })
    expect(input.text).toContain("nothing here answers a cell's input")
    const failed = await run("completion('fail')")
    expect(failed).toMatchObject({ status: "error" })
    expect(failed.text).toContain("ModelFailed: the app's language model failed completion()")
  })
})
