/**
 * Which interpreters the bench runs: the real executable behind the `python3` on PATH
 * (so a pyenv shim costs nothing per spawn) for veyyon and the floor, and the system
 * interpreter that Debian's ipykernel and jupyter_client are installed for.
 */
import { execFileSync } from "node:child_process"

/** An interpreter and what the results may say about it. */
export interface Interpreter {
  readonly executable: string
  /** e.g. `CPython 3.11.7`. */
  readonly version: string
}

const ask = (python: string, code: string): string | undefined => {
  try {
    return execFileSync(python, ["-c", code], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"], timeout: 60_000 }).trim()
  } catch {
    return undefined
  }
}

const VERSION_CODE = "import platform, sys; print(sys.executable); print(platform.python_implementation(), platform.python_version())"

/** Resolves `candidate` to its real executable and version, or undefined when it does not run. */
export const resolveInterpreter = (candidate: string): Interpreter | undefined => {
  const answer = ask(candidate, VERSION_CODE)?.split("\n")
  if (answer === undefined || answer.length < 2 || answer[0] === "") return undefined
  return { executable: answer[0]!, version: answer[1]! }
}

/** The interpreter veyyon and the floor run: `VEYYON_BENCH_PYTHON`, else `python3` on PATH. */
export const benchInterpreter = (): Interpreter | undefined =>
  resolveInterpreter(process.env.VEYYON_BENCH_PYTHON ?? "python3")

/** The Jupyter interpreter with the package versions it runs. */
export interface JupyterInterpreter extends Interpreter {
  /** e.g. `ipykernel 6.17.0, jupyter_client 7.4.9`. */
  readonly packages: string
}

/** The interpreter Jupyter runs, and why it cannot be used when it cannot. */
export const jupyterInterpreter = (): JupyterInterpreter | { readonly missing: string } => {
  const candidate = process.env.VEYYON_BENCH_JUPYTER_PYTHON ?? "/usr/bin/python3"
  const found = resolveInterpreter(candidate)
  if (found === undefined) return { missing: `${candidate} does not run` }
  const packages = ask(found.executable, "import ipykernel, jupyter_client; print(f'ipykernel {ipykernel.__version__}, jupyter_client {jupyter_client.__version__}')")
  if (packages === undefined) {
    return { missing: `ipykernel and jupyter_client are not importable by ${candidate} (apt-get install python3-ipykernel python3-jupyter-client)` }
  }
  return { ...found, packages }
}
