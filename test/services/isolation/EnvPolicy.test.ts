import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Schema } from "effect"
import {
  ALLOWED_ENV_NAMES,
  DENIED_ENV_NAMES,
  filterHostEnv,
  hasUrlCredentials,
  isAllowedEnvName,
  isSecretEnvName,
  isSecretEnvValue,
  pathEnvKey,
  prependToPath,
  runnerEnv
} from "../../../src/services/isolation/EnvPolicy.ts"

/** Independent statement of the brief's rule, so the property does not just replay the implementation. */
const looksSecret = (name: string): boolean =>
  /(_API_KEY|_TOKEN|_SECRET|_PASSWORD)$/i.test(name) || DENIED_ENV_NAMES.has(name.toUpperCase())

/** One of `values`, each as likely. */
const oneOfValues = <A>(values: ReadonlyArray<A>): Arbitrary.Arbitrary<A> =>
  Arbitrary.map(Arbitrary.schema(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: values.length - 1 }))), (at) => values[at]!)

/** A value from one of `arbitraries`, each as likely. */
const oneOf = <A>(...arbitraries: ReadonlyArray<Arbitrary.Arbitrary<A>>): Arbitrary.Arbitrary<A> =>
  Arbitrary.flatMap(oneOfValues(arbitraries), (chosen) => chosen)

/** Strings matching `pattern`. */
const matching = (pattern: RegExp): Arbitrary.Arbitrary<string> => Arbitrary.schema(Schema.String.check(Schema.isPattern(pattern)))

const randomCase = (name: string) =>
  Arbitrary.array(Arbitrary.schema(Schema.Boolean), { minLength: name.length, maxLength: name.length }).pipe(
    Arbitrary.map((flips) => [...name].map((ch, i) => (flips[i] ? ch.toLowerCase() : ch.toUpperCase())).join(""))
  )

const stems = oneOfValues(["", "LC_", "XDG_", "VEYYON_", "PIP_", "PATH_", "HOME_", "MY_", "OPENAI_", "AWS_"])
const secretSuffixes = oneOfValues(["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "API_KEY", "TOKEN"])
const word = matching(/^[A-Za-z0-9]{0,8}$/)

const secretName = oneOf(
  Arbitrary.flatMap(Arbitrary.all([stems, word, secretSuffixes]), ([stem, middle, suffix]) => randomCase(stem + middle + suffix)),
  Arbitrary.flatMap(oneOfValues([...DENIED_ENV_NAMES]), randomCase)
)
const plainName = oneOf(
  oneOfValues([...ALLOWED_ENV_NAMES]),
  Arbitrary.map(Arbitrary.all([stems, word]), ([stem, rest]) => stem + rest),
  matching(/^[A-Za-z_][A-Za-z0-9_]{0,20}$/)
)
const envArb = Arbitrary.map(
  Arbitrary.array(Arbitrary.all([oneOf(secretName, plainName), Arbitrary.schema(Schema.String.check(Schema.isMaxLength(20)))]), { maxLength: 30 }),
  (entries): Record<string, string> => Object.fromEntries(entries)
)

/** The fixed variables of a backend (the Python runner's). */
const FIXED: Readonly<Record<string, string>> = { PYTHONUNBUFFERED: "1", PYTHONIOENCODING: "utf-8" }

describe("EnvPolicy", () => {
  it("keeps the core variables a Python program needs", () => {
    const host = {
      PATH: "/usr/bin",
      HOME: "/home/u",
      LANG: "C.UTF-8",
      VIRTUAL_ENV: "/p/.venv",
      PYTHONPATH: "/src",
      SSL_CERT_FILE: "/etc/ca.pem",
      https_proxy: "http://proxy:3128",
      SystemRoot: "C:\\Windows"
    }
    expect(filterHostEnv(host)).toEqual(host)
  })

  it("keeps what numeric libraries and the JavaScript kernel need", () => {
    const host = { OPENBLAS_CORETYPE: "Haswell", OPENBLAS_L2_SIZE: "1048576", NODE_PATH: "/n", NODE_EXTRA_CA_CERTS: "/ca.pem" }
    expect(filterHostEnv(host)).toEqual(host)
  })

  it("keeps the allowed prefix families", () => {
    const host = { LC_ALL: "C", XDG_CACHE_HOME: "/c", VEYYON_PY: "1", PIP_INDEX_URL: "https://pypi.example" }
    expect(filterHostEnv(host)).toEqual(host)
  })

  it("drops allowed variables whose value is a URL carrying credentials", () => {
    const host = {
      PIP_INDEX_URL: "https://deploy:s3cret@pypi.corp.example/simple",
      PIP_EXTRA_INDEX_URL: "https://pypi.example/simple https://ghp_abc123@git.example/simple",
      HTTPS_PROXY: "http://me:pw@proxy:3128",
      HTTP_PROXY: "http://proxy:3128",
      PIP_TRUSTED_HOST: "pypi.corp.example"
    }
    expect(filterHostEnv(host)).toEqual({ HTTP_PROXY: "http://proxy:3128", PIP_TRUSTED_HOST: "pypi.corp.example" })
    expect(hasUrlCredentials("git@github.com:o/r.git")).toBe(false)
    expect(hasUrlCredentials("mailto:someone@example.com")).toBe(false)
  })

  it("drops everything else, including PYTHONSTARTUP, PWD and the ssh agent socket", () => {
    const host = { PYTHONSTARTUP: "/x.py", PWD: "/old", SSH_AUTH_SOCK: "/tmp/agent", NODE_OPTIONS: "--inspect", FOO: "1" }
    expect(filterHostEnv(host)).toEqual({})
  })

  it("drops the egress forwarder's variables and NODE_USE_ENV_PROXY: only the allowlist sandbox sets them", () => {
    const host = { VEYYON_EGRESS_SOCKET: "/tmp/s", veyyon_egress_port: "3128", NODE_USE_ENV_PROXY: "1", VEYYON_PY: "1", HTTPS_PROXY: "http://corp:3128" }
    expect(filterHostEnv(host)).toEqual({ VEYYON_PY: "1", HTTPS_PROXY: "http://corp:3128" })
  })

  it("drops unset values", () => {
    expect(filterHostEnv({ PATH: undefined, HOME: "/h" })).toEqual({ HOME: "/h" })
  })

  it("strips provider keys and tokens even under an allowed prefix", () => {
    for (const name of [
      "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AZURE_OPENAI_API_KEY",
      "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "MISTRAL_API_KEY", "COHERE_API_KEY", "GROQ_API_KEY",
      "XAI_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "HF_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
      "GITLAB_TOKEN", "AZURE_OPENAI_KEY", "GITHUB_PAT", "GOOGLE_APPLICATION_CREDENTIALS"
    ]) {
      expect(isSecretEnvName(name), name).toBe(true)
    }
    const host = {
      VEYYON_API_KEY: "k",
      VEYYON_SESSION_TOKEN: "t",
      XDG_SECRET: "s",
      PIP_PASSWORD: "p",
      LC_PASSWORD: "p",
      veyyon_github_token: "t",
      VEYYON_PY: "1"
    }
    expect(filterHostEnv(host)).toEqual({ VEYYON_PY: "1" })
  })

  it("matches secret names case-insensitively", () => {
    expect(isSecretEnvName("openai_api_key")).toBe(true)
    expect(isSecretEnvName("My_Service_Token")).toBe(true)
    expect(isSecretEnvName("db_password")).toBe(true)
    expect(isSecretEnvName("Some_Secret")).toBe(true)
    expect(isSecretEnvName("VEYYON_AUTHTOKEN")).toBe(true)
  })

  it("does not flag ordinary names that merely contain a secret word", () => {
    expect(isSecretEnvName("TOKENIZERS_PARALLELISM")).toBe(false)
    expect(isSecretEnvName("KEYBOARD_LAYOUT")).toBe(false)
    expect(isSecretEnvName("XDG_CONFIG_HOME")).toBe(false)
  })

  it("allows every allowlisted name", () => {
    for (const name of ALLOWED_ENV_NAMES) expect(isAllowedEnvName(name), name).toBe(true)
  })

  it("always sets the backend's fixed variables, overriding the host and extras", () => {
    const env = runnerEnv({ PYTHONUNBUFFERED: "0", PATH: "/bin" }, { extra: { PYTHONIOENCODING: "latin-1" }, fixed: FIXED })
    expect(env).toEqual({ PATH: "/bin", ...FIXED })
    expect(runnerEnv({ PATH: "/bin" })).toEqual({ PATH: "/bin" })
  })

  it("exports the artifacts dir only when given", () => {
    expect(runnerEnv({}, { artifactsDir: "/a/s1" })["VEYYON_ARTIFACTS_DIR"]).toBe("/a/s1")
    expect(runnerEnv({})).not.toHaveProperty("VEYYON_ARTIFACTS_DIR")
  })

  it("passes extra entries past the allowlist but never past the secret rule", () => {
    const env = runnerEnv({}, { extra: { MY_FLAG: "on", OPENAI_API_KEY: "sk", SKIPPED: undefined } })
    expect(env["MY_FLAG"]).toBe("on")
    expect(env).not.toHaveProperty("OPENAI_API_KEY")
    expect(env).not.toHaveProperty("SKIPPED")
  })

  it("prepends the venv bin dir to PATH once", () => {
    const env = runnerEnv({ PATH: "/usr/bin:/p/.venv/bin:/bin" }, { binDir: "/p/.venv/bin", platform: "linux" })
    expect(env["PATH"]).toBe("/p/.venv/bin:/usr/bin:/bin")
  })

  it("creates PATH from the venv bin dir when the host has none", () => {
    expect(runnerEnv({}, { binDir: "/v/bin", platform: "linux" })["PATH"]).toBe("/v/bin")
    expect(prependToPath({ PATH: "" }, "/v/bin", "darwin")["PATH"]).toBe("/v/bin")
  })

  it("uses the Windows PATH key and delimiter on win32", () => {
    expect(pathEnvKey({ Path: "C:\\Windows" }, "win32")).toBe("Path")
    expect(pathEnvKey({}, "win32")).toBe("Path")
    expect(pathEnvKey({ Path: "x" }, "linux")).toBe("PATH")
    const env = prependToPath({ Path: "C:\\Windows;C:\\bin" }, "C:\\p\\.venv\\Scripts", "win32")
    expect(env).toEqual({ Path: "C:\\p\\.venv\\Scripts;C:\\Windows;C:\\bin" })
  })

  it.prop("no denied name ever survives", { host: envArb, extra: envArb }, ({ host, extra }) => {
    const env = runnerEnv(host, { extra, binDir: "/v/bin", artifactsDir: "/a" })
    for (const name of Object.keys(env)) {
      expect(looksSecret(name), name).toBe(false)
    }
  }, { arbitrary: { runs: 300 } })

  it.prop("every secret-looking name is denied", { name: secretName }, ({ name }) => {
    expect(isSecretEnvName(name)).toBe(true)
  }, { arbitrary: { runs: 300 } })

  it.prop("only host names, extras and fixed names appear, with their values", { host: envArb }, ({ host }) => {
    const env = runnerEnv(host, { platform: "linux", fixed: FIXED })
    for (const [name, value] of Object.entries(env)) {
      if (name in FIXED) expect(value).toBe(FIXED[name])
      else {
        expect(host[name]).toBe(value)
        expect(isAllowedEnvName(name)).toBe(true)
      }
    }
  })
})

describe("EnvPolicy: credential-shaped names and values", () => {
  const alnum = (min: number, max: number) => matching(new RegExp(`^[A-Za-z0-9]{${min},${max}}$`))
  const upper = (n: number) => matching(new RegExp(`^[A-Z0-9]{${n}}$`))
  const credential = oneOf(
    Arbitrary.map(alnum(20, 60), (rest) => `sk-${rest}`),
    Arbitrary.map(alnum(20, 60), (rest) => `sk-proj-${rest}`),
    Arbitrary.map(Arbitrary.all([oneOfValues(["ghp", "gho", "ghu", "ghs", "ghr"]), alnum(36, 36)]), ([kind, rest]) => `${kind}_${rest}`),
    Arbitrary.map(alnum(22, 82), (rest) => `github_pat_${rest}`),
    Arbitrary.map(Arbitrary.all([oneOfValues(["b", "p", "a", "o", "r", "s"]), alnum(10, 40)]), ([kind, rest]) => `xox${kind}-${rest}`),
    Arbitrary.map(Arbitrary.all([oneOfValues(["AKIA", "ASIA"]), upper(16)]), ([head, rest]) => head + rest),
    Arbitrary.map(Arbitrary.all([oneOfValues(["RSA ", "EC ", "OPENSSH ", ""]), alnum(20, 80)]), ([kind, body]) =>
      `-----BEGIN ${kind}PRIVATE KEY-----\n${body}\n-----END ${kind}PRIVATE KEY-----`),
    Arbitrary.map(Arbitrary.all([alnum(10, 40), alnum(10, 80), alnum(10, 40)]), ([a, b, c]) => `eyJ${a}.eyJ${b}.${c}`),
    Arbitrary.map(Arbitrary.all([oneOfValues(["Bearer", "bearer", "Basic", "Token"]), alnum(8, 60)]), ([scheme, token]) => `${scheme} ${token}`)
  )
  const surroundings = oneOfValues([["", ""], ["Authorization: ", ""], ["key=", ";other=1"], ["'", "'"], ["x ", "\n"]] as const)
  const allowedName = oneOf(
    oneOfValues([...ALLOWED_ENV_NAMES]),
    Arbitrary.map(Arbitrary.all([oneOfValues(["LC_", "XDG_", "VEYYON_", "PIP_"]), matching(/^[A-Z][A-Z0-9]{0,10}$/)]), ([p, w]) => p + w)
  )

  it.prop("a credential-shaped value never reaches the runner, whatever name or prefix it hides under", {
    name: allowedName,
    secret: credential,
    around: surroundings
  }, ({ name, secret, around }) => {
    const value = around[0] + secret + around[1]
    expect(filterHostEnv({ [name]: value })).toEqual({})
    expect(runnerEnv({}, { extra: { [name]: value } })[name]).toBeUndefined()
  })

  it.prop("names ending in _KEY, _PAT, _PASSWORD, _CREDENTIALS or _AUTH are secrets even under an allowed prefix", {
    prefix: Schema.Literals(["", "LC_", "XDG_", "VEYYON_", "PIP_", "MY_"]),
    middle: matching(/^[A-Za-z0-9]{1,10}$/),
    suffix: Schema.Literals(["_KEY", "_PAT", "_PASSWORD", "_CREDENTIALS", "_AUTH", "_KEYS", "_key", "_Auth"])
  }, ({ prefix, middle, suffix }) => {
    const name = prefix + middle + suffix
    expect(isSecretEnvName(name)).toBe(true)
    expect(filterHostEnv({ [name]: "harmless" })).toEqual({})
  })

  it("drops the examples of the issue and keeps ordinary values", () => {
    const host = {
      VEYYON_OPENAI_KEY: "x",
      VEYYON_GH_PAT: "x",
      XDG_AUTH: "Bearer abcdefghijklmnop",
      XDG_RUNTIME_DIR: "/run/user/1000",
      LC_ALL: "C.UTF-8",
      VEYYON_PY: "1",
      PATH: "/home/desk-tools/bin:/opt/sk-learn/bin:/usr/bin",
      PIP_INDEX_URL: "https://pypi.org/simple",
      HOME: "/home/ada"
    }
    expect(filterHostEnv(host)).toEqual({
      XDG_RUNTIME_DIR: "/run/user/1000",
      LC_ALL: "C.UTF-8",
      VEYYON_PY: "1",
      PATH: "/home/desk-tools/bin:/opt/sk-learn/bin:/usr/bin",
      PIP_INDEX_URL: "https://pypi.org/simple",
      HOME: "/home/ada"
    })
    expect(isSecretEnvValue("sk-" + "a".repeat(40))).toBe(true)
    expect(isSecretEnvValue("task-" + "a".repeat(40))).toBe(false)
    expect(isSecretEnvValue("AKIAIOSFODNN7EXAMPLE")).toBe(true)
  })

  it.prop("ordinary values (paths, locales, numbers, words) pass", {
    value: oneOf(
      matching(/^(\/[a-z0-9._-]{1,12}){1,6}$/),
      oneOfValues(["C.UTF-8", "en_US.UTF-8", "xterm-256color", "Haswell", "1", "0", "true", "Agg"]),
      Arbitrary.map(Arbitrary.schema(Schema.Int), String)
    )
  }, ({ value }) => {
    expect(isSecretEnvValue(value)).toBe(false)
    expect(filterHostEnv({ LANG: value })).toEqual({ LANG: value })
  })
})
