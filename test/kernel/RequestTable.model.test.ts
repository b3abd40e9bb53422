/**
 * The request table and its frame router against a reference model written here: a table of
 * what each operation (open, close, a runner frame, a stop, a failure) does to the open set,
 * the current request and each request's state, compared step by step over random operation
 * sequences, plus progress properties a table that drops or reorders things fails.
 */
import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Cause, Deferred, Effect, Exit, Fiber, Logger, References } from "effect"
import { type DoneFrame, EGRESS_STATUS_OP, ErrorFrame, type RunnerFrame, STATUS_MIME } from "../../src/kernel/Frame.ts"
import { KernelClosed } from "../../src/kernel/KernelError.ts"
import { KernelOutput } from "../../src/kernel/KernelOutput.ts"
import type { InterruptReason } from "../../src/kernel/Lifecycle.ts"
import {
  abortRequest,
  awaitUntil,
  type CellRequest,
  failRequest,
  executeLine,
  frameRouter,
  type QueryReply,
  RequestTable,
  stopBecause,
  stopRequest,
  stopRequestNow
} from "../../src/kernel/RequestTable.ts"
import { constantFrom, integer, oneOf, sized } from "./arbitraries.ts"

type Op =
  | { readonly op: "add" }
  | { readonly op: "remove"; readonly pick: number }
  | { readonly op: "frame"; readonly kind: "started" | "stdout" | "stderr" | "done"; readonly pick: number; readonly n: number }
  | { readonly op: "stray"; readonly kind: "started" | "stdout" | "done"; readonly n: number }
  | { readonly op: "stop"; readonly pick: number; readonly reason: InterruptReason; readonly now: boolean }
  | { readonly op: "fail"; readonly pick: number; readonly n: number }

/** What the model says about one request. */
interface Model {
  readonly id: string
  open: boolean
  started: boolean
  /** The executionCount of the last `done` frame routed to it. */
  done: number | undefined
  /** The first ending: `finished:<count>`, `stop:<reason>` or `failed:<n>`. */
  ended: string | undefined
  failure: number | undefined
  readonly outputs: Array<string>
  readonly onDone: Array<number>
}

interface World {
  readonly models: Array<Model>
  current: string | undefined
}

/** The model: what each operation does, on plain records. */
const step = (world: World, op: Op): void => {
  const picked = (pick: number): Model | undefined => world.models.length === 0 ? undefined : world.models[pick % world.models.length]
  switch (op.op) {
    case "add": {
      const id = `r${world.models.length + 1}`
      world.models.push({ id, open: true, started: false, done: undefined, ended: undefined, failure: undefined, outputs: [], onDone: [] })
      world.current = id
      return
    }
    case "remove": {
      const model = picked(op.pick)
      if (model === undefined) return
      model.open = false
      if (world.current === model.id) world.current = undefined
      return
    }
    case "frame": {
      const model = picked(op.pick)
      if (model === undefined || !model.open) return
      if (op.kind === "started") model.started = true
      if (op.kind === "stdout") model.outputs.push(`Stdout:${op.n}`)
      if (op.kind === "stderr") model.outputs.push(`Stderr:${op.n}`)
      if (op.kind === "done") {
        model.onDone.push(op.n)
        model.done = op.n
        model.ended ??= `finished:${op.n}`
      }
      return
    }
    case "stray":
      return
    case "stop": {
      const model = picked(op.pick)
      if (model !== undefined) model.ended ??= `stop:${op.reason}`
      return
    }
    case "fail": {
      const model = picked(op.pick)
      if (model === undefined) return
      model.failure ??= op.n
      model.ended ??= `failed:${op.n}`
    }
  }
}

const doneFrame = (id: string, executionCount: number): DoneFrame => ({ type: "done", id, status: "ok", executionCount, cancelled: false })

const frameOf = (kind: "started" | "stdout" | "stderr" | "done", id: string, n: number): RunnerFrame =>
  kind === "started" ? { type: "started", id } : kind === "done" ? doneFrame(id, n) : { type: kind, id, data: String(n) }

/** The implementation side: a table, its router, and the requests it opened, in order. */
const makeSystem = () => {
  const table = new RequestTable()
  const requests: Array<CellRequest> = []
  const outputs = new Map<string, Array<string>>()
  const onDone = new Map<string, Array<number>>()
  const failures: Array<KernelClosed> = []
  const route = frameRouter(table, {
    onDone: (request, frame) =>
      Effect.sync(() => {
        expect(request.done, "onDone runs before the request records its done").not.toBe(frame)
        onDone.get(request.id)!.push(frame.executionCount)
      }),
    onBridge: () => Effect.void
  })
  const apply = (op: Op): void => {
    const picked = (pick: number) => requests.length === 0 ? undefined : requests[pick % requests.length]
    switch (op.op) {
      case "add": {
        const seen: Array<string> = []
        const request = table.add((output: KernelOutput) =>
          Effect.sync(() => seen.push(`${output._tag}:${"text" in output ? output.text : ""}`))
        )
        outputs.set(request.id, seen)
        onDone.set(request.id, [])
        requests.push(request)
        return
      }
      case "remove": {
        const request = picked(op.pick)
        if (request !== undefined) table.remove(request)
        return
      }
      case "frame": {
        const request = picked(op.pick)
        if (request !== undefined) Effect.runSync(route(frameOf(op.kind, request.id, op.n)))
        return
      }
      case "stray":
        Effect.runSync(route(frameOf(op.kind, `r${requests.length + 1 + op.n}`, op.n)))
        return
      case "stop": {
        const request = picked(op.pick)
        if (request === undefined) return
        if (op.now) stopRequestNow(request, op.reason)
        else Effect.runSync(stopRequest(request, op.reason))
        return
      }
      case "fail": {
        const request = picked(op.pick)
        if (request === undefined) return
        failures[op.n] ??= new KernelClosed({ reason: `failure ${op.n}` })
        Effect.runSync(failRequest(request, failures[op.n]!))
      }
    }
  }
  const endingOf = (request: CellRequest): string | undefined => {
    if (!Deferred.isDoneUnsafe(request.ended)) return undefined
    const exit = Effect.runSyncExit(Deferred.await(request.ended))
    if (Exit.isSuccess(exit)) {
      return exit.value._tag === "finished" ? `finished:${exit.value.frame.executionCount}` : `stop:${exit.value.reason}`
    }
    const error = exit.cause.reasons.find((reason) => reason._tag === "Fail")
    return error === undefined ? "other" : `failed:${failures.indexOf(error.error as KernelClosed)}`
  }
  /** The implementation's state, in the model's terms. */
  const observe = (): World => ({
    current: table.current?.id,
    models: requests.map((request) => ({
      id: request.id,
      open: table.get(request.id) === request,
      started: request.started,
      done: request.done?.executionCount,
      ended: endingOf(request),
      failure: request.failure === undefined ? undefined : failures.indexOf(request.failure as KernelClosed),
      outputs: outputs.get(request.id)!,
      onDone: onDone.get(request.id)!
    }))
  })
  return { table, requests, apply, observe }
}

const pick = integer(0, 7)
const count = integer(0, 3)
const ops: Arbitrary.Arbitrary<Op> = oneOf<Op>(
  Arbitrary.Constant({ op: "add" } as const),
  Arbitrary.Constant({ op: "add" } as const),
  Arbitrary.map(pick, (p) => ({ op: "remove", pick: p }) as const),
  Arbitrary.map(
    Arbitrary.all([constantFrom("started", "stdout", "stderr", "done"), pick, count]),
    ([kind, p, n]) => ({ op: "frame", kind, pick: p, n }) as const
  ),
  Arbitrary.map(Arbitrary.all([constantFrom("started", "stdout", "done"), count]), ([kind, n]) => ({ op: "stray", kind, n }) as const),
  Arbitrary.map(
    Arbitrary.all([pick, constantFrom<InterruptReason>("timeout", "cancel", "abandon"), constantFrom(true, false)]),
    ([p, reason, now]) => ({ op: "stop", pick: p, reason, now }) as const
  ),
  Arbitrary.map(Arbitrary.all([pick, count]), ([p, n]) => ({ op: "fail", pick: p, n }) as const)
)
const runs = Arbitrary.array(ops, { maxLength: 40 })

describe("RequestTable against its model", () => {
  it.prop("agrees with the model after every operation", [runs], ([sequence]) => {
    const system = makeSystem()
    const world: World = { models: [], current: undefined }
    for (const op of sequence) {
      step(world, op)
      system.apply(op)
      expect(system.observe(), JSON.stringify(op)).toEqual(world)
    }
  }, sized(40))

  it.prop("mints a fresh id for every request, and the newest open one is current", [runs], ([sequence]) => {
    const system = makeSystem()
    for (const op of sequence) system.apply(op)
    const ids = system.requests.map((request) => request.id)
    expect(new Set(ids).size).toBe(ids.length)
    expect(system.table.newId("q")).toBe(`q${ids.length + 1}`)
  }, sized(40))
})

describe("RequestTable progress", () => {
  it("an opened request is current and found by its id; a fresh request has nothing set", () => {
    const table = new RequestTable()
    const request = table.add(() => Effect.void)
    expect(table.current).toBe(request)
    expect(table.get(request.id)).toBe(request)
    expect(request).toMatchObject({ id: "r1", started: false, done: undefined, failure: undefined, wake: undefined })
    expect(Deferred.isDoneUnsafe(request.ended)).toBe(false)
    table.remove(request)
    expect(table.get(request.id)).toBeUndefined()
    expect(table.current).toBeUndefined()
  })

  it("closing an older request leaves the newer one current", () => {
    const table = new RequestTable()
    const older = table.add(() => Effect.void)
    const newer = table.add(() => Effect.void)
    table.remove(older)
    expect(table.current).toBe(newer)
  })

  it.effect("a waiter for started wakes when the started frame is routed, and one for done when done is", () =>
    Effect.gen(function*() {
      const table = new RequestTable()
      const request = table.add(() => Effect.void)
      const route = frameRouter(table, { onDone: () => Effect.void, onBridge: () => Effect.void })
      const started = yield* Effect.forkChild(awaitUntil(request, (r) => r.started))
      const done = yield* Effect.forkChild(awaitUntil(request, (r) => r.done !== undefined))
      yield* Effect.yieldNow
      expect(request.wake).toBeDefined()
      yield* route({ type: "started", id: request.id })
      yield* Fiber.join(started)
      expect(done.pollUnsafe()).toBeUndefined()
      yield* route(doneFrame(request.id, 7))
      yield* Fiber.join(done)
      expect(yield* Deferred.await(request.ended)).toEqual({ _tag: "finished", frame: doneFrame(request.id, 7) })
    }))

  it.effect("a waiter fails with the request's failure, at once when it already failed", () =>
    Effect.gen(function*() {
      const table = new RequestTable()
      const request = table.add(() => Effect.void)
      const error = new KernelClosed({ reason: "gone" })
      const waiting = yield* Effect.forkChild(awaitUntil(request, (r) => r.started))
      yield* Effect.yieldNow
      yield* failRequest(request, error)
      expect(yield* Effect.flip(Fiber.join(waiting))).toBe(error)
      expect(yield* Effect.flip(awaitUntil(request, (r) => r.started))).toBe(error)
      expect(yield* Effect.flip(Deferred.await(request.ended))).toBe(error)
    }))

  it.effect("a waiter whose condition holds returns even after a failure", () =>
    Effect.gen(function*() {
      const table = new RequestTable()
      const request = table.add(() => Effect.void)
      yield* frameRouter(table, { onDone: () => Effect.void, onBridge: () => Effect.void })({ type: "started", id: request.id })
      yield* failRequest(request, new KernelClosed({ reason: "gone" }))
      yield* awaitUntil(request, (r) => r.started)
    }))
})

describe("frameRouter routes each frame kind", () => {
  const setup = () => {
    const table = new RequestTable()
    const seen: Array<KernelOutput> = []
    const bridged: Array<string> = []
    const request = table.add((output) => Effect.sync(() => seen.push(output)))
    const route = frameRouter(table, {
      onDone: () => Effect.void,
      onBridge: (r, frame) => Effect.sync(() => bridged.push(`${r.id}:${frame.type}`))
    })
    return { table, seen, bridged, request, route }
  }
  const logs = (logged: Array<string>) => Logger.layer([Logger.make(({ logLevel, message }) => logged.push(`${logLevel}:${String(message)}`))])

  it.effect("hands results, errors and displays on as outputs of their kind, and bridge calls to onBridge", () =>
    Effect.gen(function*() {
      const { bridged, request, route, seen } = setup()
      yield* route({ type: "result", id: request.id, bundle: { "text/plain": "1" } })
      yield* route(new ErrorFrame({ type: "error", id: request.id, ename: "E", evalue: "v", traceback: ["t"] }))
      yield* route({ type: "display", id: request.id, bundle: { "text/html": "<b>" } })
      yield* route({ type: "stderr", id: request.id, data: "warn" })
      yield* route({ type: "bridge", id: request.id, call: "c1", method: "agent", params: {} } as unknown as RunnerFrame)
      expect(seen).toEqual([
        KernelOutput.Result({ bundle: { "text/plain": "1" } }),
        KernelOutput.Error({ ename: "E", evalue: "v", traceback: ["t"] }),
        KernelOutput.Display({ bundle: { "text/html": "<b>" } }),
        KernelOutput.Stderr({ text: "warn" })
      ])
      expect(bridged).toEqual([`${request.id}:bridge`])
    }))

  it.effect("drops an egress status a runner sends: only the host's egress proxy reports egress", () =>
    Effect.gen(function*() {
      const { request, route, seen } = setup()
      const logged: Array<string> = []
      const forged = { op: EGRESS_STATUS_OP, outcome: "refused", host: "evil.test", port: 80, via: "http", reason: "not-listed" }
      yield* route({ type: "display", id: request.id, bundle: { [STATUS_MIME]: forged } }).pipe(
        Effect.provide(logs(logged)),
        Effect.provideService(References.MinimumLogLevel, "Debug")
      )
      yield* route({ type: "display", id: request.id, bundle: { [STATUS_MIME]: { op: "progress", n: 1 } } })
      expect(seen).toEqual([KernelOutput.Status({ op: "progress", fields: { n: 1 } })])
      expect(logged).toEqual([`Debug:dropped an egress status event the cell of request ${request.id} sent: only the egress proxy reports egress`])
    }))

  it.effect("turns a status bundle into a Status output, and a timeout status pauses or resumes the watchdog", () =>
    Effect.gen(function*() {
      const { request, route, seen } = setup()
      const calls: Array<string> = []
      request.watchdog = { pause: Effect.sync(() => calls.push("pause")), resume: Effect.sync(() => calls.push("resume")) } as never
      const status = (value: unknown) => route({ type: "display", id: request.id, bundle: { [STATUS_MIME]: value } })
      yield* status({ op: "timeout", action: "other" })
      yield* status({ op: "timeout", action: "pause" })
      yield* status({ op: "timeout", action: "resume" })
      yield* status({ op: "progress", action: "pause", n: 1 })
      expect(calls).toEqual(["pause", "resume"])
      expect(seen).toEqual([
        KernelOutput.Status({ op: "timeout", fields: { action: "other" } }),
        KernelOutput.Status({ op: "timeout", fields: { action: "pause" } }),
        KernelOutput.Status({ op: "timeout", fields: { action: "resume" } }),
        KernelOutput.Status({ op: "progress", fields: { action: "pause", n: 1 } })
      ])
      request.watchdog = undefined
      yield* status({ op: "timeout", action: "pause" })
      for (const notStatus of [null, "x", [1], { op: 3 }]) yield* status(notStatus)
      expect(seen.slice(5).map((output) => output._tag)).toEqual(["Display", "Display", "Display", "Display"])
    }))

  it.effect("answers a query by its id, and logs replies and frames nobody awaits", () => {
    const logged: Array<string> = []
    return Effect.gen(function*() {
      const { route, seen, table } = setup()
      const query = yield* Deferred.make<QueryReply>()
      table.queries.set("q9", query)
      const reply = { type: "complete_reply", id: "q9", matches: ["a"], cursorStart: 0, cursorEnd: 1 } as unknown as RunnerFrame
      yield* route(reply)
      expect(yield* Deferred.await(query)).toBe(reply)
      yield* route({ ...reply, id: "q10" } as RunnerFrame)
      yield* route({ type: "inspect_reply", id: "q11", found: false, bundle: {} } as unknown as RunnerFrame)
      yield* route(new ErrorFrame({ type: "error", id: null, ename: "E", evalue: "v", traceback: [] }))
      yield* route(new ErrorFrame({ type: "error", ename: "F", evalue: "w", traceback: [] }))
      yield* route({ type: "started", id: "r99" })
      yield* route({ type: "stdout", id: "r99", data: "x" })
      expect(seen).toEqual([])
      expect(logged).toEqual([
        "Debug:dropped a complete_reply for q10, which nobody awaits",
        "Debug:dropped a inspect_reply for q11, which nobody awaits",
        "Warn:runner reported an error outside any request: E: v",
        "Warn:runner reported an error outside any request: F: w",
        "Debug:dropped a stdout frame for request r99, which is not running"
      ])
    }).pipe(Effect.provide(logs(logged)), Effect.provideService(References.MinimumLogLevel, "All"))
  })

  it.effect("routes a snapshot's chunks and end and a restore's end to their transfer, fails one that sends too much or errors, and logs the rest", () => {
    const logged: Array<string> = []
    return Effect.gen(function*() {
      const { route, seen, table } = setup()
      const transfer = (maxBytes: number) => ({ chunks: [] as Array<Uint8Array>, bytes: 0, maxBytes, ended: Deferred.makeUnsafe<never, string>() as never })
      const snapshot = transfer(8) as { chunks: Array<Uint8Array>; bytes: number; maxBytes: number; ended: Deferred.Deferred<RunnerFrame, string> }
      table.transfers.set("s1", snapshot as never)
      yield* route({ type: "snapshot_chunk", id: "s1", data: Buffer.from("abc").toString("base64") })
      yield* route({ type: "snapshot_chunk", id: "s1", data: Buffer.from("defgh").toString("base64") })
      expect(snapshot.bytes).toBe(8)
      expect(snapshot.chunks.map((chunk) => Buffer.from(chunk).toString())).toEqual(["abc", "defgh"])
      expect(Deferred.isDoneUnsafe(snapshot.ended)).toBe(false)
      const end = { type: "snapshot_done", id: "s1", status: "saved", names: ["x"], skipped: [] } as unknown as RunnerFrame
      yield* route(end)
      expect(yield* Deferred.await(snapshot.ended)).toBe(end)

      const over = transfer(4) as typeof snapshot
      table.transfers.set("s2", over as never)
      yield* route({ type: "snapshot_chunk", id: "s2", data: Buffer.from("abcd").toString("base64") })
      expect(over.chunks).toHaveLength(1)
      yield* route({ type: "snapshot_chunk", id: "s2", data: Buffer.from("e").toString("base64") })
      expect(over.chunks).toHaveLength(0)
      expect(yield* Effect.flip(Deferred.await(over.ended))).toBe("the runner sent more than the 4 bytes the snapshot may hold")

      const restore = transfer(0) as typeof snapshot
      table.transfers.set("t1", restore as never)
      const restored = { type: "restore_done", id: "t1", restored: ["x"], skipped: [] } as unknown as RunnerFrame
      yield* route({ type: "done", id: "t1", status: "error", executionCount: 0, cancelled: false })
      expect(Deferred.isDoneUnsafe(restore.ended)).toBe(false)
      yield* route(restored)
      expect(yield* Deferred.await(restore.ended)).toBe(restored)

      const refused = transfer(0) as typeof snapshot
      table.transfers.set("s3", refused as never)
      yield* route(new ErrorFrame({ type: "error", id: "s3", ename: "ProtocolError", evalue: "unknown message type", traceback: [] }))
      expect(yield* Effect.flip(Deferred.await(refused.ended))).toBe("ProtocolError: unknown message type")

      yield* route({ type: "snapshot_chunk", id: "s9", data: "" })
      yield* route({ type: "restore_done", id: "t9", restored: [], skipped: [] } as unknown as RunnerFrame)
      expect(seen).toEqual([])
      expect(logged).toEqual([
        "Debug:dropped a snapshot_chunk for s9, which nobody awaits",
        "Debug:dropped a restore_done for t9, which nobody awaits"
      ])
    }).pipe(Effect.provide(logs(logged)), Effect.provideService(References.MinimumLogLevel, "All"))
  })

  it("writes an execute line with the defaults, and cwd and env only when given", () => {
    expect(executeLine("r1", { code: "1" })).toBe('{"id":"r1","code":"1","silent":false,"storeHistory":true}\n')
    expect(executeLine("r2", { code: "x", silent: true, storeHistory: false, cwd: "/w", env: { A: "1" } })).toBe(
      '{"id":"r2","code":"x","silent":true,"storeHistory":false,"cwd":"/w","env":{"A":"1"}}\n'
    )
  })

  it.effect("ends a request with its handler's failure when aborted", () =>
    Effect.gen(function*() {
      const { request } = setup()
      yield* abortRequest(request, Cause.die("boom"))
      const exit = yield* Effect.exit(Deferred.await(request.ended))
      expect(Exit.isFailure(exit) && Cause.hasDies(exit.cause)).toBe(true)
      yield* stopRequest(request, "cancel")
      expect(Deferred.isDoneUnsafe(request.ended)).toBe(true)
      expect(stopBecause("timeout")).toEqual({ _tag: "stop", reason: "timeout" })
    }))
})
