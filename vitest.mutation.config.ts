/** The vitest config of a mutation run: the test files named in VEYYON_MUTATION_TESTS only, without the build step. */
import { defineConfig } from "vitest/config"
import base from "./vitest.config.ts"

const tests = (process.env.VEYYON_MUTATION_TESTS ?? "").split(",").filter((file) => file !== "")

export default defineConfig({ ...base, test: { ...base.test, globalSetup: [], include: tests } })
