/**
 * Timing a bare interpreter start (`python -c pass`) the way kernels are spawned.
 */
import { spawn } from "node:child_process"

/** Milliseconds from spawn to exit of `python -c pass`, with the spawner's pipes. */
export const pythonPass = (python: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const start = performance.now()
    const child = spawn(python, ["-c", "pass"], { detached: true, stdio: ["pipe", "pipe", "pipe"] })
    child.once("error", reject)
    child.once("exit", (code) => (code === 0 ? resolve(performance.now() - start) : reject(new Error(`python -c pass exited with ${code}`))))
  })
