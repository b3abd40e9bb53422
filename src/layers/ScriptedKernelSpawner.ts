/**
 * A scripted fake of `KernelSpawner` for lifecycle tests: each spawned "process" speaks
 * the runner protocol from a tiny command language instead of running Python, records
 * the signals it receives, and reacts to them the way the real runner does.
 *
 * A cell's code is a `;`-separated list of commands:
 * - `print TEXT`: a stdout frame; `display`: a display frame
 * - `sleep`: wait until SIGINT, then end the cell cancelled (KeyboardInterrupt)
 * - `hang`: ignore SIGINT forever (only SIGTERM or SIGKILL end it)
 * - `hang-hard`: also ignore SIGTERM and the exit request, like C code holding the GIL (only SIGKILL ends it)
 * - `exit N`: the process exits with status N
 * - `crash-once N`: the first process of this spawner to run it exits with status N; later ones go on
 * - `bridge METHOD`: a bridge call; its answer is printed as JSON
 * - `pause` / `resume`: timeout status events
 * - `raise`: an error frame; the cell ends with status error
 * - `wait MS`: wait MS milliseconds of the clock
 * Empty code (init, prelude) just completes. A snapshot is answered at once with an empty
 * payload of no names (a session whose state holds nothing), a restore with nothing restored;
 * neither is recorded among the requests.
 */
import { type Cause, Deferred, Duration, Effect, Fiber, Layer, Option, Queue, Stream } from "effect"
import { KernelSpawner, StdinClosed, type KernelProcess, type KernelSignal, type ProcessExit } from "../kernel/KernelProcess.ts"

/** What the test can observe of one fake process. */
export interface ScriptedProcessRecord {
  readonly pid: number
  /** The command it was spawned as. */
  readonly command: string
  readonly signals: Array<KernelSignal>
  readonly requests: Array<string>
  /** Signals that arrived while no cell was running. */
  readonly idleSignals: Array<KernelSignal>
  /** Requests that arrived while another was still running. */
  overlaps: number
  exit: ProcessExit | undefined
  /** Ends the process from outside the kernel, as `kill -SIG pid` would. */
  killFromOutside: (signal: KernelSignal) => Effect.Effect<void>
}

/** The fakes spawned so far. */
export interface ScriptedSpawns {
  readonly records: Array<ScriptedProcessRecord>
  crashed: boolean
}

let nextPid = 100_000

/** The SHA-256 of no bytes: the digest of the fake's empty snapshot payload. */
const EMPTY_DIGEST = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

const line = (frame: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(frame) + "\n")

const spawnScripted = Effect.fnUntraced(function*(spawns: ScriptedSpawns, command: string) {
  const pid = nextPid++
  const record: ScriptedProcessRecord = {
    pid,
    command,
    signals: [],
    requests: [],
    idleSignals: [],
    overlaps: 0,
    exit: undefined,
    killFromOutside: () => Effect.void
  }
  spawns.records.push(record)
  const stdout = yield* Queue.unbounded<Uint8Array, Cause.Done>()
  const stdin = yield* Queue.unbounded<string>()
  const exited = yield* Deferred.make<ProcessExit>()
  const bridgeAnswers = new Map<string, Deferred.Deferred<unknown>>()
  let sigint = yield* Deferred.make<void>()
  let running = false
  let ignoreTerm = false
  let executionCount = 0

  const finish = (exit: ProcessExit) =>
    Effect.gen(function*() {
      if (record.exit !== undefined) return
      record.exit = exit
      yield* Queue.end(stdout)
      yield* Deferred.succeed(exited, exit)
    })
  record.killFromOutside = (signal) => finish({ code: null, signal })
  const emit = (frame: unknown) => (record.exit === undefined ? Effect.asVoid(Queue.offer(stdout, line(frame))) : Effect.void)

  const runCommand = (id: string, command: string): Effect.Effect<"continue" | "error" | "cancelled"> => {
    const [verb = "", ...rest] = command.trim().split(" ")
    const arg = rest.join(" ")
    switch (verb) {
      case "":
        return Effect.succeed("continue")
      case "print":
        return Effect.as(emit({ type: "stdout", id, data: `${arg}\n` }), "continue")
      case "display":
        return Effect.as(emit({ type: "display", id, bundle: { "text/plain": arg } }), "continue")
      case "pause":
      case "resume":
        return Effect.as(
          emit({ type: "display", id, bundle: { "application/x-veyyon-status": { op: "timeout", action: verb } } }),
          "continue"
        )
      case "raise":
        return Effect.as(emit({ type: "error", id, ename: "ValueError", evalue: arg, traceback: [`ValueError: ${arg}`] }), "error")
      case "wait":
        return Effect.as(Effect.sleep(Duration.millis(Number(arg))), "continue")
      case "sleep":
        return Deferred.await(sigint).pipe(
          Effect.andThen(emit({ type: "error", id, ename: "KeyboardInterrupt", evalue: "", traceback: ["KeyboardInterrupt"] })),
          Effect.as("cancelled" as const)
        )
      case "hang":
      case "hang-hard":
        ignoreTerm = verb === "hang-hard"
        return Effect.never
      case "exit":
        return Effect.andThen(finish({ code: Number(arg), signal: null }), Effect.never)
      case "crash-once":
        if (spawns.crashed) return Effect.succeed("continue")
        spawns.crashed = true
        return Effect.andThen(finish({ code: Number(arg), signal: null }), Effect.never)
      case "bridge": {
        const callId = `c${Math.random().toString(36).slice(2)}`
        return Effect.gen(function*() {
          const answer = yield* Deferred.make<unknown>()
          bridgeAnswers.set(callId, answer)
          yield* emit({ type: "bridge", id, callId, method: arg, params: { prompt: "hi" } })
          const value = yield* Deferred.await(answer)
          yield* emit({ type: "stdout", id, data: `${JSON.stringify(value)}\n` })
          return "continue" as const
        })
      }
      default:
        return Effect.as(emit({ type: "error", id, ename: "NameError", evalue: verb, traceback: [] }), "error")
    }
  }

  const runRequest = (request: { id: string; code: string; silent?: boolean; storeHistory?: boolean }) =>
    Effect.gen(function*() {
      record.requests.push(request.code)
      running = true
      sigint = yield* Deferred.make<void>()
      yield* emit({ type: "started", id: request.id })
      let outcome: "continue" | "error" | "cancelled" = "continue"
      for (const command of request.code.split(";")) {
        outcome = yield* runCommand(request.id, command)
        if (outcome !== "continue") break
      }
      if (request.silent !== true && request.storeHistory !== false) executionCount++
      running = false
      yield* emit({
        type: "done",
        id: request.id,
        status: outcome === "continue" ? "ok" : "error",
        executionCount,
        cancelled: outcome === "cancelled"
      })
    })

  const server = yield* Effect.gen(function*() {
    while (record.exit === undefined) {
      const request = JSON.parse(yield* Queue.take(stdin)) as {
        id: string
        code: string
        silent?: boolean
        storeHistory?: boolean
      }
      yield* runRequest(request).pipe(Effect.raceFirst(Deferred.await(exited)))
    }
  }).pipe(Effect.forkDetach)

  const readLine = (text: string) =>
    Effect.suspend(() => {
      const frame = JSON.parse(text) as Record<string, unknown>
      if (frame.type === "exit") return ignoreTerm ? Effect.void : finish({ code: 0, signal: null })
      if (frame.type === "snapshot") {
        return emit({ type: "snapshot_done", id: frame.id, status: "saved", digest: EMPTY_DIGEST, bytes: 0, names: [], skipped: [] })
      }
      if (frame.type === "restore") return frame.more === true ? Effect.void : emit({ type: "restore_done", id: frame.id, restored: [], skipped: [] })
      if (frame.type !== "bridge_result") {
        if (running) record.overlaps++
        return Queue.offer(stdin, text)
      }
      const answer = bridgeAnswers.get(String(frame.callId))
      return answer === undefined ? Effect.void : Deferred.succeed(answer, frame.ok === true ? frame.value : frame.error)
    })

  const signal = (sig: KernelSignal) =>
    Effect.gen(function*() {
      if (record.exit !== undefined) return
      record.signals.push(sig)
      if (!running) record.idleSignals.push(sig)
      if (sig === "SIGINT") {
        if (running) yield* Deferred.succeed(sigint, undefined)
      } else if (sig === "SIGKILL" || !ignoreTerm) {
        yield* finish({ code: null, signal: sig })
      }
    })

  yield* Effect.addFinalizer(() =>
    Effect.gen(function*() {
      yield* signal("SIGKILL")
      yield* Fiber.interrupt(server)
    })
  )

  const handle: KernelProcess = {
    pid,
    stdout: Stream.fromQueue(stdout),
    stderr: Stream.empty,
    write: (text) =>
      record.exit !== undefined
        ? Effect.fail(new StdinClosed({ pid }))
        : Effect.forEach(text.split("\n").filter((l) => l.length > 0), readLine, { discard: true }),
    signal,
    exited: Deferred.await(exited),
    exitNow: Effect.sync(() => record.exit)
  }
  return handle
})

/** A scripted spawner and the records of what it spawned. */
export const makeScriptedSpawner = (): { readonly spawns: ScriptedSpawns; readonly layer: Layer.Layer<KernelSpawner> } => {
  const spawns: ScriptedSpawns = { records: [], crashed: false }
  return { spawns, layer: Layer.succeed(KernelSpawner, { spawn: (spec) => spawnScripted(spawns, spec.command) }) }
}

/** Whether every process a scripted spawner started has exited. */
export const allExited = (spawns: ScriptedSpawns): boolean => spawns.records.every((r) => r.exit !== undefined)

/** The record of the most recent spawn, if any. */
export const lastSpawn = (spawns: ScriptedSpawns): Option.Option<ScriptedProcessRecord> =>
  Option.fromNullishOr(spawns.records[spawns.records.length - 1])
