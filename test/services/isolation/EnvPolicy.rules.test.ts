/**
 * Every rule of the kernel environment's policy pinned one by one: each secret-name
 * family at the start, middle and end of a name, singular and plural; names that only
 * look like one; each credential value shape at its shortest and one short of it; the
 * allowlist as a literal list; unset values; the Windows `Path` key; and real credential
 * names of cloud CLIs and CI systems.
 */
import { describe, expect, it } from "@effect/vitest"
import { Schema } from "effect"
import {
  ALLOWED_ENV_NAMES,
  ALLOWED_ENV_PREFIXES,
  DENIED_ENV_NAMES,
  filterHostEnv,
  isSecretEnvName,
  isSecretEnvValue,
  pathEnvKey,
  prependToPath,
  runnerEnv
} from "../../../src/services/isolation/EnvPolicy.ts"

/** The secret words, each with its plural where it has one. */
const FAMILIES: ReadonlyArray<readonly [string, string | undefined]> = [
  ["API_KEY", "API_KEYS"],
  ["APIKEY", "APIKEYS"],
  ["TOKEN", "TOKENS"],
  ["SECRET", "SECRETS"],
  ["PASSWORD", "PASSWORDS"],
  ["PASSWD", undefined],
  ["PASSPHRASE", undefined],
  ["CREDENTIAL", "CREDENTIALS"],
  ["ACCESS_KEY", undefined],
  ["SECRET_KEY", undefined],
  ["PRIVATE_KEY", undefined],
  ["AUTH_KEY", undefined],
  ["JWT", "JWTS"]
]

describe("secret names", () => {
  it("every family is a secret at the start, in the middle and at the end of a name, singular and plural", () => {
    for (const [singular, plural] of FAMILIES) {
      for (const word of plural === undefined ? [singular] : [singular, plural]) {
        for (const name of [word, `${word}_FILE`, `VEYYON_${word}_FILE`, `PIP_${word}_CMD`, `MY_${word}`, word.toLowerCase()]) {
          expect(isSecretEnvName(name), name).toBe(true)
        }
      }
    }
  })

  it("words glued to the end are secrets too, and a few short endings after an underscore", () => {
    for (const name of ["VEYYON_AUTHTOKEN", "MYAPIKEY", "DBPASSWD", "PGPASSWORD", "APPSECRETS", "X_KEY", "X_KEYS", "X_PAT", "X_PATS", "X_AUTH", "X_CREDENTIAL", "MYSQL_PWD"]) {
      expect(isSecretEnvName(name), name).toBe(true)
    }
  })

  it("a vendor's key or token is a secret wherever KEY or PAT stands, also under a prefix", () => {
    for (const name of ["OPENAI_KEY_FILE", "GITHUB_PAT_2", "AZURE_STORAGE_KEY_PRIMARY", "AWS_KEY", "HF_X_PAT", "MY_OPENAI_KEY_FILE", "VEYYON_GH_PAT_OLD"]) {
      expect(isSecretEnvName(name), name).toBe(true)
    }
    expect(isSecretEnvName("MYOPENAI_KEY_FILE")).toBe(false)
    expect(isSecretEnvName("OPENAI_KEYBOARD")).toBe(false)
  })

  it("names every known provider credential, including ones no pattern catches", () => {
    expect([...DENIED_ENV_NAMES].sort()).toEqual([
      "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN",
      "AZURE_API_KEY", "AZURE_CLIENT_SECRET", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_KEY", "CI_JOB_TOKEN", "CLAUDE_API_KEY",
      "COHERE_API_KEY", "CO_API_KEY", "DEEPSEEK_API_KEY", "GEMINI_API_KEY", "GH_TOKEN", "GITHUB_PAT", "GITHUB_TOKEN",
      "GITLAB_PRIVATE_TOKEN", "GITLAB_TOKEN", "GL_TOKEN", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GROQ_API_KEY",
      "HF_TOKEN", "HUGGINGFACEHUB_API_TOKEN", "HUGGINGFACE_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MISTRAL_API_KEY", "NPM_TOKEN",
      "OPENAI_API_KEY", "OPENAI_ORG_ID", "OPENROUTER_API_KEY", "PIP_PASSWORD", "VEYYON_CLUSTER_POSTGRES_URL",
      "VEYYON_CLUSTER_SECRET", "VEYYON_CLUSTER_SECRET_FILE", "VEYYON_MCP_TOKEN", "VEYYON_MCP_TOKENS_FILE", "XAI_API_KEY"
    ])
    expect(isSecretEnvName("openai_org_id")).toBe(true)
  })

  it("names that merely contain a secret word are not secrets", () => {
    for (const name of [
      "TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "SECRETARY", "PASSWORDLESS_LOGIN", "PATTERN", "AUTHOR", "PATH",
      "XDG_CONFIG_HOME", "MONKEY", "PWD", "OLDPWD", "OPENAI_ORGANIZATION_NAME", "JWTLIB_HOME", "KEYS_DIR_HINT_X"
    ]) {
      expect(isSecretEnvName(name), name).toBe(false)
    }
  })

  it("real credential variables of cloud CLIs, package registries and CI systems are secrets", () => {
    for (const name of [
      "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_CLIENT_SECRET", "ARM_CLIENT_SECRET",
      "ARM_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_OAUTH_ACCESS_TOKEN", "CLOUDSDK_AUTH_ACCESS_TOKEN_FILE",
      "DIGITALOCEAN_ACCESS_TOKEN", "HCLOUD_TOKEN", "LINODE_TOKEN", "HEROKU_API_KEY", "VERCEL_TOKEN", "NETLIFY_AUTH_TOKEN",
      "CLOUDFLARE_API_TOKEN", "VAULT_TOKEN", "CONSUL_HTTP_TOKEN", "NOMAD_TOKEN", "DOCKER_PASSWORD", "DOCKERHUB_TOKEN",
      "NPM_TOKEN", "NODE_AUTH_TOKEN", "TWINE_PASSWORD", "PYPI_API_TOKEN", "POETRY_PYPI_TOKEN_PYPI", "GEM_HOST_API_KEY",
      "CARGO_REGISTRY_TOKEN", "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "ACTIONS_ID_TOKEN_REQUEST_TOKEN", "CI_JOB_TOKEN",
      "CI_JOB_JWT", "CI_JOB_JWT_V2", "CI_REGISTRY_PASSWORD", "CIRCLE_TOKEN", "TRAVIS_API_TOKEN", "BUILDKITE_AGENT_TOKEN",
      "SENTRY_AUTH_TOKEN", "CODECOV_TOKEN", "SLACK_BOT_TOKEN", "STRIPE_SECRET_KEY", "DATABASE_PASSWORD", "PGPASSWORD",
      "MYSQL_PWD", "REDIS_PASSWORD", "TF_VAR_db_password", "SNOWFLAKE_PRIVATE_KEY_PASSPHRASE", "VEYYON_MCP_TOKEN",
      "VEYYON_CLUSTER_SECRET", "VEYYON_CLUSTER_SECRET_FILE"
    ]) {
      expect(isSecretEnvName(name), name).toBe(true)
    }
  })

  it.prop("no name of a secret family is ever kept, under any allowed prefix or as an extra", {
    prefix: Schema.Literals(["", ...ALLOWED_ENV_PREFIXES, "MY_"]),
    family: Schema.Literals(FAMILIES.flatMap(([singular, plural]) => (plural === undefined ? [singular] : [singular, plural]))),
    tail: Schema.Literals(["", "_FILE", "_CMD", "_2"])
  }, ({ prefix, family, tail }) => {
    const name = `${prefix}${family}${tail}`
    expect(filterHostEnv({ [name]: "plain" })).toEqual({})
    expect(Object.keys(runnerEnv({}, { extra: { [name]: "plain" }, fixed: {} }))).toEqual([])
  })
})

describe("secret values", () => {
  const shapes: ReadonlyArray<readonly [string, string, string]> = [
    ["OpenAI", `sk-${"a".repeat(20)}`, `sk-${"a".repeat(19)}`],
    ["GitHub classic", `ghp_${"a".repeat(20)}`, `ghp_${"a".repeat(19)}`],
    ["GitHub fine-grained", `github_pat_${"a".repeat(20)}`, `github_pat_${"a".repeat(19)}`],
    ["Slack", `xoxb-${"a".repeat(10)}`, `xoxb-${"a".repeat(9)}`],
    ["AWS", `AKIA${"A".repeat(16)}`, `AKIA${"A".repeat(15)}`],
    ["JWT", `eyJ${"a".repeat(8)}.eyJ${"a".repeat(8)}.sig`, `eyJ${"a".repeat(7)}.eyJ${"a".repeat(8)}.sig`],
    ["Bearer", `Bearer ${"a".repeat(8)}`, `Bearer ${"a".repeat(7)}`]
  ]

  it("each shape is a credential at its shortest length and not one character shorter", () => {
    for (const [shape, shortest, tooShort] of shapes) {
      expect(isSecretEnvValue(shortest), shape).toBe(true)
      expect(isSecretEnvValue(tooShort), shape).toBe(false)
    }
  })

  it("a shape glued to a word is not a credential, and one after punctuation is", () => {
    expect(isSecretEnvValue(`task-${"a".repeat(30)}`)).toBe(false)
    expect(isSecretEnvValue(`key=sk-${"a".repeat(30)}`)).toBe(true)
    expect(isSecretEnvValue(`XAKIA${"A".repeat(16)}`)).toBe(false)
    expect(isSecretEnvValue(`AKIA${"A".repeat(17)}`)).toBe(false)
    expect(isSecretEnvValue(`MyBearer ${"a".repeat(12)}`)).toBe(false)
  })

  it("a JWT without a signature, a URL with credentials under any scheme, and an authorization with more spaces are credentials", () => {
    expect(isSecretEnvValue(`eyJ${"a".repeat(8)}.eyJ${"a".repeat(8)}.`)).toBe(true)
    expect(isSecretEnvValue("x://user:pw@host/")).toBe(true)
    expect(isSecretEnvValue("git+ssh://deploy@host/repo")).toBe(true)
    expect(isSecretEnvValue("https://host/path@v1")).toBe(false)
    expect(isSecretEnvValue(`Bearer   ${"a".repeat(8)}`)).toBe(true)
  })

  it("a password parameter of a URL's query or a libpq connection string is a credential, at the start or after a separator", () => {
    for (const value of ["postgres://db.internal/app?password=s", "postgres://h/app?sslmode=require&PASSWORD=s", "host=h passwd=s", "password=s", "a=1;sslpassword=s"]) {
      expect(isSecretEnvValue(value), value).toBe(true)
    }
    for (const value of ["password=", "postgres://h/app?mypassword=s", "host=h password= x", "postgres://h/app?user=u"]) {
      expect(isSecretEnvValue(value), value).toBe(false)
    }
  })

  it("the cluster's Postgres URL never reaches a kernel, even without a password in it; nor the HTTP door's token", () => {
    expect(filterHostEnv({ VEYYON_CLUSTER_POSTGRES_URL: "postgres://db.internal/app", VEYYON_MCP_TOKEN: "plain", VEYYON_ARTIFACTS_DIR: "/a" }))
      .toEqual({ VEYYON_ARTIFACTS_DIR: "/a" })
  })

  it("a PEM private key of any kind is a credential; a certificate is not", () => {
    expect(isSecretEnvValue("-----BEGIN OPENSSH PRIVATE KEY-----\nabc")).toBe(true)
    expect(isSecretEnvValue("-----BEGIN PRIVATE KEY-----\nabc")).toBe(true)
    expect(isSecretEnvValue("-----BEGIN CERTIFICATE-----\nabc")).toBe(false)
  })
})

describe("the allowlist", () => {
  it("is exactly these names", () => {
    expect([...ALLOWED_ENV_NAMES].sort()).toEqual([
      "ALL_PROXY", "APPDATA", "COLORTERM", "COLUMNS", "COMSPEC", "CONDA_DEFAULT_ENV", "CONDA_EXE", "CONDA_PREFIX",
      "CONDA_PYTHON_EXE", "CONDA_SHLVL", "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "CURL_CA_BUNDLE", "DISPLAY",
      "DYLD_FALLBACK_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "FORCE_COLOR", "GEM_HOME", "GEM_PATH", "HOME", "HOMEDRIVE",
      "HOMEPATH", "HTTPS_PROXY", "HTTP_PROXY", "LANG", "LANGUAGE", "LD_LIBRARY_PATH", "LINES", "LOCALAPPDATA", "LOGNAME",
      "MKL_NUM_THREADS", "MPLBACKEND", "MPLCONFIGDIR", "NODE_EXTRA_CA_CERTS", "NODE_PATH", "NO_COLOR", "NO_PROXY",
      "NUMBER_OF_PROCESSORS", "NUMEXPR_MAX_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
      "OPENBLAS_NUM_THREADS", "OS", "PATH", "PATHEXT", "PROCESSOR_ARCHITECTURE", "PROGRAMDATA", "PROGRAMFILES",
      "PROGRAMFILES(X86)", "PYENV_ROOT", "PYENV_VERSION", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "PYTHONNOUSERSITE",
      "PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONUSERBASE", "PYTHONUTF8", "PYTHONWARNINGS", "REQUESTS_CA_BUNDLE",
      "SHELL", "SSL_CERT_DIR", "SSL_CERT_FILE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TERM", "TERMINFO", "TMP", "TMPDIR",
      "TZ", "USER", "USERNAME", "USERPROFILE", "VIRTUAL_ENV", "WAYLAND_DISPLAY", "WINDIR", "XAUTHORITY"
    ])
    expect(ALLOWED_ENV_PREFIXES).toEqual(["LC_", "XDG_", "VEYYON_", "PIP_"])
  })

  it("keeps each allowed name and prefix family in any case, and nothing next to them", () => {
    const host: Record<string, string> = {}
    for (const name of ALLOWED_ENV_NAMES) host[name.toLowerCase()] = "v"
    for (const prefix of ALLOWED_ENV_PREFIXES) host[`${prefix}X`] = "v"
    expect(filterHostEnv({ ...host, PATHX: "v", XLC_ALL: "v", LC: "v", VEYYON: "v" })).toEqual(host)
  })

  it("drops an unset value rather than keeping its name", () => {
    expect(Object.keys(filterHostEnv({ PATH: undefined, HOME: "/h" }))).toEqual(["HOME"])
    expect(Object.keys(runnerEnv({}, { extra: { MY_FLAG: undefined }, fixed: {} }))).toEqual([])
    expect(prependToPath({ HOME: undefined, LANG: "C" }, "/v", "linux")).toStrictEqual({ LANG: "C", PATH: "/v" })
  })
})

describe("the search path's key", () => {
  it("is PATH on POSIX whatever the environment spells, and the spelling present on Windows", () => {
    expect(pathEnvKey({ Path: "x" }, "darwin")).toBe("PATH")
    expect(pathEnvKey({ PATH: "x" }, "win32")).toBe("PATH")
    expect(pathEnvKey({ path: "x", HOME: "h" }, "win32")).toBe("path")
    expect(pathEnvKey({ HOME: "h", PATHEXT: ".EXE" }, "win32")).toBe("Path")
  })

  it("follows the platform given, not the one it runs on", () => {
    const env = runnerEnv({ PATH: "C:\\bin" }, { binDir: "C:\\v\\Scripts", platform: "win32", fixed: {} })
    expect(env).toEqual({ PATH: "C:\\v\\Scripts;C:\\bin" })
    expect(runnerEnv({ PATH: "/bin" }, { binDir: "/v/bin", platform: "linux", fixed: {} })).toEqual({ PATH: "/v/bin:/bin" })
  })
})
