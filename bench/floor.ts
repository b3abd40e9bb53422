/**
 * The Node side of the floor: spawns `floor.py` the way the kernel spawner does
 * (detached, three pipes), writes request lines and splits reply lines.
 */
import { spawn, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { Deferred, Effect, Exit } from "effect"

/** The floor loop's script. */
export const FLOOR_SCRIPT = fileURLToPath(new URL("./floor.py", import.meta.url))

/** A frame the floor replied with. */
export interface FloorFrame {
  readonly type: string
  readonly id?: string
  readonly status?: string
  readonly data?: string
  readonly bundle?: Readonly<Record<string, string>>
}

/** A running floor loop. */
export interface Floor {
  readonly pid: number
  /** Runs one cell; resolves with its `done` frame. `onFrame` sees every frame before it. */
  readonly run: (code: string, onFrame?: (frame: FloorFrame) => void) => Promise<FloorFrame>
  /** Sends one cell; `onDone` is called from the stdout `data` callback with its `done` frame. */
  readonly send: (code: string, onDone: (frame: FloorFrame) => void) => void
  /** Sends SIGINT to the loop. */
  readonly interrupt: () => void
  /** Kills the loop and waits for its exit. */
  readonly close: () => Promise<void>
}

const exited = (child: ChildProcess): Promise<void> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once("exit", () => resolve()))

/** Spawns a floor loop with `python`; resolves once the process runs. */
export const startFloor = (python: string): Promise<Floor> =>
  new Promise((resolve, reject) => {
    const child = spawn(python, ["-u", FLOOR_SCRIPT], { detached: true, stdio: ["pipe", "pipe", "pipe"] })
    let pending: { id: string; resolve: (frame: FloorFrame) => void; onFrame?: (frame: FloorFrame) => void } | undefined
    let partial: Array<string> = []
    let next = 0
    const onLine = (line: string) => {
      const frame = JSON.parse(line) as FloorFrame
      const waiter = pending
      if (waiter === undefined) return
      if (frame.type === "done" && frame.id === waiter.id) {
        pending = undefined
        waiter.resolve(frame)
      } else {
        waiter.onFrame?.(frame)
      }
    }
    child.stdout!.setEncoding("utf8")
    child.stdout!.on("data", (chunk: string) => {
      let start = 0
      let newline = chunk.indexOf("\n")
      while (newline >= 0) {
        partial.push(chunk.slice(start, newline))
        const line = partial.length === 1 ? partial[0]! : partial.join("")
        partial = []
        onLine(line)
        start = newline + 1
        newline = chunk.indexOf("\n", start)
      }
      if (start < chunk.length) partial.push(chunk.slice(start))
    })
    child.stderr!.resume()
    child.once("error", reject)
    child.once("spawn", () =>
      resolve({
        pid: child.pid!,
        run: (code, onFrame) =>
          new Promise((done) => {
            const id = `f${++next}`
            pending = { id, resolve: done, ...(onFrame === undefined ? {} : { onFrame }) }
            child.stdin!.write(JSON.stringify({ id, code }) + "\n")
          }),
        send: (code, onDone) => {
          const id = `f${++next}`
          pending = { id, resolve: onDone }
          child.stdin!.write(JSON.stringify({ id, code }) + "\n")
        },
        interrupt: () => {
          child.kill("SIGINT")
        },
        close: async () => {
          try {
            process.kill(-child.pid!, "SIGKILL")
          } catch {
            child.kill("SIGKILL")
          }
          await exited(child)
        }
      })
    )
  })

/** The raw pipe rate: Python prints `lines` 1 KiB lines into a pipe Node reads. Returns bytes and milliseconds. */
export const rawPipe = (python: string, lines: number): Promise<{ bytes: number; ms: number }> =>
  new Promise((resolve, reject) => {
    const child = spawn(python, [FLOOR_SCRIPT, "pipe", String(lines)], { stdio: ["pipe", "pipe", "pipe"] })
    let bytes = 0
    let started = 0
    child.stdout!.on("data", (chunk: Buffer) => {
      bytes += chunk.length
    })
    child.once("error", reject)
    child.stderr!.once("data", () => {
      started = performance.now()
      child.stdin!.write("go\n")
    })
    child.stdout!.once("end", () => resolve({ bytes, ms: performance.now() - started }))
  })

/**
 * The floor loop driven from Effect with the least Effect can do: per cell one `Deferred`,
 * resolved from the stdout `data` callback when the `done` line arrives. Measures what the
 * fiber runtime itself costs a cell, beside the plain Node floor.
 */
export const effectFloor = async (python: string): Promise<{ readonly run: (code: string) => Effect.Effect<void>; readonly close: () => Promise<void> }> => {
  const floor = await startFloor(python)
  return {
    run: (code) =>
      Effect.flatMap(Deferred.make<void>(), (done) =>
        Effect.andThen(
          Effect.sync(() => floor.send(code, () => Deferred.doneUnsafe(done, Exit.void))),
          Deferred.await(done)
        )),
    close: floor.close
  }
}
