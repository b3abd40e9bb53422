/**
 * Room `output`: what a cell leaves behind: this sink bounding a cell's output (its
 * truncation a plain model in `TextWindow`, its images saved by `ImageSaves`), the artifact
 * store and the session's notebook record. It uses the kernel, rendering,
 * settings, storage, isolation and the backends' notebook metadata; not the registry or
 * the tool.
 *
 * Turns a cell's `KernelOutput` events into the bounded outputs of a tool result.
 *
 * Text (stdout and stderr, as one stream in arrival order) is kept whole while it
 * fits `maxBytes` (UTF-8) and `maxLines`. Once it does not, everything printed so far
 * is written to an `out-….txt` artifact and every later chunk is appended to it; the
 * result keeps a head and a tail of about half the budget each (`TextWindow` decides
 * them), with one `TextOmitted` marker between them. Only the head and a rolling tail
 * are held, so memory stays bounded however much a cell prints. One synchronous path
 * takes what needs no effect (the kernel's `now` hook uses it); the rest waits for the lock.
 *
 * Lines are `\n`-terminated, plus a last unterminated one. A line counts as shown
 * when any part of it is shown, so `shownLines + omittedLines = totalLines` exactly.
 *
 * Rich outputs keep their order; those that arrive after the head's last text
 * follow the marker. Every image is saved as an `img-…` artifact (in `artifactIds`, in
 * the order the images came), behind the cell; images past `maxImageBytes` of payload are
 * replaced by a note naming their artifact (`ImageSaves`); `finish` and `close` wait for
 * the saves. After `maxRichOutputs`
 * displays, results and status events, further ones go to an `outputs-….jsonl`
 * artifact behind one `OutputsOmitted` marker.
 * Errors are always kept. Besides images, nothing is written when nothing exceeds a budget. Watchdog
 * pause/resume events (a pair per bridge call, e.g. each kv call) have done their work on
 * the cell's timeout by then and are not kept, so they use up no budget.
 *
 * Writing an artifact can fail (a full disk): the result is still bounded and says
 * why the full output could not be saved.
 */
import { Context, Data, Effect, Exit, Layer, Schema, Scope, Semaphore, Stream } from "effect"
import { outputHandler, type OutputHandler } from "../../kernel/Kernel.ts"
import { type CellOutcome, CellEventSchema, type KernelOutput } from "../../kernel/KernelOutput.ts"
import { isWatchdogControl } from "../../render/Status.ts"
import { ArtifactStore, type ArtifactStoreService, type ArtifactWriter } from "./ArtifactStore.ts"
import { DEFAULT_MAX_IMAGE_BYTES, hasImage, type ImageSaves, makeImageSaves } from "./ImageSaves.ts"
import { makeOmittedOutputs, type OmittedOutputs } from "./OmittedOutputs.ts"
import { isHighSurrogate, makeTextWindow, type TextCut, type TextStream, type WindowEntry } from "./TextWindow.ts"
import { DEFAULT_OUTPUT_MAX_BYTES, DEFAULT_OUTPUT_MAX_LINES, Settings } from "../config/Settings.ts"

/** Displays, results and status events kept in one result. */
export const DEFAULT_MAX_RICH_OUTPUTS = 1000

/** The budgets of one result. */
export interface OutputLimits {
  readonly maxBytes: number
  readonly maxLines: number
  readonly maxImageBytes: number
  readonly maxRichOutputs: number
}

/** A retained output of a cell, as a schema: a kernel event, or a marker where text or outputs were left out. */
export const SinkOutputSchema = Schema.Union([
  ...CellEventSchema.members,
  Schema.TaggedStruct("TextOmitted", {
    text: Schema.String,
    omittedBytes: Schema.Finite,
    omittedLines: Schema.Finite,
    artifactUri: Schema.String
  }),
  Schema.TaggedStruct("OutputsOmitted", { text: Schema.String, count: Schema.Finite, artifactUri: Schema.String })
])

/** One output kept in a result: a kernel output (other than `Done`) or a marker for what was left out. */
export type SinkOutput = typeof SinkOutputSchema.Type
/** Constructors and matchers of `SinkOutput`. */
export const SinkOutput = Data.taggedEnum<SinkOutput>()

/**
 * A finished window's entries as outputs, in order: each run of one stream's text as one
 * output, rich outputs as they are, and what `dropped` gives where outputs were dropped.
 */
export const windowOutputs = (
  entries: ReadonlyArray<WindowEntry<SinkOutput>>,
  into: Array<SinkOutput>,
  dropped: () => SinkOutput | undefined = () => undefined
): void => {
  let pending: { stream: TextStream; parts: Array<string> } | undefined
  const flush = () => {
    if (pending !== undefined) {
      const text = pending.parts.join("")
      into.push(pending.stream === "Stdout" ? SinkOutput.Stdout({ text }) : SinkOutput.Stderr({ text }))
      pending = undefined
    }
  }
  for (const entry of entries) {
    if (entry.kind === "text") {
      if (pending?.stream !== entry.stream) {
        flush()
        pending = { stream: entry.stream, parts: [] }
      }
      pending.parts.push(entry.text)
      continue
    }
    flush()
    const output = entry.kind === "rich" ? entry.item : dropped()
    if (output !== undefined) into.push(output)
  }
  flush()
}

/** How the text of a result was cut; present only when it was. */
export const Truncation = Schema.Struct({
  totalBytes: Schema.Finite,
  totalLines: Schema.Finite,
  shownBytes: Schema.Finite,
  shownLines: Schema.Finite,
  omittedBytes: Schema.Finite,
  omittedLines: Schema.Finite,
  artifactId: Schema.String,
  artifactUri: Schema.String,
  /** Why the artifact is missing or incomplete, when it is. */
  artifactError: Schema.optionalKey(Schema.String)
})

/** How the text of a result was cut. */
export type Truncation = typeof Truncation.Type

/** What a cell's outputs become in the tool result. */
export interface SinkResult {
  readonly outputs: ReadonlyArray<SinkOutput>
  readonly truncation?: Truncation
  /** The cell's `Done` event, when it arrived. */
  readonly outcome?: CellOutcome
  /** Every artifact written for this cell (full text, images, omitted outputs). */
  readonly artifactIds: ReadonlyArray<string>
}

/** What a sink holds right now, for checking that it stays bounded. */
export interface RetainedSize {
  readonly textChars: number
  readonly entries: number
}

/** The sink of one cell: push its events in order, then finish. */
export interface CellSink {
  /** Takes the next event; events after `finish` are ignored. */
  readonly push: (output: KernelOutput) => Effect.Effect<void>
  /** `push` without an effect when the sink can take the event at once (true); false, changing nothing, otherwise. */
  readonly pushNow: (output: KernelOutput) => boolean
  /** Closes the artifacts and gives the result; later calls give the same result. */
  readonly finish: Effect.Effect<SinkResult>
  /** The text and entries held at this moment. */
  readonly retained: Effect.Effect<RetainedSize>
  /** Closes the artifacts without a result (a cell that failed or was interrupted); `finish` does it too. */
  readonly close: Effect.Effect<void>
}

const plural = (count: number, unit: string) => `${count} ${unit}${count === 1 ? "" : "s"}`

/** Fills in the budgets that are not given with the defaults. */
export const outputLimits = (given: Partial<OutputLimits> = {}): OutputLimits => ({
  maxBytes: Math.max(1, Math.floor(given.maxBytes ?? DEFAULT_OUTPUT_MAX_BYTES)),
  maxLines: Math.max(1, Math.floor(given.maxLines ?? DEFAULT_OUTPUT_MAX_LINES)),
  maxImageBytes: Math.max(0, Math.floor(given.maxImageBytes ?? DEFAULT_MAX_IMAGE_BYTES)),
  maxRichOutputs: Math.max(0, Math.floor(given.maxRichOutputs ?? DEFAULT_MAX_RICH_OUTPUTS))
})

/** The sink of one cell, writing artifacts to `store`; its files close with the scope at the latest. */
export const makeCellSink = (
  store: ArtifactStoreService,
  given: Partial<OutputLimits> = {}
): Effect.Effect<CellSink, never, Scope.Scope> =>
  Effect.suspend(() => {
    const sink = cellSink(store, given)
    return Effect.as(Effect.addFinalizer(() => sink.close), sink)
  })

/**
 * The sink of one cell as a plain value: no scope until it first opens an artifact. Its
 * files close at `finish` or `close`; whoever makes it calls one of them.
 */
export const cellSink = (store: ArtifactStoreService, given: Partial<OutputLimits> = {}): CellSink => {
  const limits = outputLimits(given)
  let scope: Scope.Closeable | undefined
  const lock = Semaphore.makeUnsafe(1)
  const window = makeTextWindow<SinkOutput>(limits)
  const carry: Record<TextStream, string> = { Stdout: "", Stderr: "" }
  const artifactIds: Array<string> = []

  let writer: ArtifactWriter | undefined
  let artifactId = ""
  let artifactError: string | undefined

  /** The image saves and the outputs past the count, each made when first needed. */
  let images: ImageSaves | undefined
  let omitted: OmittedOutputs | undefined
  let richKept = 0

  let outcome: CellOutcome | undefined
  let result: SinkResult | undefined

  /** Runs `effect` in the sink's scope, made when first needed. */
  const inScope = <A, E>(effect: Effect.Effect<A, E, Scope.Scope>) =>
    Effect.flatMap(
      Effect.suspend(() =>
        scope === undefined ? Effect.tap(Scope.make(), (made) => Effect.sync(() => (scope = made))) : Effect.succeed(scope)
      ),
      (open) => Effect.provideService(effect, Scope.Scope, open)
    )

  const closeScope = Effect.suspend(() => {
    const open = scope
    scope = undefined
    return open === undefined ? Effect.void : Scope.close(open, Exit.void)
  })

  const writeFull = (text: string) =>
    writer === undefined ? Effect.void : writer.append(text).pipe(
      Effect.catch((error) =>
        Effect.suspend(() => {
          artifactError = error.message
          const failed = writer
          writer = undefined
          return failed === undefined ? Effect.void : Effect.ignore(failed.close)
        })
      )
    )

  const spill = Effect.gen(function*() {
    const texts = window.spill()
    const opened = yield* Effect.result(inScope(store.create("out", "txt")))
    if (opened._tag === "Success") {
      writer = opened.success
      artifactId = writer.id
      artifactIds.push(artifactId)
    } else {
      artifactError = opened.failure.message
      if (opened.failure._tag === "ArtifactWriteFailed") artifactId = opened.failure.id
    }
    for (const text of texts) yield* writeFull(text)
  })

  /** Whether the stream's text so far ends in a high surrogate, held back for the next chunk. */
  const endsInHigh = (text: string) => text.length > 0 && isHighSurrogate(text.charCodeAt(text.length - 1))

  /**
   * Takes text at once when that needs no effect: within the budgets before a spill, or
   * after it when the artifact writer buffers it at once (or there is none); answers false,
   * changing nothing, otherwise.
   */
  const textNow = (stream: TextStream, raw: string): boolean => {
    const joined = carry[stream] === "" ? raw : carry[stream] + raw
    const held = endsInHigh(joined)
    const text = held ? joined.slice(0, -1) : joined
    if (text.length > 0) {
      if (!window.spilled()) {
        if (!window.addWithin(stream, text)) return false
      } else if (writer === undefined || writer.appendNow?.(text) === true) {
        window.addText(stream, text)
      } else {
        return false
      }
    }
    carry[stream] = held ? joined.slice(-1) : ""
    return true
  }

  /** Adds text with the effects it needs: the spill that passes a budget, or a write that waits. */
  const addText = (stream: TextStream, text: string) =>
    Effect.suspend(() => {
      if (text.length === 0) return Effect.void
      const spilled = window.spilled()
      const over = window.addText(stream, text)
      return spilled ? writeFull(text) : over ? spill : Effect.void
    })

  /** Takes text that `textNow` declined. */
  const pushText = (stream: TextStream, raw: string) =>
    Effect.suspend(() => {
      const joined = carry[stream] + raw
      const held = endsInHigh(joined)
      carry[stream] = held ? joined.slice(-1) : ""
      return addText(stream, held ? joined.slice(0, -1) : joined)
    })

  /** Saves an output past the count, its place in the result marked where the first one came. */
  const drop = (output: KernelOutput) => {
    if (omitted === undefined) {
      window.addEntry({ kind: "dropped" })
      omitted = makeOmittedOutputs(inScope(store.create("outputs", "jsonl")), (id) => artifactIds.push(id))
    }
    return omitted.add(output)
  }

  const awaitImages = Effect.suspend(() => (images === undefined ? Effect.void : images.await))

  const materialize = (list: ReadonlyArray<WindowEntry<SinkOutput>>, into: Array<SinkOutput>) =>
    windowOutputs(list, into, () => (omitted === undefined ? undefined : SinkOutput.OutputsOmitted(omitted.note(limits.maxRichOutputs))))

  const truncation = (cut: TextCut): Truncation => ({
    ...cut,
    artifactId,
    artifactUri: artifactId === "" ? "" : store.uri(artifactId),
    ...(artifactError === undefined ? {} : { artifactError })
  })

  const marker = (cut: Truncation): SinkOutput => {
    const amount = cut.omittedLines > 0
      ? `${plural(cut.omittedLines, "line")}, ${plural(cut.omittedBytes, "byte")}`
      : plural(cut.omittedBytes, "byte")
    const where = cut.artifactError === undefined
      ? `full output: ${cut.artifactUri}`
      : `the full output could not be saved: ${cut.artifactError}`
    return SinkOutput.TextOmitted({
      text: `… [${amount} omitted; ${where}]`,
      omittedBytes: cut.omittedBytes,
      omittedLines: cut.omittedLines,
      artifactUri: cut.artifactUri
    })
  }

  /**
   * The one synchronous path: takes the output at once when that writes no artifact file (text
   * that keeps within the budgets before any spill, text after the spill that the artifact
   * writer buffers at once, errors, the outcome, status events and displays without images
   * within the count); answers false, changing nothing, otherwise. Run only while nothing
   * waits for the lock, or holding it, so outputs keep their order.
   */
  const acceptNow = (output: KernelOutput): boolean => {
    switch (output._tag) {
      case "Stdout":
      case "Stderr":
        return textNow(output._tag, output.text)
      case "Error":
        window.addEntry({ kind: "rich", item: output })
        return true
      case "Done": {
        const { _tag, ...fields } = output
        outcome = fields
        return true
      }
      case "Status":
        if (isWatchdogControl(output)) return true
        if (richKept >= limits.maxRichOutputs) return false
        richKept++
        window.addEntry({ kind: "rich", item: output })
        return true
      case "Display":
      case "Result": {
        if (richKept >= limits.maxRichOutputs || hasImage(output.bundle)) return false
        richKept++
        window.addEntry({ kind: "rich", item: output })
        return true
      }
    }
  }

  /** Takes what `acceptNow` declined: text that spills or waits for a write, an output past the count, an image to save. */
  const acceptLater = (output: KernelOutput): Effect.Effect<void> => {
    switch (output._tag) {
      case "Stdout":
      case "Stderr":
        return pushText(output._tag, output.text)
      case "Status":
        return drop(output)
      case "Display":
      case "Result":
        if (richKept >= limits.maxRichOutputs) return drop(output)
        richKept++
        images ??= makeImageSaves(store, limits.maxImageBytes, artifactIds)
        return Effect.map(images.bound(output.bundle), (bundle) => {
          const kept = bundle === output.bundle
            ? output
            : output._tag === "Display" ? SinkOutput.Display({ bundle }) : SinkOutput.Result({ bundle })
          window.addEntry({ kind: "rich", item: kept })
        })
      case "Error":
      case "Done":
        return Effect.void
    }
  }

  /** Takes the next output, at once when it can. */
  const accept = (output: KernelOutput): Effect.Effect<void> =>
    Effect.suspend(() => (acceptNow(output) ? Effect.void : acceptLater(output)))

  /** The artifacts written, in the order their outputs came (an image's place stays empty when its save failed). */
  const savedIds = () => artifactIds.filter((id) => id !== "")

  /** Pushes and finishes waiting for the lock or holding it; the fast paths run only when there are none. */
  let waiting = 0
  const locked = <A>(effect: Effect.Effect<A>): Effect.Effect<A> =>
    Effect.suspend(() => {
      waiting++
      return Effect.ensuring(lock.withPermits(1)(effect), Effect.sync(() => waiting--))
    })

  /** The result without any effect, when no artifact is open and no text is held back: the common cell. */
  const finishNow = (): SinkResult | undefined => {
    if (waiting > 0 || window.spilled() || scope !== undefined || images?.pending() === true || carry.Stdout !== "" || carry.Stderr !== "") return undefined
    const done = window.finish()
    const outputs: Array<SinkOutput> = []
    if (done._tag === "Whole") materialize(done.entries, outputs)
    result = { outputs, ...(outcome === undefined ? {} : { outcome }), artifactIds: savedIds() }
    return result
  }

  const finishLocked = Effect.gen(function*() {
    if (result !== undefined) return result
    yield* awaitImages
    for (const stream of ["Stdout", "Stderr"] as const) {
      const rest = carry[stream]
      carry[stream] = ""
      yield* addText(stream, rest)
    }
    if (omitted !== undefined) yield* omitted.close
    const outputs: Array<SinkOutput> = []
    let cut: Truncation | undefined
    const done = window.finish()
    if (done._tag === "Cut") {
      if (writer !== undefined) {
        const closed = yield* Effect.result(writer.close)
        if (closed._tag === "Failure") artifactError = closed.failure.message
        writer = undefined
      }
      cut = truncation(done.cut)
      materialize(done.head, outputs)
      outputs.push(marker(cut))
      materialize(done.rest, outputs)
    } else {
      materialize(done.entries, outputs)
    }
    result = {
      outputs,
      ...(cut === undefined ? {} : { truncation: cut }),
      ...(outcome === undefined ? {} : { outcome }),
      artifactIds: savedIds()
    }
    yield* closeScope
    return result
  })

  const finish = Effect.suspend(() => {
    const done = result ?? finishNow()
    return done === undefined ? locked(finishLocked) : Effect.succeed(done)
  })

  const close = locked(Effect.andThen(awaitImages, Effect.suspend(() => {
    if (result === undefined) result = { outputs: [], artifactIds: savedIds() }
    writer = undefined
    return closeScope
  })))

  const retained = Effect.sync((): RetainedSize => {
    const held = window.retained()
    return { textChars: held.textChars + carry.Stdout.length + carry.Stderr.length, entries: held.entries }
  })

  return {
    push: (output) =>
      Effect.suspend(() => {
        if (result !== undefined || (waiting === 0 && acceptNow(output))) return Effect.void
        return locked(Effect.suspend(() => (result === undefined ? accept(output) : Effect.void)))
      }),
    pushNow: (output) => result !== undefined || (waiting === 0 && acceptNow(output)),
    finish,
    retained,
    close
  }
}

/** Options of one cell's sink. */
export interface OpenOptions {
  /** Budgets that differ from the service's. */
  readonly limits?: Partial<OutputLimits>
  /** Where artifacts go instead of the service's store, e.g. a session's store. */
  readonly store?: ArtifactStoreService
}

/** Makes a sink per cell with the configured budgets. */
export interface OutputSinkService {
  readonly limits: OutputLimits
  /** A sink for one cell; its artifacts close with the scope at the latest. */
  readonly open: (options?: OpenOptions) => Effect.Effect<CellSink, never, Scope.Scope>
  /** Runs a cell's events through a fresh sink, calling `onEvent` on each first, and gives the result. */
  readonly collect: <E, R, E2 = never, R2 = never>(
    outputs: Stream.Stream<KernelOutput, E, R>,
    options?: OpenOptions & { readonly onEvent?: (output: KernelOutput) => Effect.Effect<void, E2, R2> }
  ) => Effect.Effect<SinkResult, E | E2, R | R2>
  /**
   * Like `collect`, for a producer that pushes each event itself (`push` also calls `onEvent`
   * first; its synchronous `now` calls it once the sink took the event).
   */
  readonly collectPushed: <E, R>(
    produce: (push: OutputHandler) => Effect.Effect<void, E, R>,
    options?: OpenOptions & { readonly onEvent?: (output: KernelOutput) => void }
  ) => Effect.Effect<SinkResult, E, R>
}

const makeService = (store: ArtifactStoreService, limits: OutputLimits): OutputSinkService => {
  const open = (options: OpenOptions = {}) =>
    makeCellSink(options.store ?? store, { ...limits, ...options.limits })
  const throughSink = <E, R>(options: OpenOptions, fill: (sink: CellSink) => Effect.Effect<void, E, R>) =>
    Effect.suspend(() => {
      const sink = cellSink(options.store ?? store, { ...limits, ...options.limits })
      return Effect.andThen(Effect.onError(fill(sink), () => sink.close), sink.finish)
    })
  return {
    limits,
    open,
    collect: (outputs, options = {}) => {
      const onEvent = options.onEvent
      return throughSink(options, ({ push }) =>
        Stream.runForEach(outputs, onEvent === undefined ? push : (output) => Effect.andThen(onEvent(output), push(output))))
    },
    collectPushed: (produce, options = {}) => {
      const onEvent = options.onEvent
      return throughSink(options, ({ push, pushNow }) =>
        produce(outputHandler(
          onEvent === undefined ? push : (output) => Effect.andThen(Effect.sync(() => onEvent(output)), push(output)),
          onEvent === undefined ? pushNow : (output) => {
            if (!pushNow(output)) return false
            onEvent(output)
            return true
          }
        )))
    }
  }
}

/** Bounds each cell's outputs for its tool result, spilling to the `ArtifactStore`. */
export class OutputSink extends Context.Service<OutputSink, OutputSinkService>()("veyyon-eval/OutputSink") {
  /** Sinks with explicit budgets (the rest default). */
  static layer(limits: Partial<OutputLimits> = {}): Layer.Layer<OutputSink, never, ArtifactStore> {
    return Layer.effect(OutputSink, Effect.map(ArtifactStore, (store) => makeService(store, outputLimits(limits))))
  }

  /** Sinks with the `output.maxBytes` / `output.maxLines` settings. */
  static readonly Live: Layer.Layer<OutputSink, never, ArtifactStore | Settings> = Layer.effect(
    OutputSink,
    Effect.gen(function*() {
      const settings = yield* Settings
      const store = yield* ArtifactStore
      return makeService(store, outputLimits(settings.output))
    })
  )
}
