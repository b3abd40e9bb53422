/**
 * A cell's events as one continuous text, in the order they happened: stream text as
 * written, each display/result as its rendered bundle on lines of its own, status
 * lines, and error tracebacks. `Done` contributes nothing here (the renderers turn it
 * into a status or notice); an output sink's omission marker shows as its note. With `color: false` every escape sequence is stripped,
 * the kernel's own colours included.
 */
import { Option } from "effect"
import stripAnsi from "strip-ansi"
import type { KernelOutput } from "../kernel/KernelOutput.ts"
import { bundleImages, renderBundle, type ImagePayload } from "./Mime.ts"
import { renderStatus } from "./Status.ts"
import { makeStyle, paintLines, type Style } from "./Style.ts"

/** A note the output sink left where it cut output out; rendered as its text. */
export interface OmissionMarker {
  readonly _tag: "TextOmitted" | "OutputsOmitted"
  readonly text: string
}

/** Anything the renderers draw: kernel events and the output sink's omission markers. */
export type RenderableOutput = KernelOutput | OmissionMarker

/** How output text is produced. */
export interface OutputTextOptions {
  /** Keep the kernel's escape sequences and colour stderr, status and errors. */
  readonly color: boolean
}

/** Text accumulated so far and whether it ends at the start of a line. */
export interface OutputTextState {
  readonly text: string
  readonly atLineStart: boolean
}

/** Nothing written yet. */
export const EMPTY_OUTPUT_TEXT: OutputTextState = { text: "", atLineStart: true }

const asLines = (text: string, atLineStart: boolean): string => {
  if (text.length === 0) return ""
  return (atLineStart ? "" : "\n") + text + (text.endsWith("\n") ? "" : "\n")
}

const tracebackText = (output: Extract<KernelOutput, { _tag: "Error" }>): string => {
  const traceback = output.traceback.map((entry) => (entry.endsWith("\n") ? entry : entry + "\n")).join("")
  const summary = output.evalue.length > 0 ? `${output.ename}: ${output.evalue}` : output.ename
  return stripAnsi(traceback).includes(output.ename) ? traceback : traceback + summary + "\n"
}

const paintError = (text: string, style: Style): string => {
  if (!style.enabled || text.includes("\u001b")) return text
  const lines = text.replace(/\n$/, "").split("\n")
  const last = lines.pop() ?? ""
  return [...lines, style.bold(style.red(last))].join("\n") + "\n"
}

/** The text one event adds, given whether the text so far ends at a line start. */
export const outputChunk = (output: RenderableOutput, atLineStart: boolean, options: OutputTextOptions): string => {
  const style = makeStyle(options.color)
  const raw = (text: string) => (options.color ? text : stripAnsi(text))
  switch (output._tag) {
    case "Stdout":
      return raw(output.text)
    case "Stderr":
      return options.color && !output.text.includes("\u001b") ? paintLines(output.text, style.red) : raw(output.text)
    case "Display":
    case "Result":
      return asLines(raw(renderBundle(output.bundle)), atLineStart)
    case "Status":
      return Option.match(renderStatus(output), {
        onNone: () => "",
        onSome: (line) => asLines(style.cyan(raw(line)), atLineStart)
      })
    case "Error":
      return asLines(paintError(raw(tracebackText(output)), style), atLineStart)
    case "TextOmitted":
    case "OutputsOmitted":
      return asLines(style.dim(raw(output.text)), atLineStart)
    case "Done":
      return ""
  }
}

/** Appends one event's text. */
export const appendOutput = (state: OutputTextState, output: RenderableOutput, options: OutputTextOptions): OutputTextState => {
  const chunk = outputChunk(output, state.atLineStart, options)
  return chunk.length === 0 ? state : { text: state.text + chunk, atLineStart: chunk.endsWith("\n") }
}

/** All events' text, in order. */
export const outputsText = (outputs: ReadonlyArray<RenderableOutput>, options: OutputTextOptions): string =>
  outputs.reduce((state, output) => appendOutput(state, output, options), EMPTY_OUTPUT_TEXT).text

/** Every PNG/JPEG payload the cell displayed or returned, in order. */
export const outputImages = (outputs: ReadonlyArray<RenderableOutput>): ReadonlyArray<ImagePayload> =>
  outputs.flatMap((output) => (output._tag === "Display" || output._tag === "Result" ? bundleImages(output.bundle) : []))

