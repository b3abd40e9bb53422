/**
 * Images a cell displayed, written to files in the session's artifacts directory so a
 * terminal user can open them; each file is also an `artifact://` id of the session.
 */
import { Effect } from "effect"
import { Buffer } from "node:buffer"
import type { ImagePayload } from "../render/Mime.ts"
import { imagePlaceholder } from "../render/Mime.ts"
import type { ArtifactDirUnavailable, ArtifactStoreService, ArtifactWriteFailed, InvalidArtifactId } from "../services/output/ArtifactStore.ts"
import { ArtifactStore } from "../services/output/ArtifactStore.ts"

/** One image written to disk. */
export interface SavedImage {
  readonly path: string
  readonly uri: string
  readonly mimeType: ImagePayload["mimeType"]
  /** The renderer's short description, e.g. `[image/png 640x480, 12.3 KB]`. */
  readonly description: string
}

const EXTENSIONS: Readonly<Record<ImagePayload["mimeType"], string>> = {
  "image/png": "png",
  "image/jpeg": "jpg"
}

const saveOne = (
  store: ArtifactStoreService,
  image: ImagePayload
): Effect.Effect<SavedImage, InvalidArtifactId | ArtifactWriteFailed> =>
  Effect.scoped(
    Effect.gen(function*() {
      const writer = yield* store.create("image", EXTENSIONS[image.mimeType])
      yield* writer.append(Buffer.from(image.data, "base64"))
      yield* writer.close
      return { path: writer.path, uri: writer.uri, mimeType: image.mimeType, description: imagePlaceholder(image) }
    })
  )

/** Writes every image to the artifacts directory of `sessionId`, in order. */
export const saveImages = (
  sessionId: string,
  images: ReadonlyArray<ImagePayload>
): Effect.Effect<
  ReadonlyArray<SavedImage>,
  ArtifactDirUnavailable | InvalidArtifactId | ArtifactWriteFailed,
  ArtifactStore
> =>
  images.length === 0
    ? Effect.succeed([])
    : Effect.gen(function*() {
      const store = yield* Effect.flatMap(ArtifactStore, (root) => root.forSession(sessionId))
      return yield* Effect.forEach(images, (image) => saveOne(store, image))
    })

/** The line printed for a saved image: `image saved: <path> [image/png 64x64, 1.2 KB]`. */
export const savedImageLine = (image: SavedImage): string => `image saved: ${image.path} ${image.description}`
