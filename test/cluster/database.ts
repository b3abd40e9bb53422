/**
 * A private PostgreSQL for the calling test file (started before its tests, stopped after)
 * and the runtimes its tests open on it, disposed before the server stops.
 */
import { afterAll, beforeAll } from "vitest"
import { startPostgres, type TestPostgres } from "../support/postgres.ts"

/** Call inside a `describe`: `url()` once the tests run; `track(runtime)` disposes it at the end. */
export const postgresForFile = () => {
  let pg: TestPostgres | undefined
  const runtimes: Array<{ dispose: () => Promise<void> }> = []
  beforeAll(async () => {
    pg = await startPostgres()
  }, 180_000)
  afterAll(async () => {
    for (const runtime of runtimes) await runtime.dispose()
    await pg?.stop()
  }, 60_000)
  return {
    url: (): string => pg!.url,
    track: <T extends { dispose: () => Promise<void> }>(runtime: T): T => {
      runtimes.push(runtime)
      return runtime
    }
  }
}
