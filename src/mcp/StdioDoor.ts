/**
 * The stdio door: one client, newline-delimited JSON-RPC on stdin and stdout. Lines
 * longer than `MAX_MESSAGE_BYTES` are dropped with an error reply; every other line is
 * answered (or, for notifications, handled) and the door keeps reading until stdin ends.
 */
import { Effect, Stream } from "effect"
import { LineSplitter } from "../kernel/LineSplitter.ts"
import { type JsonRpcOut, MAX_MESSAGE_BYTES, parseFrame, tooLargeReply } from "./JsonRpc.ts"
import { type McpDoor, writerReply } from "./McpDoor.ts"

/** The client id of the stdio connection. */
export const STDIO_CLIENT_ID = 0

/** Feeds `stdin` to the door and writes every message to `writeLine` until stdin ends. */
export const serveStdio = <E, R>(
  door: McpDoor,
  stdin: Stream.Stream<Uint8Array, E, R>,
  writeLine: (line: string) => Effect.Effect<void>,
  maxMessageBytes: number = MAX_MESSAGE_BYTES
): Effect.Effect<void, E, R> =>
  Effect.gen(function*() {
    const write = (message: JsonRpcOut) => writeLine(`${JSON.stringify(message)}\n`)
    const reply = writerReply(write)
    const splitter = new LineSplitter(maxMessageBytes)
    const handle = (line: string) => (line.trim() === "" ? Effect.void : door.receive(STDIO_CLIENT_ID, parseFrame(line), reply))
    yield* door.connect(STDIO_CLIENT_ID, (message) => Effect.as(write(message), true))
    yield* Stream.runForEach(stdin, (chunk) =>
      Effect.gen(function*() {
        const { lines, overlong } = splitter.push(chunk)
        for (let i = 0; i < overlong; i++) yield* write(tooLargeReply(maxMessageBytes))
        for (const line of lines) yield* handle(line)
      }))
    const tail = splitter.flush()
    if (tail !== undefined) yield* handle(tail)
  })
