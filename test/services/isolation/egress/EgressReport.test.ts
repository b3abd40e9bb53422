import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import { KernelOutput } from "../../../../src/kernel/KernelOutput.ts"
import { renderStatus } from "../../../../src/render/Status.ts"
import type { SinkOutput } from "../../../../src/services/output/OutputSink.ts"
import { destinations, egressOutputs, egressRecords } from "../../../../src/services/isolation/egress/EgressReport.ts"

const refused = { _tag: "Refused", via: "connect", host: "evil.test", port: 443, reason: "not-listed", detail: "evil.test is not in sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS)" } as const
const allowed = { _tag: "Allowed", via: "http", host: "pypi.org", port: 80, addresses: ["10.0.0.1"] } as const
const failed = { _tag: "Failed", via: "connect", host: "gone.test", port: 443, detail: "gone.test could not be resolved: ENOTFOUND" } as const

describe("egress report", () => {
  it("an allowed destination is one status event; a refusal or failure is first a stderr line naming the host and the setting", () => {
    expect(egressOutputs(allowed)).toEqual([KernelOutput.Status({ op: "egress", fields: { outcome: "allowed", host: "pypi.org", port: 80, via: "http" } })])
    expect(egressOutputs(refused)).toEqual([
      KernelOutput.Stderr({
        text: "veyyon sandbox egress proxy refused the CONNECT to evil.test:443: evil.test is not in sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS).\n" +
          "To allow it, add evil.test to sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS).\n"
      }),
      KernelOutput.Status({ op: "egress", fields: { outcome: "refused", host: "evil.test", port: 443, via: "connect", reason: "not-listed" } })
    ])
    expect(egressOutputs(failed)[0]).toEqual(KernelOutput.Stderr({ text: "veyyon sandbox egress proxy could not complete the CONNECT to gone.test:443: gone.test could not be resolved: ENOTFOUND.\n" }))
  })

  it("reads the decisions back from a cell's outputs, ignoring other status events, and names each destination once", () => {
    const outputs = [
      KernelOutput.Stdout({ text: "x" }),
      ...egressOutputs(allowed),
      KernelOutput.Status({ op: "cd", fields: { path: "/" } }),
      KernelOutput.Status({ op: "egress", fields: { outcome: "odd" } }),
      ...egressOutputs(refused),
      ...egressOutputs(refused),
      ...egressOutputs(failed)
    ] as Array<SinkOutput>
    const records = egressRecords(outputs)
    expect(records.map((record) => record.outcome)).toEqual(["allowed", "refused", "refused", "failed"])
    expect(destinations(records, "refused")).toEqual(["evil.test:443"])
    expect(destinations(records, "allowed")).toEqual(["pypi.org:80"])
    expect(destinations(records, "failed")).toEqual(["gone.test:443"])
  })

  it("the status event renders as nothing: the stderr line already says it", () => {
    expect(renderStatus({ op: "egress", fields: { outcome: "refused", host: "evil.test", port: 443 } })).toEqual(Option.none())
  })
})
