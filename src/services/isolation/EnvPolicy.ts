/**
 * Which host environment variables reach a kernel (every backend builds its environment here).
 *
 * A variable passes when its name is on the allowlist or starts with an allowed
 * prefix, and is not a secret: neither named like one (`*_API_KEY`, `*_TOKEN`, `*_KEY`,
 * `*_PAT`, `*_PASSWORD`, `*_PWD`, `*_JWT`, `*_CREDENTIALS`, `*_AUTH`, ...) nor holding a credential-shaped
 * value (`sk-...`, `ghp_...`, `github_pat_...`, `xoxb-...`, `AKIA...`, a PEM private key, a
 * JWT, `Bearer ...`, a URL with credentials in it, a `password=` parameter). The secret rule wins over everything,
 * the allowed prefixes and the caller's own extra entries included: a kernel never sees
 * an API key or token from the host through its environment. (Outside a sandbox a kernel
 * running as the same user can still read the host's own `/proc/<pid>/environ`.) Names are compared case-insensitively (Windows spells `Path`).
 */
import * as path from "node:path"

/** An environment as Node exposes it: values may be missing. */
export type EnvRecord = Readonly<Record<string, string | undefined>>

/** Names a Python program commonly needs, compared in upper case. */
export const ALLOWED_ENV_NAMES: ReadonlySet<string> = new Set([
  // process basics
  "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR",
  "TMPDIR", "TEMP", "TMP", "TZ", "LANG", "LANGUAGE", "COLUMNS", "LINES", "TERMINFO",
  // Windows process basics (Python's socket and random modules need SYSTEMROOT)
  "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "USERNAME", "USERPROFILE",
  "HOMEDRIVE", "HOMEPATH", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA", "PROGRAMFILES",
  "PROGRAMFILES(X86)", "NUMBER_OF_PROCESSORS", "PROCESSOR_ARCHITECTURE", "OS",
  // interpreter and environment selection
  "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_EXE", "CONDA_PYTHON_EXE", "CONDA_SHLVL",
  "PYENV_VERSION", "PYENV_ROOT", "PYTHONPATH", "PYTHONHOME", "PYTHONUTF8", "PYTHONWARNINGS",
  "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONNOUSERSITE", "PYTHONUSERBASE",
  // the JavaScript kernel (NODE_OPTIONS stays out: it could load code into every kernel)
  "NODE_PATH", "NODE_EXTRA_CA_CERTS",
  // the Ruby kernel's gems (RUBYOPT stays out for the same reason)
  "GEM_HOME", "GEM_PATH",
  // native libraries
  "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "DYLD_FALLBACK_LIBRARY_PATH",
  // TLS and proxies, so %pip and HTTP clients work behind corporate networks
  "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
  "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
  // plotting and display
  "MPLBACKEND", "MPLCONFIGDIR", "DISPLAY", "WAYLAND_DISPLAY", "XAUTHORITY",
  // numeric libraries
  "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_MAX_THREADS",
  "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
  "CUDA_VISIBLE_DEVICES", "CUDA_HOME"
])

/** Name prefixes that pass as a family (locale, XDG base dirs, our own switches, pip config). */
export const ALLOWED_ENV_PREFIXES: ReadonlyArray<string> = ["LC_", "XDG_", "VEYYON_", "PIP_"]

/** Known provider credentials, named so the list is readable; the patterns below catch them too. */
export const DENIED_ENV_NAMES: ReadonlySet<string> = new Set([
  "OPENAI_API_KEY", "OPENAI_ORG_ID", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_KEY", "AZURE_API_KEY",
  "AZURE_CLIENT_SECRET", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_API_KEY",
  "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
  "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
  "MISTRAL_API_KEY", "COHERE_API_KEY", "CO_API_KEY", "GROQ_API_KEY", "XAI_API_KEY",
  "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN",
  "HUGGINGFACE_TOKEN", "HUGGINGFACEHUB_API_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "GITHUB_PAT",
  "GITLAB_TOKEN", "GL_TOKEN", "GITLAB_PRIVATE_TOKEN", "CI_JOB_TOKEN", "NPM_TOKEN", "PIP_PASSWORD",
  // the cluster secret and where it is kept, the cluster's Postgres (its URL may hold the
  // password in any form), and the HTTP door's bearer token
  "VEYYON_CLUSTER_SECRET", "VEYYON_CLUSTER_SECRET_FILE", "VEYYON_CLUSTER_POSTGRES_URL", "VEYYON_MCP_TOKEN", "VEYYON_MCP_TOKENS_FILE"
])

const SECRET_SEGMENT =
  /(^|_)(API_?KEYS?|TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASSPHRASE|CREDENTIALS?|JWTS?|(ACCESS|SECRET|PRIVATE|AUTH)_KEY)(_|$)/

const SECRET_ENDING = /(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)S?$|_(KEY|PAT|AUTH|PWD)S?$/

/** A vendor's KEY or PAT followed by more words (at the end of a name, SECRET_ENDING has it already). */
const VENDOR_KEY =
  /(^|_)(OPENAI|AZURE_OPENAI|AZURE|ANTHROPIC|CLAUDE|GEMINI|GOOGLE|MISTRAL|COHERE|GROQ|XAI|DEEPSEEK|OPENROUTER|HF|HUGGINGFACE|HUGGING_FACE|GITHUB|GH|GITLAB|GL|AWS)_(.*_)?(KEY|PAT)_/

/** Whether a name looks like a credential; such a variable never reaches the runner. */
export const isSecretEnvName = (name: string): boolean => {
  const upper = name.toUpperCase()
  return (
    DENIED_ENV_NAMES.has(upper) || SECRET_SEGMENT.test(upper) || SECRET_ENDING.test(upper) || VENDOR_KEY.test(upper)
  )
}

const URL_WITH_CREDENTIALS = /:\/\/[^/\s@]+@/

/** Whether a value embeds credentials in a URL, as a private package index or a proxy may. */
export const hasUrlCredentials = (value: string): boolean => URL_WITH_CREDENTIALS.test(value)

/** Shapes of credentials by value. */
export const SECRET_VALUE_PATTERNS: ReadonlyArray<RegExp> = [
  /(^|[^A-Za-z0-9])sk-[A-Za-z0-9_-]{20,}/, // OpenAI-style key (sk-...)
  /(^|[^A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}/, // GitHub token (ghp_, gho_, ghu_, ghs_, ghr_)
  /(^|[^A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}/, // GitHub fine-grained token
  /(^|[^A-Za-z0-9])xox[a-z]-[A-Za-z0-9-]{10,}/, // Slack token (xox?-...)
  /(^|[^A-Z0-9])(AKIA|ASIA)[A-Z0-9]{16}([^A-Z0-9]|$)/, // AWS access key id
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----/, // PEM private key
  /(^|[^A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\./, // JWT (signed or not)
  /(^|[^A-Za-z])(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=-]{8,}/i, // HTTP authorization
  /(^|[?&;\s])(password|passwd|sslpassword)=[^&;\s]/i // a password in a URL's query or a libpq connection string
]

/** Whether a value looks like a credential (see `SECRET_VALUE_PATTERNS`) or embeds one in a URL. */
export const isSecretEnvValue = (value: string): boolean =>
  hasUrlCredentials(value) || SECRET_VALUE_PATTERNS.some((pattern) => pattern.test(value))

/**
 * Names only the sandbox sets, for a kernel whose way out is the egress proxy (`sandbox.network:
 * allowlist`); the host's values never pass, so no kernel outside that sandbox starts a forwarder.
 */
export const SANDBOX_ONLY_ENV_NAMES: ReadonlySet<string> = new Set(["VEYYON_EGRESS_SOCKET", "VEYYON_EGRESS_PORT"])

/** Whether a host variable may be passed to the runner: allowlisted (by name or prefix), not a secret, not the sandbox's own. */
export const isAllowedEnvName = (name: string): boolean => {
  const upper = name.toUpperCase()
  const listed = ALLOWED_ENV_NAMES.has(upper) || ALLOWED_ENV_PREFIXES.some((prefix) => upper.startsWith(prefix))
  return listed && !isSecretEnvName(upper) && !SANDBOX_ONLY_ENV_NAMES.has(upper)
}

/** The host variables that pass the policy, with unset values dropped. */
export const filterHostEnv = (hostEnv: EnvRecord): Record<string, string> => {
  const kept: Record<string, string> = {}
  for (const [name, value] of Object.entries(hostEnv)) {
    if (value !== undefined && isAllowedEnvName(name) && !isSecretEnvValue(value)) kept[name] = value
  }
  return kept
}

/** The key that holds the search path: `PATH` on POSIX, whatever casing is present on Windows. */
export const pathEnvKey = (env: EnvRecord, platform: NodeJS.Platform): string => {
  if (platform !== "win32") return "PATH"
  return Object.keys(env).find((name) => name.toUpperCase() === "PATH") ?? "Path"
}

/** Puts `dir` first on the search path (once), leaving the other entries in order. */
export const prependToPath = (
  env: EnvRecord,
  dir: string,
  platform: NodeJS.Platform
): Record<string, string> => {
  const key = pathEnvKey(env, platform)
  const delimiter = platform === "win32" ? path.win32.delimiter : path.posix.delimiter
  const current = env[key]
  const entries = current === undefined || current.length === 0 ? [] : current.split(delimiter)
  const rest = entries.filter((entry) => entry !== dir)
  const result: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) if (value !== undefined) result[name] = value
  result[key] = [dir, ...rest].join(delimiter)
  return result
}

/** What the caller adds on top of the filtered host environment. */
export interface RunnerEnvOptions {
  /** Session artifacts directory, exported as `VEYYON_ARTIFACTS_DIR`. */
  readonly artifactsDir?: string | undefined
  /** A directory the backend puts first on PATH (a Python venv's bin or Scripts). */
  readonly binDir?: string | undefined
  /** Explicit entries; they bypass the allowlist but not the secret rule. */
  readonly extra?: EnvRecord | undefined
  /** Platform whose PATH conventions apply; defaults to the current one. */
  readonly platform?: NodeJS.Platform | undefined
  /** The variables the backend always sets, over the host's and the extras. */
  readonly fixed?: Readonly<Record<string, string>> | undefined
}

/** The complete environment to spawn the runner with. */
export const runnerEnv = (hostEnv: EnvRecord, options: RunnerEnvOptions = {}): Record<string, string> => {
  const platform = options.platform ?? process.platform
  let env: Record<string, string> = filterHostEnv(hostEnv)
  for (const [name, value] of Object.entries(options.extra ?? {})) {
    if (value !== undefined && !isSecretEnvName(name) && !isSecretEnvValue(value)) env[name] = value
  }
  if (options.fixed !== undefined) Object.assign(env, options.fixed)
  if (options.artifactsDir !== undefined) env["VEYYON_ARTIFACTS_DIR"] = options.artifactsDir
  if (options.binDir !== undefined) env = prependToPath(env, options.binDir, platform)
  return env
}
