/**
 * Snapshots and restores of the session's user state (PROTOCOL.md, "Snapshots and restores").
 *
 * What is saved: every user binding (never the prelude's or the runner's): top-level
 * let/const/var and globals a cell assigned, with their kind, so a restored const stays
 * const. Functions and classes come back from their source when that is sound (a top-level
 * definition, closing over nothing but the script and global scopes); data values travel in
 * one v8 serialization (one memo, so two names bound to one object come back as one
 * object), and an instance of a class defined in a cell gets its prototype back. Beside the
 * names: the working directory and the environment variables that differ from the
 * environment after init.
 *
 * The payload: "VEYYONJS", the format version (uint32 BE), the header's length (uint32 BE),
 * the header (JSON: definitions with their source, the values' names and kinds in the order
 * of the v8 data, the names left out and why, cwd, env, the v8 data's SHA-256), then the v8
 * data (Node's default serializer): a header, each value, then the prototype fix-ups
 * ([object, class name or null, value index] triples).
 */
import { createHash } from "node:crypto"
import { EventEmitter } from "node:events"
import * as net from "node:net"
import * as timers from "node:timers"
import * as util from "node:util"
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { send, state } from "./protocol.mjs"
import { IDENTIFIER, evaluateInReplScope, functionScopes, lexicalNames, loadedModules, userNames } from "./execution.mjs"

const MAGIC = Buffer.from("VEYYONJS", "latin1")
export const FORMAT_VERSION = 1
const CHUNK_BYTES = 4 * 1024 * 1024
/** Bytes of header kept free for each name a payload lists (its kind, or its reason for being left out). */
const HEADER_ROOM = 256
const RESTORING = Symbol.for("veyyon.restoring")

/**
 * A size as people read it: binary units with one decimal, a trailing ".0" dropped
 * (`512 bytes`, `1.5 KiB`, `256 MiB`, `1.2 GiB`). The Ruby runner writes the same.
 */
export const readableSize = (bytes) => {
  if (bytes < 1024) return `${bytes} bytes`
  const units = ["KiB", "MiB", "GiB", "TiB"]
  let value = bytes / 1024
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return `${value.toFixed(1).replace(/\.0$/, "")} ${units[unit]}`
}

// ---------------------------------------------------------------------------
// The environment the user changed

let envBaseline = { ...process.env }

/** The environment as init left it: what a snapshot's env is measured against. */
export const markEnvironmentBaseline = () => {
  envBaseline = { ...process.env }
}

const environmentChanges = () => {
  const set = {}
  const unset = []
  for (const key of Object.keys(process.env).sort()) if (process.env[key] !== envBaseline[key]) set[key] = process.env[key]
  for (const key of Object.keys(envBaseline).sort()) if (!(key in process.env)) unset.push(key)
  return { set, unset }
}

// ---------------------------------------------------------------------------
// What a value holds that cannot be saved

const typedArrayPrototype = Object.getPrototypeOf(Int8Array.prototype)

/** Prototypes v8's serializer carries itself, with how to walk what they hold. */
const BUILTIN = new Map([
  [Object.prototype, "keys"],
  [Array.prototype, "keys"],
  [Map.prototype, "map"],
  [Set.prototype, "set"],
  [Date.prototype, "leaf"],
  [RegExp.prototype, "leaf"],
  [Boolean.prototype, "leaf"],
  [Number.prototype, "leaf"],
  [String.prototype, "leaf"],
  [BigInt.prototype, "leaf"],
  [ArrayBuffer.prototype, "leaf"],
  [DataView.prototype, "leaf"],
  [Buffer.prototype, "leaf"],
  [Error.prototype, "leaf"],
  ...[EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError].map((type) => [type.prototype, "leaf"]),
  ...[Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array, Float64Array, BigInt64Array, BigUint64Array]
    .map((type) => [type.prototype, "leaf"])
])

const tag = (value) => Object.prototype.toString.call(value).slice(8, -1)

/** Objects no prototype brings back: their state lives outside their properties. */
const NEVER = new Set(["Generator", "AsyncGenerator", "WeakMap", "WeakSet", "WeakRef", "FinalizationRegistry", "SharedArrayBuffer"])

/** Why an object whose prototype v8 cannot carry, and no cell's class gives back, cannot be saved. */
const unsaveable = (value) => {
  const kind = tag(value)
  if (kind === "Generator" || kind === "AsyncGenerator") return "a generator cannot be saved"
  if (value instanceof Promise) return "a promise cannot be saved"
  if (NEVER.has(kind)) return `a ${kind} cannot be saved`
  if (value instanceof net.Socket || value instanceof net.Server) return "socket objects cannot be saved"
  if (value instanceof EventEmitter) return `a ${value.constructor?.name || "event emitter"} (an event emitter: streams, processes, servers) cannot be saved`
  const name = value?.constructor?.name
  return name ? `an instance of ${name} cannot be saved (its class is not one a cell defined)` : "an object of an unknown kind cannot be saved"
}

const hasPrivateMembers = (source) => /#[A-Za-z_$]/.test(source.replace(/(["'`])(?:\\.|(?!\1)[^\\])*\1/g, ""))

/**
 * Walks what `value` holds: the reason it cannot be saved, or the objects whose prototype
 * must be set again on restore ([object, class name or null]) and an estimate of its
 * serialized size that is at least half the real size (so twice it bounds the real size).
 */
const inspectValue = (value, classes) => {
  const fixups = []
  const seen = new Set()
  const stack = [value]
  let estimate = 0
  while (stack.length > 0) {
    const item = stack.pop()
    const type = typeof item
    if (type === "string") {
      estimate += item.length + 3
      continue
    }
    if (type === "bigint") {
      estimate += item.toString(16).length + 3
      continue
    }
    if (type === "symbol") return { problem: item === value ? "a symbol cannot be saved" : "it holds a symbol, and symbols cannot be saved" }
    if (type === "function") return { problem: item === value ? "a function cannot be saved" : "it holds a function, and functions inside values cannot be saved" }
    if (type !== "object" || item === null) {
      estimate += 5
      continue
    }
    if (seen.has(item)) {
      estimate += 5
      continue
    }
    seen.add(item)
    if (util.types.isProxy(item)) return { problem: "a proxy cannot be saved" }
    const kind = tag(item)
    if (NEVER.has(kind) || item instanceof Promise) {
      const reason = unsaveable(item)
      return { problem: item === value ? reason : `it holds what cannot be saved: ${reason}` }
    }
    let proto = Object.getPrototypeOf(item)
    let walk = BUILTIN.get(proto)
    if (walk === undefined) {
      if (proto === null) {
        fixups.push([item, null])
        walk = "keys"
      } else if (classes.has(proto)) {
        const { name, source } = classes.get(proto)
        if (hasPrivateMembers(source)) return { problem: `an instance of ${name}, whose private fields cannot be saved` }
        fixups.push([item, name])
        let base = proto
        while (base !== null && !BUILTIN.has(base)) {
          const own = classes.get(base)
          if (own !== undefined && hasPrivateMembers(own.source)) return { problem: `an instance of ${name}, whose private fields cannot be saved` }
          base = Object.getPrototypeOf(base)
        }
        walk = base === null ? "keys" : BUILTIN.get(base)
      } else {
        const reason = unsaveable(item)
        return { problem: item === value ? reason : `it holds what cannot be saved: ${reason}` }
      }
    }
    estimate += 8
    if (walk === "keys") {
      if (Array.isArray(item)) {
        for (let i = 0; i < item.length; i++) {
          const element = item[i]
          if (element !== null && (typeof element === "object" || typeof element === "function" || typeof element === "symbol" || typeof element === "string" || typeof element === "bigint")) stack.push(element)
          else estimate += 5
        }
      } else {
        for (const key of Object.keys(item)) {
          const descriptor = Object.getOwnPropertyDescriptor(item, key)
          if (descriptor !== undefined && !("value" in descriptor)) {
            return { problem: item === value ? `its ${key} is a getter, which saving would run` : `it holds an object whose ${key} is a getter, which saving would run` }
          }
          estimate += key.length + 3
          stack.push(descriptor?.value)
        }
      }
    } else if (walk === "map") {
      for (const [key, entry] of Map.prototype.entries.call(item)) stack.push(key, entry)
    } else if (walk === "set") {
      for (const entry of Set.prototype.values.call(item)) stack.push(entry)
    } else if (ArrayBuffer.isView(item)) {
      estimate += item.buffer.byteLength + 16
    } else if (item instanceof ArrayBuffer) {
      estimate += item.byteLength + 16
    } else if (item instanceof Error) {
      estimate += String(item.message).length + String(item.stack ?? "").length + 16
    } else if (item instanceof RegExp) {
      estimate += item.source.length + 16
    } else if (item instanceof String) {
      estimate += item.length + 8
    }
  }
  return { fixups, estimate }
}

// ---------------------------------------------------------------------------
// Bindings

/** "const", "let" (lexical), "var" (a declared global) or "global" (a global property a cell assigned); undefined: not initialized. */
const bindingKind = (name, lexical) => {
  if (lexical) {
    try {
      return vm.runInThisContext(`try { ${name} = ${name}; "let" } catch (error) { error instanceof TypeError ? "const" : "uninitialized" }`)
    } catch {
      return "uninitialized"
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(globalThis, name)
  if (descriptor === undefined) return "uninitialized"
  if (!("value" in descriptor)) return "accessor"
  return descriptor.configurable ? "global" : "var"
}

const readBinding = (name, lexical) => (lexical ? vm.runInThisContext(name) : globalThis[name])

const NATIVE = /\{\s*\[native code\]\s*\}\s*$/

/** A definition to recreate from source, or why a function cannot come back. */
const definitionOf = (name, kind, fn) => {
  let source
  try {
    source = Function.prototype.toString.call(fn)
  } catch {
    return { problem: "its source cannot be read" }
  }
  if (NATIVE.test(source)) return { problem: "a built-in or bound function cannot be saved" }
  if ((functionScopes(name) ?? []).length > 0) return { problem: "a closure over local state cannot be saved (only top-level functions and classes come back, from their source)" }
  try {
    new vm.Script(`(${source}\n)`)
  } catch {
    return { problem: "its source is not a function or class on its own (a method taken from an object?)" }
  }
  const declared = /^(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\(/.exec(source)?.[1] ?? /^class\s+([A-Za-z_$][\w$]*)[\s{]/.exec(source)?.[1]
  const statement = declared === name && ((kind === "var" && !source.startsWith("class")) || (kind === "let" && source.startsWith("class")))
  return { definition: { name, kind, source, statement } }
}

/** A class, or a plain function used as a constructor: its instances get its prototype back. */
const makesInstances = (fn) => {
  const kind = tag(fn)
  return fn.prototype !== null && typeof fn.prototype === "object" && kind !== "GeneratorFunction" && kind !== "AsyncGeneratorFunction"
}

/**
 * What each module a cell loaded gives: the module itself and its members, mapped to the
 * expression that loads it again (`require("node:fs")`, `(await import(x)).readFile`) as the
 * cell did, from the folder it did it in.
 */
const moduleIndex = () => {
  const index = new Map()
  for (const { how, dir, specifier, options, value } of loadedModules()) {
    const args = `${JSON.stringify(dir)}, ${JSON.stringify(specifier)}${options === undefined ? "" : `, ${JSON.stringify(options)}`}`
    const base = how === "import"
      ? `(await globalThis[Symbol.for("veyyon.importFrom")](${args}))`
      : `globalThis[Symbol.for("veyyon.requireFrom")](${args})`
    if (!index.has(value)) index.set(value, base)
    let keys
    try {
      keys = Object.keys(value)
    } catch {
      keys = []
    }
    for (const key of keys) {
      let member
      try {
        member = value[key]
      } catch {
        continue
      }
      if (member !== null && (typeof member === "object" || typeof member === "function") && !index.has(member)) {
        index.set(member, `${base}[${JSON.stringify(key)}]`)
      }
    }
  }
  return index
}

// ---------------------------------------------------------------------------
// Snapshot

const nextTurn = () => new Promise((resolve) => timers.setImmediate(resolve))

/** How long the snapshot works before it lets the event loop read the host's lines and looks for a waiting cell. */
const SLICE_MS = 10

/**
 * Whether to yield: every SLICE_MS the event loop gets a turn (so a request that arrived is
 * read) and the answer is whether a cell now waits. A small snapshot ends within one slice,
 * so a cell that arrives meanwhile waits those milliseconds instead of costing the session
 * its snapshot; a big one yields within a slice and the value in hand.
 */
const yieldCheck = (cellWaiting) => {
  let last = performance.now()
  return async () => {
    if (performance.now() - last < SLICE_MS) return false
    await nextTurn()
    last = performance.now()
    return cellWaiting()
  }
}

const done = (id, status, fields = {}) => send({ type: "snapshot_done", id, status, names: [], skipped: [], ...fields })

/**
 * Answers one snapshot request. `cellWaiting()` says whether an execute request is queued:
 * checked before the work (a cell already queued comes first at once), then every slice
 * between values and before the first chunk goes out.
 */
export const runSnapshot = async (request, cellWaiting) => {
  try {
    try {
      await takeSnapshot(request, cellWaiting, false)
    } catch (error) {
      if (!(error instanceof MeasureEach)) throw error
      await takeSnapshot(request, cellWaiting, true)
    }
  } catch (error) {
    done(request.id, "failed", { error: `the snapshot failed: ${error?.message ?? error}` })
  }
}

/** Estimates misled the snapshot (a value v8 refused after the walk passed it, or a payload over budget): take it again measuring each value. */
class MeasureEach extends Error {}

/**
 * One serialization of every value, each sized by the walk's estimate; a value is serialized
 * on its own first (its exact size, and whether v8 takes it) only when twice its estimate
 * could pass a budget, or in the second attempt (`measureEach`).
 */
const takeSnapshot = async (request, cellWaiting, measureEach) => {
  const { id, budget, valueBudget, known } = request
  if (cellWaiting()) return done(id, "yielded")
  const shouldYield = yieldCheck(cellWaiting)
  const lexical = new Set(lexicalNames())
  const modules = moduleIndex()
  const skipped = []
  const definitions = []
  const loads = []
  const candidates = []
  for (const name of userNames()) {
    const isLexical = lexical.has(name)
    const kind = bindingKind(name, isLexical)
    if (kind === "uninitialized") {
      skipped.push({ name, reason: "its declaration never finished, so it has no value" })
      continue
    }
    if (kind === "accessor") {
      skipped.push({ name, reason: "a getter on the global object cannot be saved" })
      continue
    }
    if (!isLexical && !IDENTIFIER.test(name)) {
      skipped.push({ name, reason: "a global whose name is not an identifier is not saved" })
      continue
    }
    const value = readBinding(name, isLexical)
    const load = value !== null && (typeof value === "object" || typeof value === "function") ? modules.get(value) : undefined
    if (load !== undefined) {
      loads.push({ name, kind, source: load, statement: false, module: true })
    } else if (typeof value === "function") {
      const outcome = definitionOf(name, kind, value)
      if (outcome.problem !== undefined) skipped.push({ name, reason: outcome.problem })
      else definitions.push(outcome.definition)
    } else {
      candidates.push({ name, kind, value })
    }
  }
  const classes = new Map()
  for (const definition of definitions) {
    const fn = readBinding(definition.name, lexical.has(definition.name))
    if (typeof fn === "function" && makesInstances(fn) && !classes.has(fn.prototype)) {
      classes.set(fn.prototype, { name: definition.name, source: definition.source })
    }
  }
  definitions.unshift(...loads)
  // The header counts against the budget too (the host takes no byte past it): its definitions,
  // cwd and env as they are, and room for each name and reason it will list.
  let used = Buffer.byteLength(JSON.stringify({ definitions, cwd: process.cwd(), env: environmentChanges() })) +
    HEADER_ROOM * (candidates.length + skipped.length + 16)
  const serializer = new v8.DefaultSerializer()
  serializer.writeHeader()
  const values = []
  const fixups = []
  for (const { name, kind, value } of candidates) {
    if (await shouldYield()) return done(id, "yielded")
    let walked
    try {
      walked = inspectValue(value, classes)
    } catch (error) {
      walked = { problem: `reading it failed: ${error?.message ?? error}` }
    }
    if (walked.problem !== undefined) {
      skipped.push({ name, reason: walked.problem })
      continue
    }
    let size = walked.estimate
    if (measureEach || size * 2 > valueBudget || (used + size) * 2 > budget) {
      try {
        size = v8.serialize(value).length
      } catch (error) {
        skipped.push({ name, reason: `it cannot be saved: ${error?.message ?? error}` })
        continue
      }
    }
    if (size > valueBudget) {
      skipped.push({ name, reason: `${readableSize(size)} over the ${readableSize(valueBudget)} budget` })
      continue
    }
    if (used + size > budget) {
      skipped.push({ name, reason: `${readableSize(size)} over the ${readableSize(budget)} budget of the whole session (${readableSize(used)} taken before it)` })
      continue
    }
    try {
      serializer.writeValue(value)
    } catch (error) {
      if (!measureEach) throw new MeasureEach()
      throw error
    }
    used += size
    for (const [object, className] of walked.fixups) fixups.push([object, className, values.length])
    values.push({ name, kind })
  }
  serializer.writeValue(fixups)
  const data = serializer.releaseBuffer()
  skipped.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const header = Buffer.from(JSON.stringify({
    format: FORMAT_VERSION,
    node: process.version,
    definitions,
    values,
    skipped,
    cwd: process.cwd(),
    env: environmentChanges(),
    dataDigest: createHash("sha256").update(data).digest("hex")
  }), "utf8")
  const prefix = Buffer.alloc(8)
  prefix.writeUInt32BE(FORMAT_VERSION, 0)
  prefix.writeUInt32BE(header.length, 4)
  const payload = Buffer.concat([MAGIC, prefix, header, data])
  if (payload.length > budget) {
    if (!measureEach) throw new MeasureEach()
    return done(id, "failed", { error: `the snapshot is ${readableSize(payload.length)}, over the ${readableSize(budget)} budget`, skipped })
  }
  const digest = createHash("sha256").update(payload).digest("hex")
  const names = [...definitions.map((d) => d.name), ...values.map((v) => v.name)].sort()
  if (digest === known) return done(id, "unchanged", { digest, bytes: payload.length, names, skipped })
  if (await shouldYield()) return done(id, "yielded")
  for (let offset = 0; offset < payload.length; offset += CHUNK_BYTES) {
    send({ type: "snapshot_chunk", id, data: payload.subarray(offset, offset + CHUNK_BYTES).toString("base64") })
  }
  done(id, "saved", { digest, bytes: payload.length, names, skipped })
}

// ---------------------------------------------------------------------------
// Restore

class Unreadable extends Error {}

const readPayload = (payload) => {
  if (payload.length < MAGIC.length + 8 || !payload.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new Unreadable("the payload is not a JavaScript runner's snapshot")
  }
  const version = payload.readUInt32BE(MAGIC.length)
  if (version !== FORMAT_VERSION) throw new Unreadable(`the snapshot has format ${version}; this runner reads format ${FORMAT_VERSION} only`)
  const headerLength = payload.readUInt32BE(MAGIC.length + 4)
  const start = MAGIC.length + 8
  if (start + headerLength > payload.length) throw new Unreadable("the snapshot is cut short")
  let header
  try {
    header = JSON.parse(payload.subarray(start, start + headerLength).toString("utf8"))
  } catch (error) {
    throw new Unreadable(`the snapshot's header is corrupt: ${error.message}`)
  }
  if (header?.format !== FORMAT_VERSION || !Array.isArray(header.definitions) || !Array.isArray(header.values)) {
    throw new Unreadable("the snapshot's header is corrupt")
  }
  const data = payload.subarray(start + headerLength)
  if (createHash("sha256").update(data).digest("hex") !== header.dataDigest) {
    throw new Unreadable("the snapshot's values are corrupt (their SHA-256 does not match)")
  }
  let values
  let fixups
  try {
    const deserializer = new v8.DefaultDeserializer(data)
    deserializer.readHeader()
    values = header.values.map(() => deserializer.readValue())
    fixups = deserializer.readValue()
  } catch (error) {
    throw new Unreadable(`the snapshot's values are corrupt: ${error?.message ?? error}`)
  }
  if (!Array.isArray(fixups)) throw new Unreadable("the snapshot's values are corrupt")
  return { header, values, fixups }
}

const declaration = (kind, name, expression) =>
  kind === "global" ? `globalThis[${JSON.stringify(name)}] = (${expression});` : `${kind} ${name} = (${expression});`

const describe = (error) => `${error?.name ?? "Error"}: ${error?.message ?? error}`

/** Restores a whole payload (the request's pieces joined): definitions, then values, then cwd and env. */
export const runRestore = async (request) => {
  const { id } = request
  let read
  try {
    read = readPayload(Buffer.concat(request.pieces))
  } catch (error) {
    send({ type: "restore_done", id, restored: [], skipped: [], error: error instanceof Unreadable ? error.message : `the snapshot cannot be read: ${error?.message ?? error}` })
    return
  }
  const { header, values, fixups } = read
  const restored = []
  const skipped = Array.isArray(header.skipped) ? [...header.skipped] : []
  // Definitions first: a class that extends another waits for it, pass after pass; one that
  // needs a value when it is defined (a static field) is tried again after the values.
  const failures = new Map()
  const define = async (pending) => {
    while (pending.length > 0) {
      const next = []
      for (const definition of pending) {
        const source = definition.statement ? definition.source : declaration(definition.kind, definition.name, `${definition.source}\n`)
        const failure = await evaluateInReplScope(source)
        if (failure === undefined) restored.push(definition.name)
        else {
          failures.set(definition.name, failure)
          next.push(definition)
        }
      }
      if (next.length === pending.length) return next
      pending = next
    }
    return pending
  }
  let pending = await define(header.definitions)
  // Then values, with the prototypes of cell classes set again.
  const broken = new Map()
  for (const [object, className, index] of fixups) {
    if (className === null) {
      Object.setPrototypeOf(object, null)
      continue
    }
    let cls
    try {
      cls = restored.includes(className) ? vm.runInThisContext(className) : undefined
    } catch {
      cls = undefined
    }
    if (typeof cls === "function" && cls.prototype !== undefined) Object.setPrototypeOf(object, cls.prototype)
    else broken.set(index, className)
  }
  const pool = new Map()
  Object.defineProperty(globalThis, RESTORING, { value: pool, configurable: true })
  try {
    for (let index = 0; index < header.values.length; index++) {
      const { name, kind } = header.values[index]
      if (broken.has(index)) {
        skipped.push({ name, reason: `it holds an instance of ${broken.get(index)}, a class that did not come back` })
        continue
      }
      pool.set(name, values[index])
      const failure = await evaluateInReplScope(declaration(kind, name, `globalThis[Symbol.for("veyyon.restoring")].get(${JSON.stringify(name)})`))
      pool.delete(name)
      if (failure === undefined) restored.push(name)
      else skipped.push({ name, reason: `it could not be declared again: ${describe(failure)}` })
    }
  } finally {
    delete globalThis[RESTORING]
  }
  pending = await define(pending)
  for (const definition of pending) {
    const what = definition.module ? "its module could not be loaded again" : "its definition failed again"
    skipped.push({ name: definition.name, reason: `${what}: ${describe(failures.get(definition.name))}` })
  }
  // Then the kernel state.
  if (typeof header.cwd === "string") {
    try {
      process.chdir(header.cwd)
    } catch (error) {
      skipped.push({ name: "working directory", reason: `${header.cwd} cannot be entered again: ${error.code ?? error.message}` })
    }
  }
  for (const [key, value] of Object.entries(header.env?.set ?? {})) process.env[key] = String(value)
  for (const key of header.env?.unset ?? []) delete process.env[key]
  if (Number.isInteger(request.executionCount) && request.executionCount >= 0) state.executionCount = request.executionCount
  restored.sort()
  send({ type: "restore_done", id, restored, skipped })
}
