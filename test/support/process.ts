/**
 * Process checks for tests that must prove nothing is left running.
 */

/** Whether a process with this pid exists (signal 0 probes without delivering anything). */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Polls `check` every 50 ms for up to `ms`; resolves with its last answer. */
export const waitUntil = async (check: () => boolean, ms: number): Promise<boolean> => {
  for (let waited = 0; waited < ms && !check(); waited += 50) await new Promise((resolve) => setTimeout(resolve, 50))
  return check()
}
