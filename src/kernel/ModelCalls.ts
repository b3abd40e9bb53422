/**
 * A cell's `completion()` or `agent()` (each `parallel()` branch is one of them) as one
 * question to a model, whoever answers it (an MCP client's model by sampling, an
 * embedder's `effect/ai` model): the prompt, a system prompt saying what asks and why
 * (with the JSON Schema the answer must match, when the call gave one), the model the
 * call prefers, the images it passes (PNG or JPEG, bounded). `isolated`, `apply` and `merge` have no meaning for a model asked this
 * way and are refused. Pure functions.
 */
import { Result } from "effect"
import { AgentBridgeError } from "./AgentBridge.ts"

/** The bridge methods a model answers. */
export const MODEL_METHODS: ReadonlySet<string> = new Set(["completion", "agent"])

/** One question to a model. */
export interface ModelQuestion {
  /** The cell's prompt: the user message. */
  readonly prompt: string
  /** What asks and why, and the shape the answer must take. */
  readonly systemPrompt: string
  /** The model the call names, when it names one. */
  readonly model?: string
  /** The `maxTokens` the call asks for, when it asks. */
  readonly maxTokens?: number
  /** The images the model sees with the prompt. */
  readonly images: ReadonlyArray<ModelImage>
}

/** The longest `maxTokens` a call may ask for. */
export const MAX_MODEL_TOKENS = 1_000_000

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const refused = (name: string, message: string) => Result.fail(new AgentBridgeError({ name, message }))

const text = (value: unknown): string | undefined => (typeof value === "string" && value.trim() !== "" ? value : undefined)

const schemaClause = (schema: unknown): string =>
  schema === undefined || schema === null
    ? ""
    : ` Answer with JSON only (no prose, no code fence), one value that matches this JSON Schema: ${JSON.stringify(schema)}`

const systemPrompt = (method: string, params: Record<string, unknown>): string => {
  if (method === "completion") {
    return "A code cell running in the veyyon eval tool (a persistent Python, JavaScript or Ruby kernel an agent drives) asks your model for one completion through its completion() call. Answer the user message directly." +
      schemaClause(params.schema)
  }
  const kind = text(params.agent) ?? "deep"
  const label = text(params.label)
  return `A code cell running in the veyyon eval tool asks a sub-agent (kind "${kind}"${label === undefined ? "" : `, label ${JSON.stringify(label)}`}) to carry out the task in the user message, through its agent() call. Work the task through and answer with its final result only.` +
    schemaClause(params.schema)
}

const UNSUPPORTED_AGENT_OPTIONS = ["isolated", "apply", "merge"] as const

/** The question a `completion` or `agent` call asks (`answeredBy` names who answers, for the refusal), or the error its cell gets. */
export const modelQuestion = (method: string, params: unknown, answeredBy: string): Result.Result<ModelQuestion, AgentBridgeError> => {
  if (!isRecord(params)) return refused("ProtocolError", `${method}() sent params that are not an object`)
  const prompt = text(params.prompt)
  if (prompt === undefined) return refused("ProtocolError", `${method}() sent no prompt`)
  if (method === "agent") {
    const given = UNSUPPORTED_AGENT_OPTIONS.filter((name) => params[name] !== undefined && params[name] !== null && params[name] !== false)
    if (given.length > 0) {
      return refused(
        "AgentOptionUnsupported",
        `agent(${given.map((name) => `${name}=...`).join(", ")}) has no meaning when ${answeredBy} answers it (no sub-agent works in a checkout of yours); leave ${given.join(", ")} out`
      )
    }
  }
  const images = modelImages(params.images)
  if (Result.isFailure(images)) return refused("ProtocolError", `${method}(): ${images.failure}`)
  const asked = params.maxTokens
  const model = text(params.model)
  return Result.succeed({
    prompt,
    images: images.success,
    systemPrompt: systemPrompt(method, params),
    ...(model === undefined ? {} : { model }),
    ...(typeof asked === "number" && Number.isInteger(asked) && asked > 0 ? { maxTokens: Math.min(asked, MAX_MODEL_TOKENS) } : {})
  })
}

/** An image a call passes to the model. */
export interface ModelImage {
  readonly mimeType: "image/png" | "image/jpeg"
  /** Base64. */
  readonly data: string
}

/** The most images one call may pass. */
export const MAX_MODEL_IMAGES = 8

/** The largest image, in base64 characters (5 MiB of bytes). */
export const MAX_IMAGE_CHARS = Math.ceil((5 * 1024 * 1024) / 3) * 4

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

/** The images of a call's params, or the sentence saying which one is unfit. */
export const modelImages = (images: unknown): Result.Result<ReadonlyArray<ModelImage>, string> => {
  if (images === undefined || images === null) return Result.succeed([])
  if (!Array.isArray(images)) return Result.fail("images must be a list")
  if (images.length > MAX_MODEL_IMAGES) return Result.fail(`a call may pass at most ${MAX_MODEL_IMAGES} images, not ${images.length}`)
  const found: Array<ModelImage> = []
  for (const [index, image] of images.entries()) {
    const mimeType = isRecord(image) ? image.mimeType : undefined
    const data = isRecord(image) ? image.data : undefined
    if (mimeType !== "image/png" && mimeType !== "image/jpeg") return Result.fail(`images[${index}] must be a PNG or JPEG image`)
    if (typeof data !== "string" || data.length > MAX_IMAGE_CHARS || !BASE64.test(data)) {
      return Result.fail(`images[${index}] must be base64 of at most 5 MiB`)
    }
    found.push({ mimeType, data })
  }
  return Result.succeed(found)
}
