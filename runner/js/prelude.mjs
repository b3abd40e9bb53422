/**
 * veyyon JavaScript prelude: the helpers every Node kernel starts with.
 *
 * Plain ESM, Node 22.19+, no dependencies. runner.mjs imports it and binds the public names
 * into the cells' global scope; imported any other way it only defines things (kv then
 * works without a kernel, writing the files itself; the bridge helpers need the runtime
 * runner.mjs passes in).
 *
 * Public names (globals in a kernel):
 *   kv.set(key, value) -> Promise<void>, kv.get(key, fallback?) -> value | fallback | undefined,
 *   kv.has(key), kv.list() -> string[], kv.delete(key) -> Promise<boolean>
 *   defs() -> Definitions                       name -> shape, sorted, at most 200
 *   env(key?, value?)                           all variables, one, or set one (printing it)
 *   agent(prompt, {agent, model, label, schema, handle, isolated, apply, merge, images}?) -> Promise
 *   completion(prompt, {model, schema, images}?) -> Promise   images: PNG/JPEG Buffers the model sees
 *   input(prompt?) -> Promise<string>           a line the host asks a person for (one "input"
 *                                               bridge call); rejects with EOFError when none comes
 *
 * agent() and completion() send the same bridge frames and params as the Python prelude
 * (method "agent" | "completion", missing options as null) and read the answer the same
 * way: a bare string is {"text": it}; with a schema, an "output" that is not a string is
 * the structured answer, otherwise "text" is parsed as JSON (one surrounding ``` fence
 * allowed), and either is checked against the schema's type/enum/properties/required/items.
 * Run several at once with Promise.all; each call pauses the cell's watchdog on its own.
 *
 * kv files are the Python prelude's, so either runtime reads what the other wrote:
 *   $VEYYON_ARTIFACTS_DIR/kv/<lowercase hex SHA-256 of the key's UTF-8>.json holding
 *   {"key": <key>, "value": <value>} as compact UTF-8 JSON, written to a ".<name>.<unique>.tmp"
 *   file in the same directory (created exclusively, mode 0600) and renamed into place. In a
 *   kernel the host does the writing: kv.set and kv.delete send one "kv" bridge call
 *   ({op: "set", key, value: <the value's JSON text>} or {op: "delete", key}), the host checks
 *   the limits for the whole store, and the returned Promise settles with its answer (await
 *   it to read the new value back in the same cell; the cell does not end before it settles).
 *   Reads come straight from the files, unless VEYYON_KV_READS=host is in the environment (the
 *   host sets it when the store is not these files, e.g. a cluster's database): then kv.get,
 *   kv.has and kv.list are "kv" bridge calls ({op: "get", key} answers the value's JSON text or
 *   null, {op: "list"} the keys sorted by code point) and return Promises; `await kv.get(key)`
 *   works in both modes. Keys have 1-256 code points without
 *   "/", "\" or NUL; one value's JSON is at most 256 KiB, all entries together at most 4 MiB.
 *   Values must be plain JSON: objects, arrays, strings, finite numbers, booleans, null.
 */
import { createHash, randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import * as util from "node:util"

/** The most names defs() lists. */
export const DEFS_LIMIT = 200
/** The longest kv key, in code points. */
export const KV_KEY_MAX = 256
/** The most bytes one kv value's JSON may have (256 KiB). */
export const KV_VALUE_MAX = 256 * 1024
/** The most bytes all kv entry files together may have (4 MiB). */
export const KV_STORE_MAX = 4 * 1024 * 1024
/** The scheme of the handle agent(..., { handle: true }) returns. */
export const AGENT_SCHEME = "agent://"

const KV_FILE = /^[0-9a-f]{64}\.json$/
const FENCE = /^```[\w+-]*[ \t]*\n([\s\S]*?)\n?```$/
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/
const JSON_TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"]

const clip = (text, limit) => {
  const flat = String(text).split(/\s+/).filter(Boolean).join(" ")
  return flat.length <= limit ? flat : flat.slice(0, limit - 3) + "..."
}

const shortJson = (value) => {
  try {
    return clip(JSON.stringify(value) ?? String(value), 60)
  } catch {
    return clip(util.inspect(value), 60)
  }
}

// ---------------------------------------------------------------------------
// Plain JSON values

/** Why value is not plain JSON (with the path to the offending part), or undefined when it is. */
export const jsonProblem = (value, where = "value", seen = new Set()) => {
  if (value === null || typeof value === "string" || typeof value === "boolean") return undefined
  if (typeof value === "number") return Number.isFinite(value) ? undefined : `${where} is ${value}, which JSON cannot hold`
  if (typeof value !== "object") return `${where} is ${typeof value === "bigint" ? "a bigint" : typeof value === "undefined" ? "undefined" : `a ${typeof value}`}, which is not JSON`
  if (seen.has(value)) return `${where} refers back to itself`
  seen.add(value)
  try {
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index++) {
        const problem = jsonProblem(value[index], `${where}[${index}]`, seen)
        if (problem !== undefined) return problem
      }
      return undefined
    }
    const proto = Object.getPrototypeOf(value)
    if (proto !== Object.prototype && proto !== null && Object.getPrototypeOf(proto) !== null) {
      const name = value.constructor?.name ?? "object"
      return `${where} is a ${name}, not a plain object (convert it first, e.g. a Date with toISOString())`
    }
    for (const key of Object.keys(value)) {
      const problem = jsonProblem(value[key], IDENTIFIER.test(key) ? `${where}.${key}` : `${where}[${JSON.stringify(key)}]`, seen)
      if (problem !== undefined) return problem
    }
    return undefined
  } finally {
    seen.delete(value)
  }
}

const requireJson = (name, value) => {
  const problem = jsonProblem(value, name)
  if (problem !== undefined) throw new TypeError(`${problem}; ${name} must be JSON (objects, arrays, strings, finite numbers, booleans, null)`)
}

// ---------------------------------------------------------------------------
// kv

/** Throws unless key is a legal kv key (1-256 code points, no "/", "\" or NUL, well-formed Unicode). */
export const checkKvKey = (key) => {
  if (typeof key !== "string") throw new TypeError(`kv keys are strings, not ${key === null ? "null" : typeof key}`)
  const length = [...key].length
  if (length < 1 || length > KV_KEY_MAX) throw new RangeError(`kv keys have 1 to ${KV_KEY_MAX} characters; this one has ${length}`)
  for (const [bad, name] of [["/", '"/"'], ["\\", '"\\"'], ["\0", "NUL"]]) {
    if (key.includes(bad)) throw new RangeError(`kv keys may not contain ${name}: ${JSON.stringify(clip(key, 60))}`)
  }
  if (!key.isWellFormed()) throw new RangeError(`kv keys must be valid Unicode (no lone surrogates): ${JSON.stringify(clip(key, 60))}`)
}

/** The file name that holds key: hex SHA-256 of its UTF-8 bytes plus ".json". */
export const kvFileName = (key) => createHash("sha256").update(key, "utf8").digest("hex") + ".json"

/** The compact UTF-8 JSON of value; throws when it is not JSON or over 256 KiB. */
export const encodeKvValue = (key, value) => {
  const problem = jsonProblem(value)
  if (problem !== undefined) throw new TypeError(`kv values must be JSON (objects, arrays, strings, finite numbers, booleans, null): ${problem}`)
  const data = Buffer.from(JSON.stringify(value), "utf8")
  if (data.length > KV_VALUE_MAX) {
    throw new RangeError(`kv value for ${JSON.stringify(clip(key, 60))} encodes to ${data.length} bytes; one value may have at most ${KV_VALUE_MAX} (256 KiB)`)
  }
  return data
}

/** The bytes of key's file: {"key":key,"value":value} as compact UTF-8 JSON; throws when value is not JSON or too big. */
export const encodeKvEntry = (key, value) =>
  Buffer.concat([Buffer.from(`{"key":${JSON.stringify(key)},"value":`, "utf8"), encodeKvValue(key, value), Buffer.from("}")])

/** The [key, value] a kv file holds; throws when it is not an entry (for key, when given). */
export const decodeKvEntry = (data, key) => {
  let entry
  try {
    entry = JSON.parse(data.toString("utf8"))
  } catch (error) {
    throw new Error(`kv entry is not JSON: ${error.message}`)
  }
  if (entry === null || typeof entry !== "object" || Array.isArray(entry) || typeof entry.key !== "string" || !("value" in entry)) {
    throw new Error('kv entry is not an object with "key" and "value"')
  }
  if (key !== undefined && entry.key !== key) {
    throw new Error(`kv entry holds key ${JSON.stringify(clip(entry.key, 60))}, not ${JSON.stringify(clip(key, 60))}`)
  }
  return [entry.key, entry.value]
}

/** $VEYYON_ARTIFACTS_DIR/kv; throws when the host did not set VEYYON_ARTIFACTS_DIR. */
export const kvDirectory = () => {
  const root = process.env.VEYYON_ARTIFACTS_DIR
  if (!root) throw new Error("kv needs VEYYON_ARTIFACTS_DIR, the session's artifacts directory, and it is not set")
  return path.join(root, "kv")
}

const entryNames = (directory) => {
  try {
    return fs.readdirSync(directory).filter((name) => KV_FILE.test(name))
  } catch (error) {
    if (error.code === "ENOENT") return []
    throw error
  }
}

const storeSize = (directory, skip) => {
  let total = 0
  for (const name of entryNames(directory)) {
    if (name === skip) continue
    try {
      total += fs.statSync(path.join(directory, name)).size
    } catch (error) {
      if (error.code !== "ENOENT") throw error
    }
  }
  return total
}

const writeAtomically = (directory, name, data) => {
  const temp = path.join(directory, `.${name}.${process.pid}-${randomBytes(6).toString("hex")}.tmp`)
  try {
    fs.writeFileSync(temp, data, { flag: fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | (fs.constants.O_NOFOLLOW ?? 0), mode: 0o600 })
    fs.renameSync(temp, path.join(directory, name))
  } catch (error) {
    fs.rmSync(temp, { force: true })
    throw error
  }
}

const MISSING = Symbol("missing")

/** Whether kv reads go to the host (VEYYON_KV_READS=host) instead of the files. */
const hostReads = () => process.env.VEYYON_KV_READS === "host"

const readEntry = (file, key) => {
  let data
  try {
    data = fs.readFileSync(file)
  } catch (error) {
    if (error.code === "ENOENT") return MISSING
    throw error
  }
  try {
    return decodeKvEntry(data, key)[1]
  } catch (error) {
    throw new Error(`kv entry for ${JSON.stringify(clip(key, 60))} is damaged (${error.message})`)
  }
}

/** JSON values under $VEYYON_ARTIFACTS_DIR/kv/, one file per key: they outlive the kernel and are shared with Python cells. */
export class KvStore {
  #host

  /** host(params) -> Promise: sends a kv call to the host; without it the store writes the files itself. */
  constructor(host) {
    this.#host = host
  }

  /** The host's answer to a kv read; throws outside a kernel, where there is no host to ask. */
  #hostRead(params) {
    if (this.#host === undefined) throw new Error("kv reads go to the host (VEYYON_KV_READS=host), and there is no kernel host to ask")
    return this.#host(params)
  }

  /** Stores value (JSON) under key, replacing what was there; in a kernel, a Promise of the host's write. */
  set(key, value) {
    checkKvKey(key)
    if (this.#host !== undefined) {
      const json = encodeKvValue(key, value).toString("utf8")
      return this.#host({ op: "set", key, value: json }).then(() => undefined)
    }
    const data = encodeKvEntry(key, value)
    const directory = kvDirectory()
    fs.mkdirSync(directory, { recursive: true, mode: 0o700 })
    const name = kvFileName(key)
    const used = storeSize(directory, name)
    if (used + data.length > KV_STORE_MAX) {
      throw new RangeError(`kv store is full: ${used} bytes stored, ${data.length} more would pass its ${KV_STORE_MAX}-byte (4 MiB) limit; kv.delete() keys you no longer need`)
    }
    writeAtomically(directory, name, data)
  }

  /** The value stored under key (a fresh copy), or fallback (undefined unless given) when there is none. */
  get(key, fallback) {
    checkKvKey(key)
    if (hostReads()) return this.#hostRead({ op: "get", key }).then((text) => (text === null ? fallback : JSON.parse(text)))
    const value = readEntry(path.join(kvDirectory(), kvFileName(key)), key)
    return value === MISSING ? fallback : value
  }

  /** Whether key holds a value. */
  has(key) {
    checkKvKey(key)
    if (hostReads()) return this.#hostRead({ op: "get", key }).then((text) => text !== null)
    return readEntry(path.join(kvDirectory(), kvFileName(key)), key) !== MISSING
  }

  /** The stored keys, sorted by code point. */
  list() {
    if (hostReads()) return this.#hostRead({ op: "list" }).then((keys) => [...keys])
    const directory = kvDirectory()
    const keys = []
    for (const name of entryNames(directory)) {
      try {
        keys.push(decodeKvEntry(fs.readFileSync(path.join(directory, name)))[0])
      } catch {
        continue
      }
    }
    return keys.sort((a, b) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")))
  }

  /** Removes key; true when it was stored (in a kernel, a Promise of that answer). */
  delete(key) {
    checkKvKey(key)
    if (this.#host !== undefined) return this.#host({ op: "delete", key }).then((answer) => answer === true)
    try {
      fs.unlinkSync(path.join(kvDirectory(), kvFileName(key)))
      return true
    } catch (error) {
      if (error.code === "ENOENT") return false
      throw error
    }
  }

  [util.inspect.custom]() {
    if (hostReads()) return "<kv store: read through the host; await kv.list()>"
    let count
    try {
      count = this.list().length
    } catch {
      return "<kv store: VEYYON_ARTIFACTS_DIR is not set>"
    }
    return `<kv store: ${count} key${count === 1 ? "" : "s"}>`
  }
}

// ---------------------------------------------------------------------------
// JSON Schema subset for structured answers: type, enum, properties, required, items

/** An answer that is not valid JSON or not of the schema's shape; .text holds the raw answer. */
export class SchemaError extends Error {
  constructor(message, text, problem) {
    super(message)
    this.name = "SchemaError"
    this.text = text
    this.problem = problem
  }
}

/** The JSON Schema type name of a decoded JSON value. */
export const jsonType = (value) => {
  if (value === null) return "null"
  if (Array.isArray(value)) return "array"
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number"
  return typeof value
}

const typeMatches = (value, name) => {
  const actual = jsonType(value)
  return actual === name || (name === "number" && actual === "integer")
}

const jsonEqual = (a, b) => {
  const kind = jsonType(a)
  if (kind === "array") return Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]))
  if (kind === "object") {
    if (jsonType(b) !== "object") return false
    const keys = Object.keys(a)
    return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key], b[key]))
  }
  return a === b
}

const memberPath = (where, name) => (IDENTIFIER.test(name) ? `${where}.${name}` : `${where}[${JSON.stringify(name)}]`)

/** The first way value breaks schema, as "path: what is wrong", or undefined when it fits. */
export const schemaProblem = (value, schema, where = "$") => {
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) return undefined
  if (schema.type !== undefined) {
    const names = typeof schema.type === "string" ? [schema.type] : [...schema.type]
    if (!names.some((name) => typeMatches(value, name))) return `${where}: expected ${names.join(" or ")}, got ${jsonType(value)}`
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => jsonEqual(value, option))) {
    return `${where}: ${shortJson(value)} is not one of ${shortJson(schema.enum)}`
  }
  if (jsonType(value) === "object") {
    for (const name of Array.isArray(schema.required) ? schema.required : []) {
      if (!Object.hasOwn(value, name)) return `${where}: missing required property ${JSON.stringify(name)}`
    }
    const properties = schema.properties
    if (properties !== null && typeof properties === "object") {
      for (const [name, sub] of Object.entries(properties)) {
        if (!Object.hasOwn(value, name)) continue
        const problem = schemaProblem(value[name], sub, memberPath(where, name))
        if (problem !== undefined) return problem
      }
    }
  }
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const sub = Array.isArray(schema.items) ? schema.items[index] : schema.items
      const problem = schemaProblem(value[index], sub, `${where}[${index}]`)
      if (problem !== undefined) return problem
    }
  }
  return undefined
}

const checkSchemaArgument = (schema) => {
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) {
    throw new TypeError(`schema must be a JSON Schema object, not ${shortJson(schema)}`)
  }
  requireJson("schema", schema)
  const names = typeof schema.type === "string" ? [schema.type] : schema.type
  if (names !== undefined && (!Array.isArray(names) || names.some((name) => !JSON_TYPES.includes(name)))) {
    throw new TypeError(`schema type must be one of ${JSON_TYPES.join(", ")} (or a list of them), got ${shortJson(schema.type)}`)
  }
}

/** Decodes text as JSON, allowing one surrounding ``` fence; SchemaError when it is not JSON. */
export const parseJsonAnswer = (text, what = "the answer") => {
  let body = text.trim()
  const fenced = body.startsWith("```") ? FENCE.exec(body) : null
  if (fenced !== null) body = fenced[1].trim()
  try {
    return JSON.parse(body)
  } catch (error) {
    throw new SchemaError(`${what} is not valid JSON (${error.message}); it begins ${JSON.stringify(clip(text, 80))}`, text, error.message)
  }
}

const structuredAnswer = (answer, schema, what) => {
  const output = answer.output
  const data = output !== undefined && output !== null && typeof output !== "string" ? output : parseJsonAnswer(answer.text, what)
  const problem = schemaProblem(data, schema)
  if (problem !== undefined) throw new SchemaError(`${what} does not match the schema: ${problem}`, answer.text, problem)
  return data
}

// ---------------------------------------------------------------------------
// agent() and completion()

const requireText = (name, value, optional = false) => {
  if ((value === undefined || value === null) && optional) return
  if (typeof value !== "string" || value.trim() === "") {
    throw new TypeError(`${name} must be ${optional ? "undefined or " : ""}a non-empty string, not ${clip(util.inspect(value), 40)}`)
  }
}

const requireFlag = (name, value) => {
  if (value !== undefined && value !== null && typeof value !== "boolean") {
    throw new TypeError(`${name} must be true, false or undefined, not ${clip(util.inspect(value), 40)}`)
  }
}

const requireOptions = (fn, options, known) => {
  if (options === undefined) return {}
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError(`${fn}() takes its options as an object, e.g. ${fn}("...", { ${known[0]}: ... })`)
  }
  const unknown = Object.keys(options).filter((name) => !known.includes(name))
  if (unknown.length > 0) throw new TypeError(`${fn}() has no option ${unknown.map((n) => JSON.stringify(n)).join(", ")}; it takes ${known.join(", ")}`)
  return options
}

const orNull = (value) => (value === undefined ? null : value)

/** The most images one agent()/completion() call may pass, and the largest one, in bytes. */
export const IMAGES_LIMIT = 8
export const IMAGE_BYTES_MAX = 5 * 1024 * 1024

const imageMime = (bytes) => {
  if (bytes.length >= 8 && bytes[0] === 0x89 && bytes[1] === 0x50 && bytes[2] === 0x4e && bytes[3] === 0x47) return "image/png"
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return "image/jpeg"
  return undefined
}

/** The "images" param for PNG or JPEG bytes (Buffers, Uint8Arrays), or undefined when none were given. */
export const imagesParam = (images) => {
  if (images === undefined || images === null) return undefined
  const list = Array.isArray(images) ? images : [images]
  if (list.length > IMAGES_LIMIT) throw new RangeError(`a call may pass at most ${IMAGES_LIMIT} images, not ${list.length}`)
  return list.map((image, index) => {
    if (!(image instanceof Uint8Array)) throw new TypeError(`images[${index}] must be PNG or JPEG bytes (a Buffer or Uint8Array), not ${clip(util.inspect(image), 40)}`)
    const mimeType = imageMime(image)
    if (mimeType === undefined) throw new TypeError(`images[${index}] is bytes that are neither PNG nor JPEG`)
    if (image.length > IMAGE_BYTES_MAX) throw new RangeError(`images[${index}] is larger than ${IMAGE_BYTES_MAX / (1024 * 1024)} MiB`)
    return { mimeType, data: Buffer.from(image.buffer, image.byteOffset, image.byteLength).toString("base64") }
  })
}

/** Builds agent(), completion(), defs() and env() over the kernel runtime runner.mjs provides. */
export const createPrelude = (runtime) => {
  const readAnswer = (method, value) => {
    if (typeof value === "string") return { text: value }
    if (value !== null && typeof value === "object" && typeof value.text === "string") return value
    throw runtime.bridgeError(
      "ProtocolError",
      `the host answered ${method}() with ${shortJson(value)}; expected a string or an object with a "text" string`
    )
  }

  const AGENT_OPTIONS = ["agent", "model", "label", "schema", "handle", "isolated", "apply", "merge", "images"]

  /** Runs one subagent on the host; resolves to its final text (schema: the parsed object; handle: a node object). */
  async function agent(prompt, options) {
    const given = requireOptions("agent", options, AGENT_OPTIONS)
    const name = given.agent ?? "deep"
    requireText("prompt", prompt)
    requireText("agent", name)
    requireText("model", given.model, true)
    requireText("label", given.label, true)
    if (given.schema !== undefined && given.schema !== null) checkSchemaArgument(given.schema)
    if (given.handle !== undefined && typeof given.handle !== "boolean") throw new TypeError(`handle must be true or false, not ${clip(util.inspect(given.handle), 40)}`)
    requireFlag("isolated", given.isolated)
    requireFlag("apply", given.apply)
    if (given.merge !== undefined && given.merge !== null && typeof given.merge !== "string" && typeof given.merge !== "boolean") {
      throw new TypeError(`merge must be a string, a boolean or undefined, not ${typeof given.merge}`)
    }
    const schema = orNull(given.schema)
    const params = {
      prompt,
      agent: name,
      model: orNull(given.model),
      label: orNull(given.label),
      schema,
      isolated: orNull(given.isolated),
      apply: orNull(given.apply),
      merge: orNull(given.merge)
    }
    const images = imagesParam(given.images)
    if (images !== undefined) params.images = images
    const answer = readAnswer("agent", await runtime.bridgeCall("agent", params))
    const data = schema === null ? MISSING : structuredAnswer(answer, schema, "agent() output")
    if (given.handle !== true) return data === MISSING ? answer.text : data
    const id = answer.id
    const node = {
      text: answer.text,
      output: answer.output === undefined ? answer.text : answer.output,
      handle: id === undefined || id === null || id === "" ? null : AGENT_SCHEME + String(id),
      id: orNull(id),
      agent: answer.agent || name
    }
    if (data !== MISSING) node.data = data
    return node
  }

  /** Asks the host's model for one completion; resolves to its text (with schema, the parsed object). */
  async function completion(prompt, options) {
    const given = requireOptions("completion", options, ["model", "schema", "images"])
    requireText("prompt", prompt)
    requireText("model", given.model, true)
    if (given.schema !== undefined && given.schema !== null) checkSchemaArgument(given.schema)
    const schema = orNull(given.schema)
    const images = imagesParam(given.images)
    const params = { prompt, model: orNull(given.model), schema, ...(images === undefined ? {} : { images }) }
    const answer = readAnswer("completion", await runtime.bridgeCall("completion", params))
    return schema === null ? answer.text : structuredAnswer(answer, schema, "completion() output")
  }

  /** Names your cells defined (sorted, at most 200), each with a short shape of its value. */
  function defs() {
    const names = runtime.userNames()
    const shown = new Definitions()
    for (const name of names.slice(0, DEFS_LIMIT)) shown[name] = valueShape(runtime.userValue(name))
    Object.defineProperty(shown, "omitted", { value: Math.max(0, names.length - DEFS_LIMIT) })
    return shown
  }

  /** Every variable (no key), one variable's value (key), or sets key to value and prints it. */
  function env(key, value) {
    if (key === undefined || key === null) {
      if (value !== undefined) throw new TypeError("env() needs a key to set a value")
      return { ...process.env }
    }
    if (typeof key !== "string" || key === "" || key.includes("=") || key.includes("\0")) {
      throw new TypeError(`environment variable names are non-empty strings without "=" or NUL, not ${clip(util.inspect(key), 40)}`)
    }
    if (value === undefined) {
      if (!Object.hasOwn(process.env, key)) throw new Error(`environment variable ${key} is not set`)
      return process.env[key]
    }
    process.env[key] = String(value)
    runtime.print(`env: ${key}=${value}\n`)
  }

  const kvCall = (params) => {
    const call = runtime.bridgeCall("kv", params).catch((error) => {
      if (error?.code === "KvInvalid" || error?.code === "KvStoreFull") throw new RangeError(error.reason)
      throw error
    })
    runtime.settleBeforeDone(call)
    return call.then((answer) => answer)
  }

  /** Asks the host for a line (a person answers, through MCP elicitation); the prompt and the line are echoed as a terminal shows them. */
  async function input(prompt = "") {
    if (typeof prompt !== "string") throw new TypeError(`input() takes a string prompt, not ${clip(util.inspect(prompt), 40)}`)
    if (prompt !== "") runtime.print(prompt)
    let line
    try {
      line = await runtime.bridgeCall("input", { prompt })
    } catch (error) {
      if (error?.code === "EOFError") throw new EOFError(error.reason)
      throw error
    }
    const text = typeof line === "string" ? line : ""
    runtime.print(`${text}\n`)
    return text
  }

  return { kv: new KvStore(kvCall), defs, env, agent, completion, input, EOFError }
}

/** input() found no line: nobody answered, or the person declined. */
export class EOFError extends Error {
  constructor(message) {
    super(message)
    this.name = "EOFError"
  }
}

// ---------------------------------------------------------------------------
// defs() shapes

/** What defs() returns: name -> shape in name order; shown as one "name: shape" line each. */
export class Definitions {
  [util.inspect.custom]() {
    const lines = Object.entries(this).map(([name, shape]) => `${name}: ${shape}`)
    if (this.omitted > 0) lines.push(`... and ${this.omitted} more`)
    return lines.length > 0 ? lines.join("\n") : "(no user definitions)"
  }

  toString() {
    return this[util.inspect.custom]()
  }
}

const parameters = (fn) => {
  try {
    const source = Function.prototype.toString.call(fn)
    const arrow = /^(?:async\s*)?([A-Za-z_$][\w$]*)\s*=>/.exec(source)
    if (arrow !== null) return `(${arrow[1]})`
    const open = source.indexOf("(")
    if (open < 0) return "(...)"
    let depth = 0
    for (let index = open; index < source.length; index++) {
      const char = source[index]
      if (char === "(") depth++
      else if (char === ")" && --depth === 0) return `(${clip(source.slice(open + 1, index), 56)})`
    }
  } catch {
    // a proxy or host function without readable source
  }
  return "(...)"
}

const isClass = (fn) => {
  try {
    return /^class\b/.test(Function.prototype.toString.call(fn))
  } catch {
    return false
  }
}

const sizeOf = (value) => {
  if (Array.isArray(value) || ArrayBuffer.isView(value)) return value.length ?? value.byteLength
  if (value instanceof Map || value instanceof Set) return value.size
  if (value instanceof ArrayBuffer) return value.byteLength
  return undefined
}

/** A short description of value: function(a, b), Array[3], number = 5, Map[2], class, Object[4]. */
export const valueShape = (value) => {
  try {
    if (value === null) return "null"
    switch (typeof value) {
      case "undefined":
        return "undefined"
      case "function": {
        if (isClass(value)) return "class"
        const kind = util.types.isAsyncFunction(value) ? "async function" : util.types.isGeneratorFunction(value) ? "function*" : "function"
        return kind + parameters(value)
      }
      case "number":
      case "boolean":
      case "bigint":
        return `${typeof value} = ${clip(util.inspect(value), 40)}`
      case "string":
        return `string[${value.length}]`
      case "symbol":
        return "symbol"
    }
    if (util.types.isModuleNamespaceObject(value)) return "module"
    if (util.types.isPromise(value)) return "Promise"
    const name = value.constructor?.name ?? "Object"
    const size = sizeOf(value)
    if (size !== undefined) return `${name}[${size}]`
    const proto = Object.getPrototypeOf(value)
    if (proto === Object.prototype || proto === null) return `Object[${Object.keys(value).length}]`
    return name
  } catch {
    return "object"
  }
}
