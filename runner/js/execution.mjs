/** Running a cell: module loading from the kernel's cwd, evaluation through the inspector's REPL mode, errors, timers, globals. */
import inspector from "node:inspector"
import Module, { createRequire } from "node:module"
import * as path from "node:path"
import * as timers from "node:timers"
import { fileURLToPath, pathToFileURL } from "node:url"
import * as util from "node:util"
import * as vm from "node:vm"
import { INTERRUPTED, realExit, send, state } from "./protocol.mjs"
import { stderrStream, stdoutStream } from "./output.mjs"
import { display, mimeBundle, plainText } from "./display.mjs"
import { createPrelude } from "./prelude.mjs"
import { BridgeError, bridgeCall, settleBeforeDone } from "./bridge.mjs"
import { IMPORT_NAME, transformCell } from "./transform.mjs"

const CELL_HOOK = Symbol.for("veyyon.cell")

/** The runner's folder: every module of the runner and its prelude lives directly in it. */
const RUNNER_DIR = path.dirname(fileURLToPath(import.meta.url)) + path.sep

// Module loading from the kernel's working directory

const importers = new Map()
let requireDir
let currentRequire

const resolveFrom = (dir, specifier) => {
  if (specifier.startsWith("node:") || specifier.includes(":")) return specifier
  try {
    return pathToFileURL(createRequire(path.join(dir, "[cell]")).resolve(specifier)).href
  } catch {
    return specifier
  }
}

const importerFor = (dir) => {
  let importer = importers.get(dir)
  if (importer === undefined) {
    const loader = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER
    importer = loader === undefined
      ? (specifier, options) => import(resolveFrom(dir, String(specifier)), options)
      : new vm.Script("(specifier, options) => import(specifier, options)", {
        filename: path.join(dir, "[cell]"),
        importModuleDynamically: loader
      }).runInThisContext()
    importers.set(dir, importer)
  }
  return importer
}

// The modules cells loaded (import, import(), require), each once per folder and specifier,
// so a snapshot can name a binding by the module it came from and load it again on restore.
const modulesLoaded = new Map()

const noteModule = (how, dir, specifier, options, value) => {
  if (value === null || (typeof value !== "object" && typeof value !== "function")) return
  const key = `${how}\0${dir}\0${specifier}\0${options === undefined ? "" : JSON.stringify(options)}`
  modulesLoaded.set(key, { how, dir, specifier, options, value })
}

/** The modules cells loaded: {how: "import" | "require", dir, specifier, options, value}. */
export const loadedModules = () => [...modulesLoaded.values()]

/** import(specifier) as a cell in dir made it; noted like a cell's. */
export const importFrom = async (dir, specifier, options) => {
  const value = await importerFor(dir)(specifier, options)
  noteModule("import", dir, String(specifier), options, value)
  return value
}

/** require(specifier) as a cell in dir made it; noted like a cell's. */
export const requireFrom = (dir, specifier) => {
  const value = createRequire(path.join(dir, "[cell]"))(specifier)
  noteModule("require", dir, String(specifier), undefined, value)
  return value
}

const importFromCwd = (specifier, options) => importFrom(process.cwd(), specifier, options)

const requireHere = () => {
  const dir = process.cwd()
  if (dir !== requireDir) {
    requireDir = dir
    currentRequire = createRequire(path.join(dir, "[cell]"))
  }
  return currentRequire
}

/** require() for cells: resolves from the kernel's current working directory. */
function cellRequire(id) {
  const value = requireHere()(id)
  noteModule("require", requireDir, String(id), undefined, value)
  return value
}
cellRequire.resolve = (request, options) => requireHere().resolve(request, options)
cellRequire.resolve.paths = (request) => requireHere().resolve.paths(request)
Object.defineProperty(cellRequire, "cache", { get: () => Module._cache })

// ---------------------------------------------------------------------------
// Evaluation through the inspector's REPL mode

let session
let contextId
let baseline = new Map()

const post = (method, params) => {
  let answer
  session.post(method, params, (error, result) => {
    answer = { error, result }
  })
  if (answer === undefined) throw new Error(`the inspector did not answer ${method} at once`)
  if (answer.error) throw answer.error
  return answer.result
}

let taken
const TAKE = Symbol.for("veyyon.take")

const takeValue = (remote) => {
  const argument = remote.objectId !== undefined
    ? { objectId: remote.objectId }
    : remote.unserializableValue !== undefined
    ? { unserializableValue: remote.unserializableValue }
    : remote.type === "undefined"
    ? {}
    : { value: remote.value }
  taken = undefined
  post("Runtime.callFunctionOn", {
    functionDeclaration: `function (value) { globalThis[Symbol.for("veyyon.take")](value) }`,
    executionContextId: contextId,
    arguments: [argument],
    silent: true
  })
  const value = taken
  taken = undefined
  return value
}

export const openInspector = () => {
  session = new inspector.Session()
  session.connect()
  session.on("Runtime.executionContextCreated", (message) => {
    if (contextId === undefined && message.params.context.auxData?.isDefault !== false) contextId = message.params.context.id
  })
  post("Runtime.enable", {})
  post("Runtime.disable", {})
  if (contextId === undefined) throw new Error("the inspector reported no execution context")
  Object.defineProperty(globalThis, TAKE, { value: (value) => (taken = value) })
  Object.defineProperty(globalThis, CELL_HOOK, { value: () => cellThunk() })
  trigger = new vm.Script(`globalThis[Symbol.for("veyyon.cell")]()`, { filename: "veyyon-runner" })
}

let cellThunk
let trigger

export class Interrupt extends Error {}

// The trigger's throw decides whether a cell was interrupted, never the inspector's answer.
// When SIGINT stops the cell's synchronous code, the inspector answers Runtime.evaluate with
// an error ("Execution was terminated", or "Internal error" when the signal lands while it
// wraps the result), from inside the trigger, and the trigger then throws
// ERR_SCRIPT_EXECUTION_INTERRUPTED; when the signal lands after the code finished but before
// the trigger returned, the answer (the cell's value) comes after the throw and is dropped. So
// an answer that arrives while the trigger runs is held until it returns.
const evaluate = (source, group) =>
  new Promise((resolve) => {
    let triggering = true
    let early
    cellThunk = () =>
      session.post("Runtime.evaluate", {
        expression: source,
        contextId,
        replMode: true,
        awaitPromise: true,
        objectGroup: group,
        silent: true,
        disableBreaks: true,
        generatePreview: false
      }, (error, result) => {
        if (triggering) early = { error, result }
        else resolve({ error, result })
      })
    try {
      trigger.runInThisContext({ breakOnSigint: true })
    } catch (error) {
      if (error?.code === "ERR_SCRIPT_EXECUTION_INTERRUPTED") throw new Interrupt()
      throw error
    } finally {
      triggering = false
      cellThunk = undefined
    }
    if (early !== undefined) resolve(early)
  })

/**
 * The scopes a top-level function closes over beyond the script and global scopes, as the
 * inspector names them ("Closure", "Block", ...), leaving out a scope that holds nothing but
 * the function itself (a class's own name, seen from its methods); undefined when the name is
 * not a function. Empty: the function's source, evaluated at the top level, is the function.
 */
export const functionScopes = (name) => {
  const group = "veyyon-scopes"
  try {
    const { result } = post("Runtime.evaluate", { expression: name, contextId, objectGroup: group, silent: true })
    if (result?.type !== "function" || result.objectId === undefined) return undefined
    const own = post("Runtime.getProperties", { objectId: result.objectId, ownProperties: true })
    const scopes = own.internalProperties?.find((property) => property.name === "[[Scopes]]")
    if (scopes?.value?.objectId === undefined) return []
    const isItself = (variable) =>
      variable.value?.objectId !== undefined &&
      post("Runtime.callFunctionOn", {
        functionDeclaration: "function (other) { return this === other }",
        objectId: result.objectId,
        arguments: [{ objectId: variable.value.objectId }],
        returnByValue: true,
        silent: true
      }).result?.value === true
    return post("Runtime.getProperties", { objectId: scopes.value.objectId, ownProperties: true }).result
      .filter((entry) => /^\d+$/.test(entry.name))
      .filter((entry) => {
        const kind = String(entry.value?.description ?? "").split(" ")[0]
        if (kind === "Script" || kind === "Global") return false
        if (entry.value?.objectId === undefined) return true
        const variables = post("Runtime.getProperties", { objectId: entry.value.objectId, ownProperties: true }).result
        return !(variables.length > 0 && variables.every(isItself))
      })
      .map((entry) => String(entry.value?.description ?? "").split(" ")[0])
  } finally {
    post("Runtime.releaseObjectGroup", { objectGroup: group })
  }
}

/** Runs source in the cells' REPL scope (not interruptible, never counted); resolves with the thrown error or undefined. */
export const evaluateInReplScope = (source) =>
  new Promise((resolve) => {
    session.post("Runtime.evaluate", {
      expression: source,
      contextId,
      replMode: true,
      awaitPromise: true,
      objectGroup: "veyyon-restore",
      silent: true,
      disableBreaks: true,
      generatePreview: false
    }, (error, result) => {
      let failure = error ?? undefined
      if (failure === undefined && result?.exceptionDetails !== undefined) {
        failure = takeValue(result.exceptionDetails.exception ?? { type: "undefined" })
        if (!(failure instanceof Error)) failure = new Error(String(failure))
      }
      post("Runtime.releaseObjectGroup", { objectGroup: "veyyon-restore" })
      resolve(failure)
    })
  })

// ---------------------------------------------------------------------------
// Errors

const isRunnerFrame = (line) => line.includes(RUNNER_DIR) || line.includes("veyyon-runner")

/**
 * The lines of a util.inspect()ed error without runner frames: frames in the runner's files,
 * the node frames they called, and everything below the inspector call that ran the cell.
 */
const cleanTrace = (text) => {
  const kept = []
  let below = false
  let afterRunner = false
  for (const line of text.split("\n")) {
    if (!/^\s+at /.test(line)) {
      below = false
      afterRunner = false
      kept.push(line)
      continue
    }
    if (line.includes("node:inspector")) below = true
    const runner = isRunnerFrame(line)
    const drop = below || runner || (afterRunner && /\(node:|at node:/.test(line))
    afterRunner = runner || (afterRunner && drop)
    if (!drop) kept.push(line)
    else if (line.endsWith(" {") && kept.length > 0) kept[kept.length - 1] += " {"
  }
  return kept
}

const errorName = (error) => {
  const name = typeof error.name === "string" && error.name !== "" ? error.name : "Error"
  const constructorName = error.constructor?.name
  return name === "Error" && typeof constructorName === "string" && constructorName !== "" && constructorName !== "Object" ? constructorName : name
}

/** The error frame fields for a thrown value: ename, evalue and the stack as lines without runner frames. */
export const errorFields = (thrown) => {
  if (thrown instanceof Error || (thrown !== null && typeof thrown === "object" && typeof thrown.stack === "string")) {
    let text
    try {
      text = util.inspect(thrown)
    } catch {
      text = String(thrown.stack)
    }
    return { ename: errorName(thrown), evalue: String(thrown.message ?? ""), traceback: cleanTrace(text) }
  }
  const shown = plainText(thrown)
  return { ename: "Uncaught", evalue: shown, traceback: [`Uncaught ${shown}`] }
}

const syntaxErrorFields = (error, details, source, filename) => {
  const line = details.lineNumber ?? 0
  const column = details.columnNumber ?? 0
  const text = source.split("\n")[line] ?? ""
  return {
    ename: "SyntaxError",
    evalue: String(error.message),
    traceback: [`${filename}:${line + 1}`, text, `${" ".repeat(column)}^`, "", `SyntaxError: ${error.message}`]
  }
}

// ---------------------------------------------------------------------------
// Timers a cell sets, cleared when it is interrupted

const trackTimers = () => {
  const wrap = (create, kind) => {
    const wrapped = function (callback, ...rest) {
      const cell = state.active
      if (cell === null || typeof callback !== "function") return create(callback, ...rest)
      let handle
      const run = function (...args) {
        if (kind !== "interval") {
          cell.timers.delete(handle)
          timerCallbacks.delete(handle)
        }
        return callback.apply(this, args)
      }
      handle = create(run, ...rest)
      cell.timers.set(handle, kind)
      timerCallbacks.set(handle, callback)
      return handle
    }
    Object.defineProperty(wrapped, "name", { value: create.name })
    if (create[util.promisify.custom] !== undefined) wrapped[util.promisify.custom] = create[util.promisify.custom]
    return wrapped
  }
  globalThis.setTimeout = wrap(timers.setTimeout, "timeout")
  globalThis.setInterval = wrap(timers.setInterval, "interval")
  globalThis.setImmediate = wrap(timers.setImmediate, "immediate")
}

/**
 * The timers of interrupted cells, cleared and kept: an interrupted cell that awaited one
 * never resumes, and its promise, which the inspector still awaits, must stay reachable.
 * Collected, it makes the inspector answer from inside the garbage collector, where V8
 * aborts the process (a fatal error in its promise handler's cleanup).
 */
const abandonedTimers = []

/** The callbacks of the cells' timers not yet run, by handle. */
const timerCallbacks = new Map()

export const clearCellTimers = (cell) => {
  for (const [handle, kind] of cell.timers) {
    if (kind === "immediate") timers.clearImmediate(handle)
    else timers.clearTimeout(handle)
    abandonedTimers.push(timerCallbacks.get(handle))
    timerCallbacks.delete(handle)
  }
  cell.timers.clear()
}

// ---------------------------------------------------------------------------
// Globals every cell sees

/** The cells' top-level let, const and class names. */
export const lexicalNames = () => post("Runtime.globalLexicalScopeNames", { executionContextId: contextId }).names

export const userNames = () => {
  const names = new Set(lexicalNames())
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    if (name === "_") continue
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, name)
    if (!baseline.has(name) || ("value" in descriptor && !Object.is(baseline.get(name), descriptor.value))) names.add(name)
  }
  return [...names].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

export const IDENTIFIER = /^[A-Za-z_$][\w$]*$/

export const userValue = (name) => {
  if (!IDENTIFIER.test(name)) return globalThis[name]
  try {
    return vm.runInThisContext(name)
  } catch {
    return undefined
  }
}

/** process.exit() in a cell: the kernel keeps running. */
export class KernelExit extends Error {
  constructor(code) {
    super(`process.exit(${code ?? ""}) was called in a cell; the kernel keeps running (pass reset: true for a fresh one)`)
    this.name = "KernelExit"
    this.code = code
  }
}

export const installGlobals = () => {
  const prelude = createPrelude({
    bridgeCall,
    settleBeforeDone,
    bridgeError: (name, message) => new BridgeError(name, message),
    userNames,
    userValue,
    print: (text) => stdoutStream.write(text)
  })
  const define = (name, value) => Object.defineProperty(globalThis, name, { value, writable: true, configurable: true, enumerable: false })
  for (const [name, value] of Object.entries(prelude)) define(name, value)
  define("display", display)
  define("require", cellRequire)
  define(IMPORT_NAME, importFromCwd)
  Object.defineProperty(globalThis, Symbol.for("veyyon.importFrom"), { value: importFrom })
  Object.defineProperty(globalThis, Symbol.for("veyyon.requireFrom"), { value: requireFrom })
  define("_", undefined)
  trackTimers()
  process.exit = function exit(code) {
    if (state.active !== null) throw new KernelExit(code)
    realExit(code)
  }
  baseline = new Map()
  for (const name of Object.getOwnPropertyNames(globalThis)) {
    const descriptor = Object.getOwnPropertyDescriptor(globalThis, name)
    baseline.set(name, "value" in descriptor ? descriptor.value : undefined)
  }
}

// ---------------------------------------------------------------------------

export const applyContext = (request) => {
  if (request.cwd !== undefined) process.chdir(request.cwd)
  if (request.env !== undefined) {
    for (const [key, value] of Object.entries(request.env)) {
      if (value === null) delete process.env[key]
      else process.env[key] = value
    }
  }
}

export const runCell = async (request, filename, cell) => {
  const source = transformCell(request.code)
  const group = `cell-${state.cellSeq}`
  const evaluation = evaluate(`${source}\n//# sourceURL=${filename}`, group)
  const outcome = await Promise.race([evaluation, cell.interrupted])
  if (outcome === INTERRUPTED) {
    evaluation.then(() => post("Runtime.releaseObjectGroup", { objectGroup: group }), () => {})
    throw new Interrupt()
  }
  try {
    if (outcome.error) throw outcome.error
    const { result, exceptionDetails } = outcome.result
    if (exceptionDetails !== undefined) {
      const thrown = takeValue(exceptionDetails.exception ?? { type: "undefined" })
      const compileError = thrown instanceof SyntaxError && !String(thrown.stack).includes(`${filename}:`)
      return { failure: compileError ? syntaxErrorFields(thrown, exceptionDetails, source, filename) : errorFields(thrown) }
    }
    const value = takeValue(result)
    if (value !== undefined && !request.silent) {
      if (request.storeHistory) globalThis._ = value
      send({ type: "result", id: request.id, bundle: mimeBundle(value) })
    }
    return { failure: undefined }
  } finally {
    post("Runtime.releaseObjectGroup", { objectGroup: group })
  }
}

export const INTERRUPT_FIELDS = {
  ename: "Interrupted",
  evalue: "the cell was interrupted (SIGINT)",
  traceback: ["Interrupted: the cell was interrupted (SIGINT)"]
}

export const report = (label, reason) => {
  if (reason instanceof BridgeError && reason.code === "BridgeCancelled") return
  const fields = errorFields(reason)
  stderrStream.write(`${label}: ${fields.traceback.join("\n")}\n`)
}
