/**
 * `Subprocess.start` and `runCommand` against real processes: the environment is exactly
 * what is given, the cwd applies, fd 3 is a socket, the child leads its own process group,
 * and the scope's close or an interruption at any moment kills that whole group.
 */
import * as fs from "node:fs"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Option, Scope } from "effect"
import { SpawnError } from "../../src/kernel/KernelProcess.ts"
import { runCommand } from "../../src/process/RunCommand.ts"
import { start } from "../../src/process/Subprocess.ts"
import { eventually, isLive, liveWithMark, procStat, uniqueSleep } from "../support/process.ts"
import { tempDir } from "../support/tempDirs.ts"

const PATH = process.env.PATH ?? "/usr/bin:/bin"

/** Whether process `pid` runs `sleep` (it has exec'd). */
const isSleep = (pid: number): boolean => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0] === "sleep"
  } catch {
    return false
  }
}

/** A shell that starts a sleeper in its own group and then becomes another. */
const sleepers = (mark: string) => ({ command: "/bin/sh", args: ["-c", `sleep ${mark} & exec sleep ${mark}`], env: { PATH } })

const readAll = (stream: NodeJS.ReadableStream) =>
  Effect.promise(() =>
    new Promise<string>((resolve) => {
      let text = ""
      stream.on("data", (chunk: Buffer) => (text += chunk.toString()))
      stream.once("end", () => resolve(text))
    })
  )

describe("Subprocess.start", () => {
  it.live("gives the child exactly the environment given, in the cwd given", () =>
    Effect.gen(function*() {
      const dir = fs.realpathSync(tempDir("veyyon-subprocess-"))
      const result = yield* runCommand({
        command: "/bin/sh",
        args: ["-c", "printf '%s|%s|%s|%s' \"$KEPT\" \"${DROPPED-unset}\" \"${HOME-unset}\" \"$(pwd)\""],
        cwd: dir,
        env: { PATH, KEPT: "yes", DROPPED: undefined }
      })
      expect(result).toEqual({ exit: { code: 0, signal: null }, stdout: `yes|unset|unset|${dir}`, stderr: "" })
    }))

  it.live("leads a process group of its own, and gives a socket at fd 3 when asked", () =>
    Effect.gen(function*() {
      const proc = yield* start({ command: "/bin/sh", args: ["-c", "read -r line <&3; echo \"got $line\" >&3"], env: { PATH }, stdin: "ignore", fd3: true })
      expect(procStat(proc.pid)?.pgrp).toBe(proc.pid)
      proc.fd3!.write("hello\n")
      expect(yield* readAll(proc.fd3!)).toBe("got hello\n")
      expect(yield* proc.exited).toEqual({ code: 0, signal: null })
    }).pipe(Effect.scoped))

  it.live("its scope's close kills the whole group and waits for the child", () =>
    Effect.gen(function*() {
      const mark = uniqueSleep()
      const scope = yield* Scope.make()
      const proc = yield* start(sleepers(mark)).pipe(Scope.provide(scope))
      // Both read in one look, once each has become `sleep` (a process in the middle of its exec can read as no member).
      let members: Array<number> = []
      yield* eventually(() => (members = liveWithMark(mark)).length === 2 && members.every(isSleep), "the shell's two sleepers")
      expect(members.map((pid) => procStat(pid)?.pgrp)).toEqual([proc.pid, proc.pid])
      yield* Scope.close(scope, Exit.void)
      expect(proc.exitNow()).toEqual({ code: null, signal: "SIGKILL" })
      expect(members.filter(isLive)).toEqual([])
    }))

  it.live("interrupted at any moment of its start, leaves no process", () =>
    Effect.gen(function*() {
      for (const delay of [-1, 0, 1, 2, 4, 8, 16]) {
        const mark = uniqueSleep()
        const fiber = yield* Effect.forkChild(Effect.scoped(Effect.andThen(start(sleepers(mark)), Effect.never)))
        if (delay >= 0) yield* Effect.sleep(Duration.millis(delay))
        yield* Fiber.interrupt(fiber)
        expect(liveWithMark(mark)).toEqual([])
      }
    }))

  it.live("fails with SpawnError when the command or the cwd does not exist", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.flip(Effect.scoped(start({ command: "/no/such/program", args: [], env: { PATH } })))
      expect(missing).toBeInstanceOf(SpawnError)
      expect(missing.message).toContain("could not start /no/such/program")
      const noCwd = yield* Effect.flip(Effect.scoped(start({ command: "/bin/sh", args: ["-c", "exit 0"], cwd: "/no/such/dir", env: { PATH } })))
      expect(noCwd).toBeInstanceOf(SpawnError)
    }))
})

describe("runCommand", () => {
  it.live("keeps the first bytes of a large output and reads the rest to the end", () =>
    Effect.gen(function*() {
      const result = yield* runCommand({ command: "/bin/sh", args: ["-c", "head -c 300000 /dev/zero | tr '\\0' x; echo done >&2"], env: { PATH }, maxOutputBytes: 1000 })
      expect(result.exit).toEqual({ code: 0, signal: null })
      expect(result.stdout).toBe("x".repeat(1000))
      expect(result.stderr).toBe("done\n")
    }))

  it.live("writes its input and closes stdin", () =>
    Effect.gen(function*() {
      const result = yield* runCommand({ command: "/bin/sh", args: ["-c", "cat; echo end"], env: { PATH }, input: "in\n" })
      expect(result.stdout).toBe("in\nend\n")
    }))

  it.live("reports a death by signal", () =>
    Effect.gen(function*() {
      const result = yield* runCommand({ command: "/bin/sh", args: ["-c", "kill -TERM $$"], env: { PATH } })
      expect(result.exit).toEqual({ code: null, signal: "SIGTERM" })
    }))

  it.live("timed out, kills the command's whole group", () =>
    Effect.gen(function*() {
      const mark = uniqueSleep()
      const fiber = yield* Effect.forkChild(runCommand(sleepers(mark)).pipe(Effect.timeoutOption(Duration.seconds(60))))
      let members: Array<number> = []
      yield* eventually(() => (members = liveWithMark(mark)).length === 2 && members.every(isSleep), "the shell's two sleepers")
      yield* Fiber.interrupt(fiber)
      expect(members.filter(isLive)).toEqual([])
      const late = uniqueSleep()
      const timedOut = yield* runCommand(sleepers(late)).pipe(Effect.timeoutOption(Duration.millis(200)))
      expect(Option.isNone(timedOut)).toBe(true)
      expect(liveWithMark(late)).toEqual([])
    }))
})

