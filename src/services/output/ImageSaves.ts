/**
 * The images of one cell's displays and results: every image is saved as an `img-…`
 * artifact, so each is readable as `artifact://<id>`; images are kept in the result up to
 * an image budget of payload (base64 text as received), and later ones are left out, their
 * `text/plain` gaining a note naming their artifact. The saves run behind the cell, one at
 * a time and at most `MAX_PENDING_SAVE_BYTES` of payload behind it, so the cell's next
 * output does not wait for the disk.
 */
import { Effect, Fiber } from "effect"
import type { MimeBundle } from "../../kernel/Frame.ts"
import type { ArtifactStoreService } from "./ArtifactStore.ts"

/** Image payload (base64 text as received) kept in one result: 32 MiB. */
export const DEFAULT_MAX_IMAGE_BYTES = 32 * 1024 * 1024

/** Image payload (base64 text) that may wait to be saved behind a cell; past it, the next over-budget image waits. */
export const MAX_PENDING_SAVE_BYTES = 8 * 1024 * 1024

/** The image saves of one cell. */
export interface ImageSaves {
  /**
   * Starts saving the bundle's images, each in a place it reserves at once in the cell's
   * artifact ids (filled when its save succeeds); gives the bundle itself when all of them
   * fit the budget, else a copy without those past it, whose `text/plain` gains each one's
   * note when its save is done.
   */
  readonly bound: (bundle: MimeBundle) => Effect.Effect<MimeBundle>
  /** Whether a save is under way. */
  readonly pending: () => boolean
  /** Waits for every save under way. */
  readonly await: Effect.Effect<void>
}

const IMAGE_EXTENSIONS: Readonly<Record<string, string>> = {
  "image/png": "png",
  "image/jpeg": "jpg",
  "image/gif": "gif",
  "image/webp": "webp",
  "image/bmp": "bmp",
  "image/svg+xml": "svg"
}

const mebibytes = (bytes: number) => `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MiB`

/** Whether a bundle holds an image to save. */
export const hasImage = (bundle: MimeBundle): boolean => {
  for (const mime in bundle) {
    if (mime.startsWith("image/") && typeof bundle[mime] === "string") return true
  }
  return false
}

interface Image {
  readonly mime: string
  readonly payload: string
  readonly slot: number
}

/** The image saves of one cell into `store`, keeping `maxImageBytes` of payload in its result; `artifactIds` is the cell's list. */
export const makeImageSaves = (store: ArtifactStoreService, maxImageBytes: number, artifactIds: Array<string>): ImageSaves => {
  let imageBytes = 0
  let saves: Array<{ readonly fiber: Fiber.Fiber<void>; readonly bytes: number }> = []
  let pendingSaveBytes = 0

  /** The decoded bytes of one base64 payload, in a buffer reused from save to save (they run one at a time). */
  let scratch: Buffer | undefined
  const decodeBase64 = (payload: string): Buffer => {
    const most = Math.ceil(payload.length / 4) * 3
    if (scratch === undefined || scratch.length < most) scratch = Buffer.allocUnsafe(most)
    return scratch.subarray(0, scratch.write(payload, "base64"))
  }

  /** Saves one image, filling its reserved place in `artifactIds`; gives its size and where it went. */
  const writeImage = Effect.fnUntraced(function*({ mime, payload, slot }: Image) {
    const data = mime === "image/svg+xml" ? Buffer.from(payload, "utf8") : decodeBase64(payload)
    const saved = yield* Effect.result(Effect.scoped(
      Effect.tap(store.create("img", IMAGE_EXTENSIONS[mime] ?? "bin"), (image) =>
        Effect.andThen(image.append(data), image.close))
    ))
    if (saved._tag === "Success") artifactIds[slot] = saved.success.id
    return { bytes: data.length, saved }
  })

  const notShown = (what: string) => `${what} not shown: this result already holds ${mebibytes(maxImageBytes)} of images`

  /** Saves one image past the budget; gives the note that replaces it. */
  const saveOver = (image: Image) =>
    Effect.map(writeImage(image), ({ bytes, saved }) => {
      const why = notShown(`${image.mime} (${bytes} bytes)`)
      return saved._tag === "Failure" ? `[${why}; it could not be saved: ${saved.failure.message}]` : `[${why}; saved to ${saved.success.uri}]`
    })

  /** Runs `save` behind the cell after the saves before it, first waiting for the oldest while too much payload waits. */
  const startSave = Effect.fnUntraced(function*(save: Effect.Effect<void>, bytes: number) {
    while (saves.length > 0 && pendingSaveBytes + bytes > MAX_PENDING_SAVE_BYTES) {
      const oldest = saves.shift()!
      pendingSaveBytes -= oldest.bytes
      yield* Fiber.await(oldest.fiber)
    }
    const previous = saves.at(-1)?.fiber
    const fiber = yield* Effect.forkDetach(previous === undefined ? save : Effect.andThen(Fiber.await(previous), save))
    saves.push({ fiber, bytes })
    pendingSaveBytes += bytes
  })

  const payloadOf = (images: ReadonlyArray<Image>) => images.reduce((sum, { payload }) => sum + payload.length, 0)

  const bound = (bundle: MimeBundle) =>
    Effect.suspend(() => {
      const shown: Array<Image> = []
      const over: Array<Image> = []
      for (const [mime, payload] of Object.entries(bundle)) {
        if (!mime.startsWith("image/") || typeof payload !== "string") continue
        const image = { mime, payload, slot: artifactIds.push("") - 1 }
        if (imageBytes + payload.length <= maxImageBytes) {
          imageBytes += payload.length
          shown.push(image)
        } else {
          over.push(image)
        }
      }
      const saveShown = shown.length === 0
        ? Effect.void
        : startSave(Effect.forEach(shown, writeImage, { discard: true }), payloadOf(shown))
      if (over.length === 0) return Effect.as(saveShown, bundle)
      const bounded: Record<string, unknown> = { ...bundle }
      for (const { mime } of over) delete bounded[mime]
      const plain = bounded["text/plain"]
      const kept = typeof plain === "string" && plain.length > 0 ? [plain] : []
      const noted = (notes: ReadonlyArray<string>) => (bounded["text/plain"] = [...kept, ...notes].join("\n"))
      noted(over.map(({ mime }) => `[${notShown(mime)}; it could not be saved]`))
      const save = Effect.flatMap(Effect.forEach(over, saveOver), (notes) => Effect.sync(() => noted(notes)))
      return Effect.as(Effect.andThen(saveShown, startSave(save, payloadOf(over))), bounded)
    })

  const await_ = Effect.suspend(() => {
    const running = saves
    saves = []
    pendingSaveBytes = 0
    return Effect.forEach(running, (entry) => Fiber.await(entry.fiber), { discard: true })
  })

  return { bound, pending: () => saves.length > 0, await: await_ }
}
