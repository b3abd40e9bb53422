/**
 * veyyon-eval/render: cell outputs as text for an agent and as terminal lines for a person,
 * the renderers the `veyyon` CLI and the MCP server use.
 */

/** A finished cell's outputs as the text an agent reads. */
export { renderOutputsAsText } from "./render/ToolRenderer.ts"
/** Options of `renderOutputsAsText`. */
export type { OutputsAsTextOptions } from "./render/ToolRenderer.ts"
/** A tool call's cell (code, title, outputs, status) as terminal lines. */
export { renderToolCell } from "./render/ToolRenderer.ts"
/** What `renderToolCell` draws. */
export type { ToolCell } from "./render/ToolRenderer.ts"
/** Options of `renderToolCell`. */
export type { ToolRenderOptions } from "./render/ToolRenderer.ts"
/** A finished cell's terminal lines, straight from its outputs. */
export { renderExecution } from "./render/InteractiveRenderer.ts"
/** A streaming view of a running cell. */
export type { ExecutionView } from "./render/InteractiveRenderer.ts"
/** Options of a new execution view. */
export type { ExecutionViewOptions } from "./render/InteractiveRenderer.ts"
/** Options of rendering an execution view. */
export type { ExecutionRenderOptions } from "./render/InteractiveRenderer.ts"
/** A new execution view. */
export { startExecution } from "./render/InteractiveRenderer.ts"
/** The view with one more output. */
export { pushExecutionOutput } from "./render/InteractiveRenderer.ts"
/** The view of the finished cell. */
export { finishExecution } from "./render/InteractiveRenderer.ts"
/** The view's terminal lines. */
export { renderExecutionView } from "./render/InteractiveRenderer.ts"
/** An output a renderer draws: a kernel output or an omission marker. */
export type { RenderableOutput } from "./render/OutputText.ts"
/** A MIME bundle as text: plain text, HTML as Markdown, JSON, image placeholders, status. */
export { renderBundle } from "./render/Mime.ts"
/** A PNG or JPEG from a bundle. */
export type { ImagePayload } from "./render/Mime.ts"
/** `text/html` as Markdown, with tables, links, code and lists. */
export { htmlToMarkdown } from "./render/Html.ts"
/** The terminal columns a line occupies. */
export { displayColumns } from "./render/Columns.ts"
/** A line cut to a number of columns, saying how many it left out. */
export { clampLine } from "./render/Columns.ts"
/** Lines of a cell's output an interactive view shows while it runs. */
export { EXECUTION_PREVIEW_LINES } from "./render/Columns.ts"
/** Columns a rendered line is clamped to. */
export { EXECUTION_MAX_DISPLAY_COLUMNS } from "./render/Columns.ts"
/** Columns a streaming line is clamped to. */
export { EXECUTION_STREAMING_LINE_CAP } from "./render/Columns.ts"
/** Lines of a tool call's output shown collapsed. */
export { TOOL_PREVIEW_LINES } from "./render/Columns.ts"
