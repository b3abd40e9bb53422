/**
 * How the egress proxy's decisions reach the cell that caused them: each one a structured
 * `egress` status event (kept for event handlers, the JSON result, the session record and the
 * cell's span), and each refusal or failure also a line on the cell's stderr with the words of
 * the proxy's own response (the host, why, and which setting to change).
 */
import { EGRESS_STATUS_OP } from "../../../kernel/Frame.ts"
import { KernelOutput } from "../../../kernel/KernelOutput.ts"
import type { EgressEvent } from "./EgressEvent.ts"
import { failureResponse, refusalResponse } from "./Refusal.ts"

/** The status op of an egress decision (defined beside the frames, whose router refuses it from a runner). */
export { EGRESS_STATUS_OP }

/** One destination as recorded: where, how it was asked for, and what the proxy did. */
export interface EgressRecord {
  readonly outcome: "allowed" | "refused" | "failed"
  readonly host: string
  readonly port: number
  readonly via: string
  /** Why it was refused (`not-listed`, `ip-literal`, `forbidden-address`, ...). */
  readonly reason?: string
}

const recordOf = (event: EgressEvent): EgressRecord => {
  const { host, port, via } = event
  switch (event._tag) {
    case "Allowed":
      return { outcome: "allowed", host, port, via }
    case "Refused":
      return { outcome: "refused", host, port, via, reason: event.reason }
    case "Failed":
      return { outcome: "failed", host, port, via }
  }
}

/** The outputs a decision adds to the running cell: its status event, and for a refusal or failure the stderr line first. */
export const egressOutputs = (event: EgressEvent): ReadonlyArray<KernelOutput> => {
  const status = KernelOutput.Status({ op: EGRESS_STATUS_OP, fields: { ...recordOf(event) } })
  if (event._tag === "Allowed") return [status]
  const response = event._tag === "Refused" ? refusalResponse(event) : failureResponse(event, false)
  return [KernelOutput.Stderr({ text: response.body }), status]
}

const isRecord = (fields: Readonly<Record<string, unknown>>): boolean =>
  (fields.outcome === "allowed" || fields.outcome === "refused" || fields.outcome === "failed") &&
  typeof fields.host === "string" && typeof fields.port === "number" && typeof fields.via === "string"

type StatusOutput = Extract<KernelOutput, { readonly _tag: "Status" }>

const isStatus = (output: { readonly _tag: string }): output is StatusOutput => output._tag === "Status"

/** The egress decisions among a cell's outputs (the kernel's, or the output sink's, which keeps status events as they are), in order. */
export const egressRecords = (outputs: ReadonlyArray<{ readonly _tag: string }>): ReadonlyArray<EgressRecord> =>
  outputs.flatMap((output) =>
    isStatus(output) && output.op === EGRESS_STATUS_OP && isRecord(output.fields) ? [output.fields as unknown as EgressRecord] : []
  )

/** `host:port` of each record with `outcome`, each once, for span attributes. */
export const destinations = (records: ReadonlyArray<EgressRecord>, outcome: EgressRecord["outcome"]): ReadonlyArray<string> => [
  ...new Set(records.filter((record) => record.outcome === outcome).map((record) => `${record.host}:${record.port}`))
]
