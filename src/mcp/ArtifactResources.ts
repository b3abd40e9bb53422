/**
 * A session's artifacts as MCP resources: `resources/list` lists the files the calling
 * session's cells produced, `resources/read` returns one (text with its MIME type, or a
 * base64 blob for binary). Only the caller's own session directory is consulted, so
 * another session's artifacts are simply not found.
 */
import { Buffer } from "node:buffer"
import { Effect } from "effect"
import { type ArtifactEntry, artifactIdOfUri, artifactIdProblem, type ArtifactStoreService } from "../services/output/ArtifactStore.ts"
import { ErrorCode } from "./JsonRpc.ts"
import { McpFailure } from "./McpDoor.ts"

/** The largest artifact `resources/read` returns (64 MiB); a larger one is an error naming its file. */
export const MAX_RESOURCE_BYTES = 64 * 1024 * 1024

const MIME_TYPES: Readonly<Record<string, string>> = {
  txt: "text/plain",
  jsonl: "application/jsonl",
  json: "application/json",
  html: "text/html",
  svg: "image/svg+xml",
  png: "image/png",
  jpg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  bmp: "image/bmp"
}

/** The MIME type of an artifact, from its extension. */
export const artifactMimeType = (id: string): string => {
  const dot = id.lastIndexOf(".")
  return (dot === -1 ? undefined : MIME_TYPES[id.slice(dot + 1)]) ?? "application/octet-stream"
}

/** Whether a MIME type is returned as text rather than a blob. */
export const isTextMimeType = (mimeType: string): boolean =>
  mimeType.startsWith("text/") || mimeType === "application/json" || mimeType === "application/jsonl" || mimeType === "image/svg+xml"

/** The `resources/list` result for a session's artifacts. */
export const listResult = (entries: ReadonlyArray<ArtifactEntry>) => ({
  resources: entries.map((entry) => ({
    uri: entry.uri,
    name: entry.id,
    title: `Artifact ${entry.id}`,
    mimeType: artifactMimeType(entry.id),
    size: entry.size
  }))
})

/** One artifact's `resources/read` contents. */
export const readContents = (uri: string, id: string, bytes: Uint8Array) => {
  const mimeType = artifactMimeType(id)
  return isTextMimeType(mimeType)
    ? { uri, mimeType, text: new TextDecoder("utf-8").decode(bytes) }
    : { uri, mimeType, blob: Buffer.from(bytes).toString("base64") }
}

const fail = (code: number, message: string) => Effect.fail(new McpFailure({ code, message }))

/** The `resources/read` answer for `uri` from a session's store. */
export const readArtifact = (store: ArtifactStoreService, uri: unknown) =>
  Effect.gen(function*() {
    if (typeof uri !== "string") return yield* fail(ErrorCode.InvalidParams, "Invalid params: `uri` is missing: pass the artifact:// URI a result named.")
    const id = artifactIdOfUri(uri)
    if (id === undefined) {
      return yield* fail(ErrorCode.ResourceNotFound, `Resource not found: ${uri}. This server's resources are the artifact:// URIs its results name.`)
    }
    const problem = artifactIdProblem(id)
    if (problem !== undefined) return yield* fail(ErrorCode.InvalidParams, `Invalid params: ${JSON.stringify(uri)} is not an artifact URI (${problem}).`)
    const entries = yield* Effect.mapError(store.list, (error) => new McpFailure({ code: ErrorCode.InternalError, message: error.message }))
    const entry = entries.find((candidate) => candidate.id === id)
    if (entry === undefined) {
      return yield* fail(
        ErrorCode.ResourceNotFound,
        `Resource not found: ${uri}. Artifacts are readable only by the session whose cell wrote them; rerun the cell to produce it again.`
      )
    }
    if (entry.size > MAX_RESOURCE_BYTES) {
      return yield* fail(
        ErrorCode.InternalError,
        `${uri} is ${entry.size} bytes, over the ${MAX_RESOURCE_BYTES / (1024 * 1024)} MiB resources/read limit; read it in parts from a cell instead.`
      )
    }
    const bytes = yield* Effect.mapError(store.readBytes(id), (error) =>
      new McpFailure({ code: error._tag === "ArtifactNotFound" ? ErrorCode.ResourceNotFound : ErrorCode.InternalError, message: error.message }))
    return { contents: [readContents(uri, id, bytes)] }
  })
