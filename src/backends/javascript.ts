/**
 * JavaScript: this process's own Node (so it needs nothing installed), spawned as
 * `node <cache>/runner.mjs` with frames on fd 3; the runner imports its prelude itself.
 */
import { Effect } from "effect"
import { runnerEnv } from "../services/isolation/EnvPolicy.ts"
import { cachedPath } from "../services/storage/RunnerCache.ts"
import { makeBackend } from "./Backend.ts"

const ENTRY = "runner.mjs"

/** The JavaScript backend. */
export const javascript = makeBackend({
  id: "js",
  displayName: "JavaScript",
  guidance: [
    "JavaScript (Node): top-level await works; `import x from \"pkg\"`, import() and require() resolve from the working directory; let/const may be declared again in a later cell.",
    "JavaScript shows the cell's completion value as the Node REPL does (a trailing `;` does not hide it; end with `void 0` or a declaration); console.*, process.stdout and child-process output are captured; display(value) or display({\"text/html\": html}, { raw: true }) shows rich output.",
    "JavaScript cells have kv, defs() and env(), and agent()/completion() return Promises (run several with Promise.all)."
  ],
  enabledByDefault: true,
  searchPathEnv: "NODE_PATH",
  runner: { folder: "js", entry: ENTRY },
  notebook: {
    kernelspec: { name: "javascript", display_name: "JavaScript (Node.js)", language: "javascript" },
    language_info: { name: "javascript", file_extension: ".js", mimetype: "application/javascript", version: process.versions.node }
  },
  introspects: true,
  memoryLimit: "heap",
  runtime: () => Effect.sync(() => ({
    resolve: () => Effect.succeed({ executable: process.execPath }),
    env: (_interpreter, { artifactsDir }) => runnerEnv(process.env, { artifactsDir })
  })),
  launch: (interpreter, runner) => ({ command: interpreter.executable, args: [cachedPath(runner, ENTRY)], channel: "fd3" })
})
