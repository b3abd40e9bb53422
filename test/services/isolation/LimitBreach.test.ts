import { describe, expect, it } from "@effect/vitest"
import { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import { breachNotice, breachOfDeath, breachOfError, explainBreach, limitSentence } from "../../../src/services/isolation/LimitBreach.ts"

const limits = { memoryMb: 2048, pids: 256, fileSizeMb: undefined }
const none = { memoryMb: undefined, pids: undefined, fileSizeMb: undefined }
const error = (ename: string, evalue: string, traceback: ReadonlyArray<string> = []) => ({ ename, evalue, traceback })

describe("limit breaches", () => {
  it("a failed allocation breaches the memory limit in each language", () => {
    expect(breachOfError(error("MemoryError", ""), limits)).toBe("memoryMb")
    expect(breachOfError(error("NoMemoryError", "failed to allocate memory"), limits)).toBe("memoryMb")
    expect(breachOfError(error("RangeError", "Array buffer allocation failed"), limits)).toBe("memoryMb")
    expect(breachOfError(error("RangeError", "Invalid array length"), limits)).toBeUndefined()
  })

  it("EAGAIN from starting a process or thread breaches the pids limit; a socket's EAGAIN does not", () => {
    const fork = error("BlockingIOError", "[Errno 11] Resource temporarily unavailable", ["  File \"<cell-1>\", line 3, in <module>", "    os.fork()"])
    expect(breachOfError(fork, limits)).toBe("pids")
    expect(breachOfError(error("BlockingIOError", "[Errno 11] Resource temporarily unavailable", ["    self.pid = _fork_exec("]), limits)).toBe("pids")
    expect(breachOfError(error("RuntimeError", "can't start new thread"), limits)).toBe("pids")
    expect(breachOfError(error("ThreadError", "can't create Thread: Resource temporarily unavailable"), limits)).toBe("pids")
    expect(breachOfError(error("Error", "spawn sleep EAGAIN"), limits)).toBe("pids")
    expect(breachOfError(error("Errno::EAGAIN", "Resource temporarily unavailable - fork(2)"), limits)).toBe("pids")
    expect(breachOfError(error("BlockingIOError", "[Errno 11] Resource temporarily unavailable", ["    sock.recv(5)"]), limits)).toBeUndefined()
    expect(breachOfError(error("ValueError", "bad fork"), limits)).toBeUndefined()
  })

  it("only a limit that is set is breached", () => {
    expect(breachOfError(error("MemoryError", ""), none)).toBeUndefined()
    expect(breachOfError(error("RuntimeError", "can't start new thread"), none)).toBeUndefined()
    expect(breachOfDeath("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", none)).toBeUndefined()
  })

  it("a kernel that died out of memory breached the memory limit; another death did not", () => {
    expect(breachOfDeath("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory\n 1: 0xe48c12", limits)).toBe("memoryMb")
    expect(breachOfDeath("# Fatal JavaScript out of memory: MemoryChunk allocation failed", limits)).toBe("memoryMb")
    expect(breachOfDeath("runner.rb:12: failed to allocate memory (NoMemoryError)", limits)).toBe("memoryMb")
    expect(breachOfDeath("Segmentation fault", limits)).toBeUndefined()
  })

  it("names the limit, its value and its setting, and what became of the kernel", () => {
    expect(limitSentence("memoryMb", limits)).toBe(
      "the kernel reached its memory limit of 2048 MiB (limits.memoryMb / VEYYON_KERNEL_MEMORY_MB; raise it, or set it to off)"
    )
    expect(limitSentence("pids", limits)).toBe(
      "the kernel reached its limit of 256 processes and threads (limits.pids / VEYYON_KERNEL_PIDS; raise it, or set it to off)"
    )
    expect(breachNotice("pids", limits, true)).toBe(`${limitSentence("pids", limits)}. The kernel was replaced: the next call starts a fresh one, and earlier state is gone.`)
    expect(breachNotice("memoryMb", limits, false)).toBe(`${limitSentence("memoryMb", limits)}. The allocation failed and the kernel lives on with its state.`)
  })

  it("an error output gets the sentence after its message and as its last traceback line; other outputs pass as they are", () => {
    const explained = explainBreach(KernelOutput.Error(error("MemoryError", "", ["Traceback", "MemoryError"])), limits)
    expect(explained).toEqual({
      breach: "memoryMb",
      output: KernelOutput.Error(error("MemoryError", limitSentence("memoryMb", limits), ["Traceback", "MemoryError", limitSentence("memoryMb", limits)]))
    })
    const thread = explainBreach(KernelOutput.Error(error("RuntimeError", "can't start new thread")), limits)
    expect(thread.output).toMatchObject({ evalue: `can't start new thread (${limitSentence("pids", limits)})` })
    const plain = KernelOutput.Error(error("ValueError", "x"))
    expect(explainBreach(plain, limits)).toEqual({ output: plain, breach: undefined })
    const stdout = KernelOutput.Stdout({ text: "MemoryError" })
    expect(explainBreach(stdout, limits).output).toBe(stdout)
  })
})
