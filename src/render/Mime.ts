/**
 * MIME bundles (from `display()` and cell results) picked apart and rendered as text.
 *
 * Text precedence: `text/markdown`, then `text/plain`, then `text/html` converted to
 * basic Markdown (also when `text/plain` is only a default `<… object at 0x…>` repr). Alongside, `application/json` is kept as a JSON value, `image/png`
 * and `image/jpeg` as base64 payloads, `application/x-veyyon-status` as a status event.
 * A bundle without text falls back to its JSON, then image placeholders such as
 * `[image/png 640x480, 12.3 KB]`, then its status line, then a list of its MIME types.
 */
import { Option, Schema } from "effect"
import { STATUS_MIME, type MimeBundle } from "../kernel/Frame.ts"
import { htmlToMarkdown } from "./Html.ts"
import { cleanBase64, formatBytes, imageFacts } from "./ImageInfo.ts"
import { renderStatus, type StatusEvent } from "./Status.ts"

/** The image types kept as payloads. */
export const ImageMimeType = Schema.Literals(["image/png", "image/jpeg"])

/** The image types kept as payloads. */
export type ImageMimeType = typeof ImageMimeType.Type

/** An image from a bundle: its type and clean base64 data. */
export const ImagePayload = Schema.Struct({ mimeType: ImageMimeType, data: Schema.String })

/** An image from a bundle. */
export type ImagePayload = typeof ImagePayload.Type

/** Everything structured a bundle holds. */
export interface BundleContent {
  readonly text: Option.Option<string>
  readonly json: Option.Option<unknown>
  readonly images: ReadonlyArray<ImagePayload>
  readonly status: Option.Option<StatusEvent>
}

const IMAGE_TYPES: ReadonlyArray<ImageMimeType> = ["image/png", "image/jpeg"]

/** A text value as sent: a string, or a list of strings to concatenate (notebook style). */
const textValue = (value: unknown): string | undefined => {
  if (typeof value === "string") return value
  if (Array.isArray(value) && value.every((item) => typeof item === "string")) return value.join("")
  return undefined
}

/**
 * A default object repr, which names the object's type and nothing of its content:
 * Python's `<mod.Cls object at 0x…>`, IPython's `<mod.Cls at 0x…>`, `<IPython.core.display.HTML object>`.
 */
const DEFAULT_REPR = /^<[A-Za-z_][\w.]*(?: object(?: at 0x[0-9a-fA-F]+)?| at 0x[0-9a-fA-F]+)>$/

/** Whether a text/plain value is only a default object repr. */
export const isDefaultRepr = (plain: string): boolean => DEFAULT_REPR.test(plain.trim())

/**
 * The bundle's text by precedence: markdown, plain, then HTML as Markdown; HTML wins over a
 * plain text that is only a default object repr (an object that shows itself only as HTML).
 */
export const bundleText = (bundle: MimeBundle): Option.Option<string> => {
  const markdown = textValue(bundle["text/markdown"])
  if (markdown !== undefined) return Option.some(markdown)
  const plain = textValue(bundle["text/plain"])
  const html = textValue(bundle["text/html"])
  if (plain !== undefined && (html === undefined || !isDefaultRepr(plain))) return Option.some(plain)
  return html === undefined ? Option.none() : Option.some(htmlToMarkdown(html))
}

/** The bundle's `application/json` value, if it has one. */
export const bundleJson = (bundle: MimeBundle): Option.Option<unknown> =>
  Object.hasOwn(bundle, "application/json") ? Option.some(bundle["application/json"]) : Option.none()

/** The bundle's PNG and JPEG payloads, in that order. */
export const bundleImages = (bundle: MimeBundle): ReadonlyArray<ImagePayload> =>
  IMAGE_TYPES.flatMap((mimeType) => {
    const data = textValue(bundle[mimeType])
    return data === undefined || data.trim().length === 0 ? [] : [{ mimeType, data: cleanBase64(data) }]
  })

/** The bundle's status event, if it carries one with a string `op`. */
export const bundleStatus = (bundle: MimeBundle): Option.Option<StatusEvent> => {
  const status = bundle[STATUS_MIME]
  if (typeof status !== "object" || status === null || Array.isArray(status)) return Option.none()
  const { op, ...fields } = status as Record<string, unknown>
  return typeof op === "string" ? Option.some({ op, fields }) : Option.none()
}

/** Everything structured a bundle holds, at once. */
export const readBundle = (bundle: MimeBundle): BundleContent => ({
  text: bundleText(bundle),
  json: bundleJson(bundle),
  images: bundleImages(bundle),
  status: bundleStatus(bundle)
})

/** A short stand-in for an image: `[image/png 640x480, 12.3 KB]`, or `[image/jpeg, 12.3 KB]` when the size is unknown. */
export const imagePlaceholder = (image: ImagePayload): string => {
  const facts = imageFacts(image.mimeType, image.data)
  const dimensions = facts.width !== undefined && facts.height !== undefined ? ` ${facts.width}x${facts.height}` : ""
  return `[${image.mimeType}${dimensions}, ${formatBytes(facts.byteLength)}]`
}

const jsonText = (value: unknown): string => {
  try {
    return JSON.stringify(value, null, 2) ?? String(value)
  } catch {
    return String(value)
  }
}

/** The text a bundle shows as; empty only for a bundle that holds nothing to show (image payloads are read only when it has no text or JSON). */
export const renderBundle = (bundle: MimeBundle): string => {
  const text = bundleText(bundle)
  if (Option.isSome(text)) return text.value
  const json = bundleJson(bundle)
  if (Option.isSome(json)) return jsonText(json.value)
  const images = bundleImages(bundle)
  if (images.length > 0) return images.map(imagePlaceholder).join("\n")
  const status = bundleStatus(bundle)
  if (Option.isSome(status)) return Option.getOrElse(renderStatus(status.value), () => "")
  const types = Object.keys(bundle)
  return types.length === 0 ? "" : `[display: ${types.join(", ")}]`
}
