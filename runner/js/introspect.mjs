/** Complete and inspect requests: answered at once, never counted as a cell. */
import * as util from "node:util"
import { send } from "./protocol.mjs"
import { IDENTIFIER, userNames, userValue } from "./execution.mjs"

// Introspection: complete and inspect requests
//
// Answered as soon as the line arrives (beside a cell awaiting something; after a
// synchronous one), counted as no cell. Property chains are read through descriptors,
// so no getter, proxy trap or cell code runs; util.inspect runs with getters off.

const MAX_COMPLETIONS = 500
const MAX_INSPECT_CHARS = 65536

const MISSING = Symbol("missing")
const JS_KEYWORDS = [
  "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete", "do", "else",
  "export", "extends", "false", "finally", "for", "function", "if", "import", "in", "instanceof", "let", "new", "null",
  "return", "static", "super", "switch", "this", "throw", "true", "try", "typeof", "undefined", "var", "void", "while",
  "with", "yield"
]

/** Reads `name` of `value` through property descriptors: data properties only, never a getter. */
const staticProperty = (value, name) => {
  if (value === null || value === undefined) return MISSING
  let holder = typeof value === "object" || typeof value === "function" ? value : Object(value)
  if (util.types.isProxy(holder)) return MISSING
  while (holder !== null) {
    const descriptor = Object.getOwnPropertyDescriptor(holder, name)
    if (descriptor !== undefined) return "value" in descriptor ? descriptor.value : MISSING
    holder = Object.getPrototypeOf(holder)
    if (holder !== null && util.types.isProxy(holder)) return MISSING
  }
  return MISSING
}

const resolveChain = (chain) => {
  const [first, ...rest] = chain.split(".")
  const names = new Set(userNames())
  let value = names.has(first) || first in globalThis ? userValue(first) : MISSING
  if (value === undefined && !names.has(first) && !(first in globalThis)) value = MISSING
  for (const part of rest) {
    if (value === MISSING) break
    value = staticProperty(value, part)
  }
  return value
}

const propertyNames = (value) => {
  const names = new Set()
  let holder = typeof value === "object" || typeof value === "function" ? value : Object(value)
  for (let depth = 0; holder !== null && depth < 64 && !util.types.isProxy(holder); depth++) {
    for (const name of Object.getOwnPropertyNames(holder)) names.add(name)
    holder = Object.getPrototypeOf(holder)
  }
  return [...names].filter((name) => IDENTIFIER.test(name))
}

const visible = (names, prefix) =>
  [...new Set(names)].filter((name) => name.startsWith(prefix) && (prefix.startsWith("_") || !name.startsWith("_"))).sort()

/** {matches, cursorStart} for the token before `cursor`: properties after a dot, else names and keywords. */
export const completeJs = (code, cursor) => {
  const line = code.slice(0, cursor).split("\n").pop()
  const member = /([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\.([\w$]*)$/.exec(line)
  if (member !== null) {
    const value = resolveChain(member[1])
    const matches = value === MISSING || value === null || value === undefined ? [] : visible(propertyNames(value), member[2])
    return { matches: matches.slice(0, MAX_COMPLETIONS), cursorStart: cursor - member[2].length }
  }
  const prefix = /[A-Za-z_$][\w$]*$/.exec(line)?.[0] ?? ""
  if (/\d$/.test(line) && prefix === "") return { matches: [], cursorStart: cursor }
  const names = [...userNames(), ...Object.getOwnPropertyNames(globalThis).filter((n) => IDENTIFIER.test(n)), ...JS_KEYWORDS]
  return { matches: visible(names, prefix).slice(0, MAX_COMPLETIONS), cursorStart: cursor - prefix.length }
}

const nameAt = (code, cursor) => {
  let start = cursor
  while (start > 0 && /[\w$.]/.test(code[start - 1])) start--
  let end = cursor
  while (end < code.length && /[\w$]/.test(code[end])) end++
  const name = code.slice(start, end).replace(/^\.+|\.+$/g, "")
  if (/^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$/.test(name)) return name
  const open = code.slice(0, cursor).lastIndexOf("(")
  const callee = open < 0 ? null : /([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*$/.exec(code.slice(0, open))
  return callee === null ? null : callee[1]
}

const clip = (text, limit) => (text.length <= limit ? text : text.slice(0, limit - 1) + "…")

const signatureOf = (fn) => {
  let source
  try {
    source = Function.prototype.toString.call(fn)
  } catch {
    return null
  }
  if (source.includes("[native code]")) return `${fn.name || "anonymous"}(${fn.length} argument${fn.length === 1 ? "" : "s"})`
  const header = /^[^{]*?(?:=>|\{)/s.exec(source)
  return clip((header ? header[0].replace(/\s*(=>|\{)$/, "") : source).replace(/\s+/g, " ").trim(), 1000)
}

/** IPython-style `obj?` text for the name at `cursor` (detail 1: the function's source), or null. */
export const inspectJs = (code, cursor, detail) => {
  const name = nameAt(code, cursor)
  if (name === null) return null
  const value = resolveChain(name)
  if (value === MISSING) return null
  const fields = []
  if (typeof value === "function") {
    fields.push(["Signature", signatureOf(value)])
    if (detail === 1) {
      try {
        fields.push(["Source", Function.prototype.toString.call(value)])
      } catch {}
    }
  } else {
    fields.push(["String form", clip(util.inspect(value, { depth: 1, getters: false, customInspect: false, maxArrayLength: 20 }), 1000)])
    if (typeof value === "string" || Array.isArray(value)) fields.push(["Length", String(value.length)])
  }
  const type = value === null ? "null" : typeof value === "object" || typeof value === "function"
    ? (staticProperty(value, "constructor")?.name ?? typeof value) || typeof value
    : typeof value
  fields.push(["Type", typeof value === "function" && /^class\b/.test(Function.prototype.toString.call(value)) ? "class" : type])
  const text = fields
    .filter(([, text]) => text !== null)
    .map(([label, text]) => (text.includes("\n") ? `${label}:\n${text}` : `${(label + ":").padEnd(12)} ${text}`))
    .join("\n")
  return clip(text, MAX_INSPECT_CHARS)
}

export const introspect = ({ type, id, code, cursor, detail }) => {
  const text = code
  const at = Array.from(code).slice(0, cursor).join("").length
  const toPoints = (utf16) => Array.from(text.slice(0, utf16)).length
  try {
    if (type === "complete") {
      const { matches, cursorStart } = completeJs(text, at)
      send({ type: "complete_reply", id, matches, cursorStart: toPoints(cursorStart), cursorEnd: cursor })
    } else {
      const found = inspectJs(text, at, detail)
      send({ type: "inspect_reply", id, found: found !== null, bundle: found === null ? {} : { "text/plain": found } })
    }
  } catch (error) {
    const why = clip(`${error?.name ?? "Error"}: ${error?.message ?? error}`, 1000)
    send(type === "complete"
      ? { type: "complete_reply", id, matches: [], cursorStart: 0, cursorEnd: 0, error: why }
      : { type: "inspect_reply", id, found: false, bundle: {}, error: why })
  }
}
