/** Output: process.stdout/stderr, the console and child processes' stdio become stdout/stderr frames. */
import * as childProcess from "node:child_process"
import { createRequire, syncBuiltinESMExports } from "node:module"
import { Writable } from "node:stream"
import { StringDecoder } from "node:string_decoder"
import { CHUNK_CHARS, send, state } from "./protocol.mjs"

const sendStream = (kind, text) => {
  if (text.length === 0 || state.currentId === null) return
  for (let start = 0; start < text.length; start += CHUNK_CHARS) {
    send({ type: kind, id: state.currentId, data: text.slice(start, start + CHUNK_CHARS) })
  }
}

// Output: process.stdout/stderr and the console become frames

class FrameStream extends Writable {
  constructor(kind, fd) {
    super({ decodeStrings: false })
    this.kind = kind
    this.fd = fd
    this.decoder = new StringDecoder("utf8")
  }

  // write() sends at once, past Writable's bookkeeping: that marks a write in progress until
  // _write calls back, and an interrupt ending the cell's code between the two (SIGINT lands
  // anywhere in a console.log) would leave the stream queueing every later write, unsent.
  write(chunk, encoding, callback) {
    if (typeof encoding === "function") return this.write(chunk, undefined, encoding)
    this.send(chunk, encoding ?? "utf8")
    if (typeof callback === "function") process.nextTick(callback)
    return true
  }

  _write(chunk, encoding, callback) {
    this.send(chunk, encoding)
    callback()
  }

  send(chunk, encoding) {
    const text = typeof chunk === "string"
      ? (encoding === "utf8" || encoding === "utf-8" || encoding === "buffer" ? chunk : Buffer.from(chunk, encoding).toString("utf8"))
      : this.decoder.write(chunk)
    sendStream(this.kind, text)
  }

  get isTTY() {
    return false
  }
}

export const stdoutStream = new FrameStream("stdout", 1)
export const stderrStream = new FrameStream("stderr", 2)

export const installOutput = () => {
  Object.defineProperty(process, "stdout", { configurable: true, enumerable: true, get: () => stdoutStream })
  Object.defineProperty(process, "stderr", { configurable: true, enumerable: true, get: () => stderrStream })
  // The global console binds process.stdout/stderr at its first use, which can come before this
  // (Node prints a start-up warning, e.g. undici's under NODE_USE_ENV_PROXY, with console.error):
  // bind it to the frame streams now, so it never keeps writing to the raw pipes.
  if (Object.getOwnPropertyDescriptor(console, "_stdout")?.set !== undefined) console._stdout = stdoutStream
  if (Object.getOwnPropertyDescriptor(console, "_stderr")?.set !== undefined) console._stderr = stderrStream
  process.removeAllListeners("warning")
  process.on("warning", (warning) => {
    if (warning.name === "ExperimentalWarning" && String(warning.message).includes("USE_MAIN_CONTEXT_DEFAULT_LOADER")) return
    stderrStream.write(`(node:${process.pid}) ${warning.name}: ${warning.message}\n`)
  })
  // Under a file-size limit a write past it fails with EFBIG (as in Python) instead of killing the kernel.
  process.on("SIGXFSZ", () => {})
}

// ---------------------------------------------------------------------------
// Child processes: stdio a cell would share with the runner becomes piped output frames

const targetOf = (entry, index) => {
  if (entry === "inherit") return index === 1 ? "stdout" : index === 2 ? "stderr" : undefined
  if (entry === 1 || entry === stdoutStream) return "stdout"
  if (entry === 2 || entry === stderrStream) return "stderr"
  return undefined
}

/** The stdio array to spawn with and which of its pipes feed which frame stream; undefined when nothing changes. */
export const redirectStdio = (stdio) => {
  if (stdio === undefined || stdio === null) return undefined
  const entries = typeof stdio === "string"
    ? stdio === "inherit" ? [0, 1, 2] : [stdio, stdio, stdio]
    : Array.isArray(stdio) ? [...stdio] : undefined
  if (entries === undefined) return undefined
  const targets = new Map()
  for (let index = 1; index < entries.length; index++) {
    const target = targetOf(entries[index], index)
    if (target !== undefined) {
      entries[index] = "pipe"
      targets.set(index, target)
    }
  }
  return targets.size === 0 ? undefined : { stdio: entries, targets }
}

const streamOf = (target) => (target === "stdout" ? stdoutStream : stderrStream)

const emitCaptured = (target, data) => {
  if (data === null || data === undefined || data.length === 0) return
  streamOf(target).write(typeof data === "string" ? data : Buffer.from(data).toString("utf8"))
}

const splitSyncArgs = (args, options) =>
  Array.isArray(args) ? { args, options: options ?? {} } : { args: [], options: args ?? {} }

const execSyncError = (command, result) => {
  const stderr = result.stderr === null || result.stderr === undefined ? "" : String(result.stderr)
  const error = result.error ?? new Error(`Command failed: ${command}${stderr ? `\n${stderr}` : ""}`)
  Object.assign(error, {
    status: result.status,
    signal: result.signal,
    output: result.output,
    pid: result.pid,
    stdout: result.stdout,
    stderr: result.stderr
  })
  return error
}

export const installChildProcess = () => {
  const { ChildProcess } = childProcess
  const spawnChild = ChildProcess.prototype.spawn
  ChildProcess.prototype.spawn = function spawn(options) {
    const plan = redirectStdio(options?.stdio)
    if (plan === undefined) return spawnChild.call(this, options)
    const result = spawnChild.call(this, { ...options, stdio: plan.stdio })
    for (const [index, target] of plan.targets) {
      const pipe = this.stdio[index]
      if (pipe === null || pipe === undefined) continue
      const decoder = new StringDecoder("utf8")
      pipe.on("data", (chunk) => streamOf(target).write(decoder.write(chunk)))
      pipe.on("end", () => streamOf(target).write(decoder.end()))
      this.stdio[index] = null
      if (index === 1) this.stdout = null
      if (index === 2) this.stderr = null
    }
    return result
  }

  const spawnSync = childProcess.spawnSync
  const patchedSpawnSync = function spawnSync_(file, args, options) {
    const split = splitSyncArgs(args, options)
    const plan = redirectStdio(split.options.stdio)
    if (plan === undefined) return spawnSync(file, args, options)
    const result = spawnSync(file, split.args, { ...split.options, stdio: plan.stdio })
    for (const [index, target] of plan.targets) {
      emitCaptured(target, result.output?.[index])
      if (result.output) result.output[index] = null
      if (index === 1) result.stdout = null
      if (index === 2) result.stderr = null
    }
    return result
  }

  const execLike = (original, toSpawn) =>
    function execSyncLike(...call) {
      const { file, args, options, command } = toSpawn(...call)
      const plan = redirectStdio(options.stdio)
      if (plan === undefined) return original(...call)
      const result = patchedSpawnSync(file, args, options)
      if (result.error !== undefined || result.status !== 0) throw execSyncError(command, result)
      return result.stdout
    }

  const patchedExecSync = execLike(childProcess.execSync, (command, options = {}) => ({
    file: command,
    args: [],
    options: { ...options, shell: typeof options.shell === "string" ? options.shell : true },
    command
  }))
  const patchedExecFileSync = execLike(childProcess.execFileSync, (file, args, options) => {
    const split = splitSyncArgs(args, options)
    return { file, args: split.args, options: split.options, command: [file, ...split.args].join(" ") }
  })

  const exports = createRequire(import.meta.url)("node:child_process")
  exports.spawnSync = patchedSpawnSync
  exports.execSync = patchedExecSync
  exports.execFileSync = patchedExecFileSync
  syncBuiltinESMExports()
}

// ---------------------------------------------------------------------------
// Writes to fd 1 and 2 through fs: frames in their place among the cell's other output (fd 1
// itself is a pipe the host reads apart from the frames, so its bytes could pass them)

const streamOfFd = (fd) => (fd === 1 ? stdoutStream : fd === 2 ? stderrStream : undefined)

/** The bytes fs.write(Sync)(fd, data, ...rest) writes, or undefined when the arguments are not ones fs takes. */
export const bytesToWrite = (data, rest) => {
  if (typeof data === "string") {
    const encoding = typeof rest[1] === "string" ? rest[1] : typeof rest[0] === "string" ? rest[0] : "utf8"
    return Buffer.isEncoding(encoding) ? Buffer.from(data, encoding) : undefined
  }
  if (!ArrayBuffer.isView(data)) return undefined
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  const options = rest[0] !== null && typeof rest[0] === "object" ? rest[0] : { offset: rest[0], length: rest[1] }
  const offset = options.offset ?? 0
  const length = options.length ?? bytes.length - offset
  if (!Number.isInteger(offset) || !Number.isInteger(length) || offset < 0 || length < 0 || offset + length > bytes.length) return undefined
  return bytes.subarray(offset, offset + length)
}

export const installFdWrites = () => {
  const fsExports = createRequire(import.meta.url)("node:fs")
  const { write, writeSync, writev, writevSync } = fsExports
  fsExports.writeSync = function writeSync_(fd, data, ...rest) {
    const stream = streamOfFd(fd)
    const bytes = stream === undefined ? undefined : bytesToWrite(data, rest)
    if (bytes === undefined) return writeSync.call(this, fd, data, ...rest)
    stream.write(bytes)
    return bytes.length
  }
  fsExports.write = function write_(fd, data, ...rest) {
    const callback = rest.at(-1)
    const stream = streamOfFd(fd)
    const bytes = stream === undefined || typeof callback !== "function" ? undefined : bytesToWrite(data, rest.slice(0, -1))
    if (bytes === undefined) return write.call(this, fd, data, ...rest)
    stream.write(bytes)
    process.nextTick(callback, null, bytes.length, data)
  }
  const gather = (buffers) => Array.isArray(buffers) && buffers.every((b) => ArrayBuffer.isView(b))
    ? Buffer.concat(buffers.map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength)))
    : undefined
  fsExports.writevSync = function writevSync_(fd, buffers, ...rest) {
    const stream = streamOfFd(fd)
    const bytes = stream === undefined ? undefined : gather(buffers)
    if (bytes === undefined) return writevSync.call(this, fd, buffers, ...rest)
    stream.write(bytes)
    return bytes.length
  }
  fsExports.writev = function writev_(fd, buffers, ...rest) {
    const callback = rest.at(-1)
    const stream = streamOfFd(fd)
    const bytes = stream === undefined || typeof callback !== "function" ? undefined : gather(buffers)
    if (bytes === undefined) return writev.call(this, fd, buffers, ...rest)
    stream.write(bytes)
    process.nextTick(callback, null, bytes.length, buffers)
  }
  syncBuiltinESMExports()
}
