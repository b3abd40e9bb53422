/**
 * The layering of `src/`, checked by `npm run check:deps` (dependency-cruiser) in CI.
 * From the bottom up: the kernel; child processes; rendering; the language backends beside storage and
 * isolation, with the settings reading the backends' declarations; output, session
 * snapshots and the registry; the tool; the doors (MCP, effect/ai, cluster, the layers that wire them); the
 * CLI and the package entries on top. A module may import its own room and the rooms its
 * rule names, never one above, and no import cycle is allowed (type-only imports count).
 */
const room = (path) => `^src/${path}/`
const entries = "^src/[^/]+[.]ts$"

const layer = (name, from, mayUse, comment) => ({
  name,
  comment,
  severity: "error",
  from: { path: from },
  to: { path: "^src/", pathNot: [...mayUse.map(room)].join("|") }
})

export default {
  forbidden: [
    {
      name: "no-circular",
      comment: "An import cycle ties modules that should stand alone; break it by moving the shared part down.",
      severity: "error",
      from: {},
      to: { circular: true }
    },
    layer("kernel-knows-nothing-above", room("kernel"), ["kernel"], "The kernel actor runs any runner; it knows no service, backend, door or CLI."),
    layer(
      "process-knows-only-kernel",
      room("process"),
      ["process", "kernel"],
      "Starting, containing and ending child processes needs only the kernel's process types."
    ),
    layer("render-sees-only-kernel-output", room("render"), ["render", "kernel"], "Rendering turns kernel output into text; it knows nothing else."),
    layer(
      "host-services-stay-low",
      room("services/(config|storage|isolation)"),
      ["kernel", "process", "render", "services/config", "services/storage", "services/isolation", "backends"],
      "Settings, storage and isolation serve everything above them and use none of it (settings read the backends' declarations)."
    ),
    layer(
      "backends-know-no-tool-or-door",
      room("backends"),
      ["kernel", "process", "render", "services/storage", "services/isolation", "backends"],
      "A backend is what one language adds; it gets its settings as an argument, and knows no registry, output, tool, door or CLI."
    ),
    layer(
      "output-below-registry",
      room("services/output"),
      ["kernel", "process", "render", "services/config", "services/storage", "services/isolation", "backends", "services/output"],
      "A cell's output, artifacts and session record know nothing of who runs kernels or of the tool."
    ),
    layer(
      "snapshots-below-registry",
      room("services/snapshots"),
      ["kernel", "process", "render", "services/config", "services/storage", "services/isolation", "backends", "services/output", "services/snapshots"],
      "A session's saved state is sealed, kept and restored into a kernel it is handed; it knows nothing of who runs kernels or of the tool."
    ),
    layer(
      "registry-below-tool",
      room("services/registry"),
      ["kernel", "process", "render", "services/config", "services/storage", "services/isolation", "backends", "services/output", "services/snapshots", "services/registry"],
      "The registry owns kernels; it knows nothing of the tool or the doors."
    ),
    layer(
      "tool-below-doors",
      room("services/tool"),
      ["kernel", "process", "render", "services", "backends"],
      "The eval tool uses every service; no door or CLI."
    ),
    ...["mcp", "ai", "cluster"].map((door) =>
      layer(
        `${door}-knows-no-cli-or-other-door`,
        room(door),
        ["kernel", "process", "render", "services", "backends", "layers", door],
        "A door (MCP, effect/ai, cluster) stands on the services and the layers; it knows no CLI and no other door."
      )
    ),
    layer(
      "layers-know-no-door",
      room("layers"),
      ["kernel", "process", "render", "services", "backends", "layers"],
      "The layers wire the services together; the doors use them, not the other way."
    ),
    {
      name: "cluster-knows-no-language",
      comment:
        "The cluster's protocol and runner are language-neutral: they may use the backends' common declarations (Backend.ts) and their list (index.ts), never one language's module (its errors travel as RuntimeUnavailable).",
      severity: "error",
      from: { path: room("cluster") },
      to: { path: room("backends"), pathNot: "^src/backends/(Backend|index)[.]ts$" }
    },
    {
      name: "one-way-to-start-a-process",
      comment: "Every child process starts through src/process/Subprocess.ts, which owns it in a scope and kills its group when interrupted.",
      severity: "error",
      from: { pathNot: "^src/process/Subprocess[.]ts$" },
      to: { path: "^(node:)?child_process$|^effect/process|ChildProcessSpawner" }
    },
    {
      name: "entries-are-leaves",
      comment: "The package entries (src/*.ts) re-export; nothing inside imports them.",
      severity: "error",
      from: { path: "^src/.+/" },
      to: { path: entries }
    }
  ],
  options: {
    parser: "swc",
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(node_modules|dist)/" }
  }
}
