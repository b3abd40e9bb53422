/**
 * `veyyon setup sandbox --check`: whether bubblewrap works here, which network policies
 * it can give, how a kernel's process tree is contained, how the limits are applied, and
 * what the configured `sandbox.mode` would do. Fails with exit 3 when the mode is
 * `required` and the sandbox cannot run.
 */
import { Effect } from "effect"
import { containment, type ContainmentMechanism } from "../../process/Containment.ts"
import { makeSandbox, type SandboxProbe, SandboxUnavailable } from "../../services/isolation/Sandbox.ts"
import type { KernelLimits, SandboxMode } from "../../services/isolation/SandboxSettings.ts"
import { Settings } from "../../services/config/Settings.ts"

const CONTAINMENT_MEANINGS: Readonly<Record<ContainmentMechanism, string>> = {
  "cgroup-v2": "cgroup v2 (cgroup.kill): a kernel's whole tree ends with it, setsid'd processes and a killed host included",
  "cgroup-v1": "cgroup v1 (pids hierarchy): a kernel's whole tree is signalled until none is left, setsid'd processes and a killed host included",
  none: "none: outside the sandbox a kernel's tree is its process group; a process that calls setsid can outlive it"
}

const modeOutcome = (mode: SandboxMode, probe: SandboxProbe): string => {
  if (mode === "off") return "off: kernels run unsandboxed (set VEYYON_SANDBOX=auto or required to sandbox them)"
  if (probe.works) return `${mode}: kernels run sandboxed`
  return mode === "auto" ? "auto: the sandbox cannot run, so kernels run unsandboxed" : "required: no kernel can start"
}

const PIDS_BY_RLIMIT = "by RLIMIT_NPROC: in the sandbox it counts the sandbox's own processes, outside it every process of the user; " +
  "root is exempt from it, so as root only a writable cgroup applies the pids limit"

const limitsLine = (limits: KernelLimits, probe: SandboxProbe, pidsByCgroup: boolean): string => {
  const set = Object.entries(limits).filter(([, value]) => value !== undefined).map(([name, value]) => `${name}=${value}`)
  const how = `${probe.prlimit === undefined ? "prlimit missing (memoryMb and fileSizeMb cannot apply)" : `prlimit ${probe.prlimit}`}; ` +
    `pids ${pidsByCgroup ? "by cgroup pids.max" : PIDS_BY_RLIMIT}`
  return `${set.length === 0 ? "none set (the default: no limits)" : set.join(", ")}; ${how}`
}

/** The report's lines. */
export const sandboxReport = (
  mode: SandboxMode,
  network: string,
  probe: SandboxProbe,
  limits: KernelLimits,
  tree: { readonly mechanism: ContainmentMechanism; readonly pidsLimit: boolean }
): ReadonlyArray<string> => [
  `bwrap        ${probe.bwrap ?? "not found on PATH (Debian: apt-get install bubblewrap)"}`,
  `namespaces   ${probe.works ? "ok: user, pid, ipc, uts, mount and network" : `not available: ${probe.reason}`}`,
  `network      ${network}${probe.works ? " (allow, none and allowlist all work here)" : network === "allowlist" ? " (needs the sandbox: kernels will not start)" : ""}`,
  `containment  ${probe.works ? "in the sandbox: pid namespace with --die-with-parent; outside it: " : ""}${CONTAINMENT_MEANINGS[tree.mechanism]}`,
  `limits       ${limitsLine(limits, probe, tree.pidsLimit)}`,
  `mode         ${modeOutcome(mode, probe)}`
]

/** Prints the report; fails when the mode is `required` and cannot be met. */
export const checkSandbox = Effect.gen(function*() {
  const settings = yield* Settings
  const sandbox = yield* makeSandbox(settings.sandbox, settings.limits)
  const probe = yield* sandbox.probe
  const tree = yield* containment
  process.stdout.write(sandboxReport(settings.sandbox.mode, settings.sandbox.network, probe, settings.limits, tree).join("\n") + "\n")
  if ((settings.sandbox.mode === "required" || settings.sandbox.network === "allowlist") && !probe.works) {
    return yield* new SandboxUnavailable({ reason: probe.reason ?? "unknown", ...(settings.sandbox.network === "allowlist" ? { byAllowlist: true } : {}) })
  }
})
