/**
 * `veyyon repl`: one kernel, one cell per input, state kept between cells. On a
 * terminal it prompts (`>>> `, `... ` while a cell continues); piped input runs the
 * same way without prompts, so `printf 'x = 1\nx + 1\n' | veyyon repl` prints 2.
 *
 * Ctrl-C while a cell runs interrupts it (the kernel stays); at the prompt it drops the
 * lines typed so far, and a second Ctrl-C at an empty prompt exits, as Ctrl-D (end of
 * input), `exit` and `quit` do. Magics are the kernel's; images are saved to files and
 * their paths printed. On a terminal Tab completes from the kernel; `obj?` and `obj??`
 * (or `?obj`) print the kernel's inspection instead of running a cell.
 */
import { Data, Effect, Option, Queue, type Scope } from "effect"
import { Command, Flag } from "effect/cli"
import { type BackendId, backendOf } from "../../backends/index.ts"
import { EvalTool } from "../../services/tool/EvalTool.ts"
import { exportSession } from "./export.ts"
import * as readline from "node:readline"
import { makeCellView, stderrTarget, stdoutTarget } from "../cellView.ts"
import { failureOf } from "../exitCodes.ts"
import { savedImageLine } from "../images.ts"
import { takeOverSigint } from "../interrupts.ts"
import { cellSource, completionCode, inspectionLine, isCompleteCell, readlineCompletion } from "../replInput.ts"
import { type CellContext, cliEvalLayer, kernelName, languageOption, pythonOption, runCell, startKernel } from "../session.ts"

type ReplInput = Data.TaggedEnum<{
  Line: { readonly line: string }
  Interrupt: {}
  End: {}
}>
const ReplInput = Data.taggedEnum<ReplInput>()

const PROMPT = ">>> "
const CONTINUATION = "... "
const EXIT_WORDS: ReadonlySet<string> = new Set(["exit", "quit", "exit()", "quit()"])

/** A REPL cell's budget: the tool's maximum, since a person at the prompt stops a cell with Ctrl-C. */
export const REPL_CELL_TIMEOUT_SECONDS = 3600

/** Drops the text typed on the current line, as a terminal's Ctrl-U would. */
const clearTypedLine = (rl: readline.Interface) => {
  rl.write(null, { ctrl: true, name: "e" })
  rl.write(null, { ctrl: true, name: "u" })
}

/** Lines from stdin and Ctrl-C presses as one queue; `running` gets Ctrl-C instead while a cell runs. */
const openInput = (
  interactive: boolean,
  running: { current: AbortController | undefined },
  completer: readline.AsyncCompleter | undefined
): Effect.Effect<{ readonly rl: readline.Interface; readonly inputs: Queue.Queue<ReplInput> }, never, Scope.Scope> =>
  Effect.gen(function*() {
    const inputs = yield* Queue.unbounded<ReplInput>()
    const rl = yield* Effect.acquireRelease(
      Effect.sync(() =>
        readline.createInterface({
          input: process.stdin,
          ...(interactive ? { output: process.stdout } : {}),
          terminal: interactive,
          prompt: PROMPT,
          ...(interactive && completer !== undefined ? { completer } : {})
        })
      ),
      (rl) => Effect.sync(() => rl.close())
    )
    const interrupt = () => {
      if (running.current !== undefined) running.current.abort()
      else Queue.offerUnsafe(inputs, ReplInput.Interrupt())
    }
    rl.on("line", (line) => Queue.offerUnsafe(inputs, ReplInput.Line({ line })))
    rl.on("close", () => Queue.offerUnsafe(inputs, ReplInput.End()))
    rl.on("SIGINT", interrupt)
    yield* takeOverSigint(interrupt)
    return { rl, inputs }
  })

const say = (text: string) => Effect.sync(() => process.stdout.write(text + "\n"))

const save = Flag.String("save").pipe(
  Flag.withMetavar("FILE"),
  Flag.withDescription("On exit, write the cells of this REPL session to FILE as a Jupyter notebook (.ipynb)."),
  Flag.optional
)

const saveOnExit = (sessionId: string, file: string, language: BackendId) =>
  exportSession(sessionId, file, language).pipe(
    Effect.flatMap((count) => Effect.sync(() => process.stderr.write(`veyyon: saved ${count} cell${count === 1 ? "" : "s"} to ${file}\n`))),
    Effect.catch((error) => Effect.sync(() => process.stderr.write(`veyyon: the session was not saved: ${error.message}\n`)))
  )

const repl = (language: BackendId, python: Option.Option<string>, saveTo: Option.Option<string>) => Effect.scoped(
  Effect.gen(function*() {
    const interactive = process.stdin.isTTY === true
    const context: CellContext = { sessionId: `repl-${process.pid}`, cwd: process.cwd(), language }
    if (Option.isSome(saveTo)) yield* Effect.addFinalizer(() => saveOnExit(context.sessionId, saveTo.value, language))
    const running: { current: AbortController | undefined } = { current: undefined }
    yield* startKernel(context).pipe(Effect.mapError(failureOf))
    const services = yield* Effect.context<EvalTool>()
    const tool = yield* EvalTool
    let buffer: Array<string> = []
    const completer: readline.AsyncCompleter = (lineBeforeCursor, answer) => {
      const { code, lineStart } = completionCode(buffer, lineBeforeCursor)
      Effect.runCallbackWith(services)(tool.complete({ language, code }, context), {
        onExit: (exit) =>
          answer(null, exit._tag === "Success" ? readlineCompletion(lineBeforeCursor, lineStart, exit.value) : [[], lineBeforeCursor])
      })
    }
    const { inputs, rl } = yield* openInput(interactive, running, completer)
    if (interactive) yield* say(`${kernelName(language)} kernel ready. Ctrl-C interrupts a cell; Ctrl-D or a second Ctrl-C at an empty prompt exits.`)

    const runSource = (code: string) =>
      Effect.gen(function*() {
        const controller = new AbortController()
        running.current = controller
        const run = yield* runCell({ code, timeout: REPL_CELL_TIMEOUT_SECONDS }, { ...context, signal: controller.signal }, makeCellView(stdoutTarget(), stderrTarget())).pipe(
          Effect.ensuring(Effect.sync(() => (running.current = undefined)))
        )
        for (const image of run.images) yield* say(savedImageLine(image))
        if (run.imageProblem !== undefined) yield* Effect.sync(() => process.stderr.write(`veyyon: images not saved: ${run.imageProblem}\n`))
      }).pipe(
        Effect.catch((error) => Effect.sync(() => process.stderr.write(`veyyon: ${failureOf(error).sentence ?? error.message}\n`)))
      )

    const showInspection = (name: string, detailLevel: 0 | 1) =>
      tool.inspect({ language, code: name, detailLevel }, context).pipe(
        Effect.flatMap((inspection) => {
          const text = inspection.bundle["text/plain"]
          return inspection.found && typeof text === "string" ? say(text) : say(`Object \`${name}\` not found.`)
        }),
        Effect.catch((error) => Effect.sync(() => process.stderr.write(`veyyon: ${error.message}\n`)))
      )

    let armedExit = false
    while (true) {
      if (interactive) {
        rl.setPrompt(buffer.length === 0 ? PROMPT : CONTINUATION)
        rl.prompt()
      }
      const input = yield* Queue.take(inputs)
      if (input._tag === "End") {
        const pending = cellSource(buffer)
        if (pending.trim().length > 0) yield* runSource(pending)
        if (interactive) yield* say("")
        return
      }
      if (input._tag === "Interrupt") {
        const typed = interactive && rl.line.length > 0
        if (buffer.length === 0 && !typed && armedExit) {
          yield* say("")
          return
        }
        if (typed) clearTypedLine(rl)
        armedExit = buffer.length === 0 && !typed
        yield* say(armedExit ? "\n(To exit, press Ctrl-C again or Ctrl-D.)" : "\nKeyboardInterrupt")
        buffer = []
        continue
      }
      armedExit = false
      if (buffer.length === 0 && EXIT_WORDS.has(input.line.trim())) return
      const inspection = buffer.length === 0 ? inspectionLine(input.line, backendOf(language)?.predicateNames === true) : undefined
      if (inspection !== undefined) {
        yield* showInspection(inspection.name, inspection.detailLevel)
        continue
      }
      buffer.push(input.line)
      if (!isCompleteCell(buffer, backendOf(language)?.opensBlock)) continue
      const code = cellSource(buffer)
      buffer = []
      if (code.trim().length > 0) yield* runSource(code)
    }
  })
).pipe(Effect.provide(cliEvalLayer({ longLived: true, python, language, snapshots: false })))

/** The `repl` command. */
export const replCommand = Command.make(
  "repl",
  { language: languageOption, python: pythonOption, save },
  ({ language, python, save }) => repl(language, python, save)
).pipe(
  Command.withDescription(
    "Interactive Python (or, with --language js, JavaScript) in one kernel, state kept. Ctrl-C interrupts a cell; Ctrl-D exits."
  )
)
