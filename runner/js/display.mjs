/** MIME bundles, display() and status events. */
import * as util from "node:util"
import { STATUS_MIME, send, state } from "./protocol.mjs"

/** The method a value defines to give display() its own MIME bundle. */
export const MIME_HOOK = Symbol.for("veyyon.mimebundle")

const MAX_PLAIN_CHARS = 1_000_000

const IMAGE_MIMES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"])

/** Sends a status event: a display frame with an application/x-veyyon-status bundle. */
export const emitStatus = (op, fields = {}, requestId = state.currentId) => {
  if (requestId === null) return
  send({ type: "display", id: requestId, bundle: { [STATUS_MIME]: { op, ...fields } } })
}

// MIME bundles and display()

export const plainText = (value) => {
  let text
  try {
    text = util.inspect(value)
  } catch (error) {
    text = `<${typeof value}; util.inspect threw ${error?.name ?? "an error"}>`
  }
  if (text.length > MAX_PLAIN_CHARS) {
    text = `${text.slice(0, MAX_PLAIN_CHARS)}… [${text.length - MAX_PLAIN_CHARS} characters omitted]`
  }
  return text
}

const isBytes = (value) => value instanceof Uint8Array || value instanceof ArrayBuffer

const toBuffer = (value) => (value instanceof ArrayBuffer ? Buffer.from(value) : Buffer.from(value.buffer, value.byteOffset, value.byteLength))

const normalizeMime = (mime, value) => {
  if (value === null || value === undefined) return undefined
  if (IMAGE_MIMES.has(mime)) {
    if (isBytes(value)) return toBuffer(value).toString("base64")
    return typeof value === "string" ? value : undefined
  }
  if (typeof value === "string") return value
  if (isBytes(value)) return toBuffer(value).toString("utf8")
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "object") {
    try {
      const text = JSON.stringify(value)
      return text === undefined ? undefined : JSON.parse(text)
    } catch {
      return undefined
    }
  }
  return undefined
}

const addEntries = (bundle, data) => {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return
  for (const [mime, value] of Object.entries(data)) {
    const normalized = normalizeMime(mime, value)
    if (normalized !== undefined) bundle[mime] = normalized
  }
}

/** The MIME bundle for value: its mimebundle hook's entries, always with text/plain. */
export const mimeBundle = (value) => {
  const bundle = {}
  if ((typeof value === "object" && value !== null) || typeof value === "function") {
    let hook
    try {
      hook = typeof value[MIME_HOOK] === "function" ? value[MIME_HOOK] : typeof value.toMIMEBundle === "function" ? value.toMIMEBundle : undefined
    } catch {
      hook = undefined
    }
    if (hook !== undefined) {
      try {
        addEntries(bundle, hook.call(value))
      } catch {
        // a failing hook falls back to text/plain, as a failing _repr_*_ does in Python
      }
    }
  }
  if (typeof bundle["text/plain"] !== "string") bundle["text/plain"] = plainText(value)
  return bundle
}

const emitDisplay = (bundle) => {
  if (state.currentId === null) return
  send({ type: "display", id: state.currentId, bundle })
}

const isOptions = (value) =>
  value !== null && typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype &&
  Object.keys(value).length > 0 && Object.keys(value).every((key) => key === "raw")

/** Shows each value as a display frame; with a trailing {raw: true} each value already is a MIME bundle. */
export function display(...values) {
  const options = values.length > 1 && isOptions(values[values.length - 1]) ? values.pop() : {}
  for (const value of values) {
    if (options.raw === true) {
      if (value === null || typeof value !== "object" || Array.isArray(value)) {
        throw new TypeError("display(bundle, { raw: true }) takes objects mapping MIME types to values, e.g. { \"text/html\": \"<b>hi</b>\" }")
      }
      const bundle = {}
      addEntries(bundle, value)
      emitDisplay(bundle)
    } else {
      emitDisplay(mimeBundle(value))
    }
  }
}

const sniffImage = (bytes) => (bytes[0] === 0xff && bytes[1] === 0xd8 ? "image/jpeg" : bytes[0] === 0x47 && bytes[1] === 0x49 ? "image/gif" : "image/png")

display.html = (html) => emitDisplay({ "text/html": String(html) })
display.markdown = (markdown) => emitDisplay({ "text/markdown": String(markdown), "text/plain": String(markdown) })
display.image = (data, mime) => {
  if (!isBytes(data) && typeof data !== "string") throw new TypeError("display.image() takes a Buffer, a Uint8Array or a base64 string")
  const bytes = typeof data === "string" ? Buffer.from(data, "base64") : toBuffer(data)
  const type = mime ?? sniffImage(bytes)
  emitDisplay({ [type]: bytes.toString("base64"), "text/plain": `<${type} image, ${bytes.length} bytes>` })
}

// ---------------------------------------------------------------------------
