/**
 * The `effect/ai` toolkit as an agent backend uses it: `LanguageModel.generateText` with
 * the toolkit, a model (scripted here) that answers with `eval` tool calls, and the
 * framework resolving each call through the handler into a real Python kernel of the
 * caller's `EvalSession`.
 */
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime, Stream } from "effect"
import { LanguageModel, type Response } from "effect/ai"
import { EvalAiTool, EvalSession, EvalToolkit, EvalToolkitLive } from "../../src/ai/EvalToolkit.ts"
import { registeredBackends } from "../../src/backends/index.ts"
import { evalLayer } from "../../src/layers/EvalLive.ts"
import { evalDescription } from "../../src/services/tool/EvalTool.ts"
import { EvalParamsSchema, structuredResult } from "../../src/services/tool/EvalSchema.ts"
import { evalResult } from "../support/evalResult.ts"
import { testSettings } from "../support/settings.ts"
import { findPython, integrationEnabled } from "../support/python.ts"
import { tempDir } from "../support/tempDirs.ts"
import { integrationOff, skipReason, titled } from "../support/skip.ts"

const python = findPython()
const root = tempDir("veyyon-toolkit-")

/** A model that, whatever the prompt, calls `eval` once with `params`. */
const modelCalling = (params: Record<string, unknown>) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () =>
        Effect.succeed<Array<Response.PartEncoded>>([
          { type: "tool-call", id: "call-1", name: "eval", params },
          { type: "finish", reason: "tool-calls", usage: { inputTokens: { total: 1 }, outputTokens: { total: 1 } } }
        ]),
      streamText: () => Stream.empty
    })
  )

describe("the eval tool as an effect/ai Tool", () => {
  it("takes the tool's own params schema and is named eval", () => {
    expect(EvalAiTool.name).toBe("eval")
    expect(EvalAiTool.parametersSchema).toBe(EvalParamsSchema)
    expect(EvalToolkit.tools.eval).toBe(EvalAiTool)
  })

  it("is described as the tool is, over every registered backend, saying the host enables them", () => {
    const all = testSettings({ eval: Object.fromEntries(registeredBackends().map((backend) => [backend.id, true])) })
    expect(EvalAiTool.description).toBe(evalDescription(all).replace(/(Languages: [^\n]*)\./, "$1, those the host enabled."))
  })

  it("shows the model the rendered text and each image that carries data", () => {
    const output = structuredResult(evalResult({ text: "", images: [{ mimeType: "image/png", data: "AAAA" }] }), { withImageData: true })
    expect(EvalAiTool.toModelOutput!(output)).toMatchObject([
      { type: "text", text: "(no output)" },
      { type: "file", mediaType: "image/png", data: "AAAA" }
    ])
    expect(EvalAiTool.toModelOutput!(structuredResult(evalResult({ text: "42" })))).toMatchObject([{ type: "text", text: "42" }])
    expect(EvalAiTool.toModelOutput!(structuredResult(evalResult({ text: "42" })))).toHaveLength(1)
  })
})

describe.skipIf(!integrationEnabled() || python === undefined)(titled("the eval toolkit through LanguageModel.generateText", skipReason(integrationOff(), python === undefined && "no python3 found")), () => {
  const runtime = ManagedRuntime.make(
    EvalToolkitLive.pipe(Layer.provideMerge(evalLayer({ env: false, settings: { artifactsDir: `${root}/artifacts`, python: { interpreter: python! } } })))
  )
  afterAll(() => runtime.dispose())

  const ask = (session: string, params: Record<string, unknown>) =>
    runtime.runPromise(
      LanguageModel.generateText({ prompt: "run it", toolkit: EvalToolkit }).pipe(
        Effect.provide(modelCalling(params)),
        Effect.provideService(EvalSession, { sessionId: session, cwd: root })
      )
    )

  it("runs the model's cells in the caller's session, keeping state between calls", async () => {
    await ask("agent-1", { language: "py", code: "x = 6 * 7" })
    const response = await ask("agent-1", { language: "py", code: "print('answer')\nx" })
    expect(response.toolResults).toHaveLength(1)
    const [result] = response.toolResults
    expect(result).toMatchObject({ name: "eval", id: "call-1", isFailure: false })
    expect(result!.result).toMatchObject({ language: "py", status: "ok", text: "answer\n42", executionCount: 2 })
  })

  it("keeps sessions apart", async () => {
    const response = await ask("agent-2", { language: "py", code: "print('x' in dir())" })
    expect(response.toolResults[0]!.result).toMatchObject({ status: "ok", text: "False" })
  })

  it("gives the model a figure's image with its data", async () => {
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
    const response = await ask("agent-1", {
      language: "py",
      code: `import base64\ndisplay({"image/png": "${png}", "text/plain": "<dot>"}, raw=True)`
    })
    const output = response.toolResults[0]!.result as { images: ReadonlyArray<{ mimeType: string; data?: string }> }
    expect(output.images).toEqual([{ mimeType: "image/png", description: "[image/png 1x1, 69 B]", data: png }])
  })

  it("answers a call that cannot run with a failure the model reads, naming what to fix", async () => {
    const response = await ask("agent-1", { language: "cobol", code: "DISPLAY 1" })
    expect(response.toolResults[0]).toMatchObject({ name: "eval", isFailure: true })
    expect(response.toolResults[0]!.result).toMatchObject({ _tag: "EvalCallFailed", reason: "InvalidEvalParams" })
    expect((response.toolResults[0]!.result as { message: string }).message).toMatch(/language must be one of py/)
  })

  it("answers params that do not fit the schema with a failure naming the field, before any kernel sees them", async () => {
    const response = await ask("agent-3", { language: "py" })
    expect(response.toolResults[0]).toMatchObject({ name: "eval", isFailure: true })
    expect(response.toolResults[0]!.result).toMatchObject({ _tag: "AiError", reason: { _tag: "ToolParameterValidationError" } })
    expect(String((response.toolResults[0]!.result as { message: string }).message)).toMatch(/code/)
    const fresh = await ask("agent-3", { language: "py", code: "1" })
    expect(fresh.toolResults[0]!.result).toMatchObject({ status: "ok", executionCount: 1 })
  })
})
