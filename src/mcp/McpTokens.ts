/**
 * The HTTP door's bearer tokens: `VEYYON_MCP_TOKEN` (one token) or `VEYYON_MCP_TOKENS_FILE`
 * (one token per line, each at least 32 characters, in a regular file owned by the
 * running user with mode 0600 or stricter; blank lines and `#` comments skipped), never
 * both. Each token is one client identity: a session answers only the token that
 * started it.
 */
import { Result } from "effect"
import { readSecretFile } from "../services/storage/SecretFile.ts"

/** The variable holding the door's one bearer token. */
export const MCP_TOKEN_ENV = "VEYYON_MCP_TOKEN"

/** The variable naming a file of bearer tokens, one per line. */
export const MCP_TOKENS_FILE_ENV = "VEYYON_MCP_TOKENS_FILE"

/** The shortest token a tokens file may hold, in characters. */
export const MIN_FILE_TOKEN_CHARS = 32

/** The largest tokens file read, in bytes. */
export const MAX_TOKENS_FILE_BYTES = 64 * 1024

/** The tokens of a tokens file's text, or a sentence naming the first bad line. */
export const parseTokens = (text: string, source: string): Result.Result<ReadonlyArray<string>, string> => {
  const tokens: Array<string> = []
  const lines = text.split(/\r?\n/)
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index]!.trim()
    if (line === "" || line.startsWith("#")) continue
    if (/\s/.test(line)) return Result.fail(`${source}, line ${index + 1}: a token holds no spaces; put one token on each line`)
    if (line.length < MIN_FILE_TOKEN_CHARS) {
      return Result.fail(`${source}, line ${index + 1}: the token is ${line.length} characters long; each must have at least ${MIN_FILE_TOKEN_CHARS} (make one with: openssl rand -hex 32)`)
    }
    if (!tokens.includes(line)) tokens.push(line)
  }
  return tokens.length === 0 ? Result.fail(`${source} holds no token; put one token on each line`) : Result.succeed(tokens)
}

/** The tokens the door admits from the two variables' values: undefined when neither is set (the door makes one). */
export const resolveTokens = (token: string | undefined, tokensFile: string | undefined): Result.Result<ReadonlyArray<string> | undefined, string> => {
  if (tokensFile === undefined) return Result.succeed(token === undefined ? undefined : [token])
  if (token !== undefined) return Result.fail(`set either ${MCP_TOKEN_ENV} or ${MCP_TOKENS_FILE_ENV}, not both`)
  return Result.flatMap(readSecretFile(tokensFile, MCP_TOKENS_FILE_ENV, MAX_TOKENS_FILE_BYTES), (text) => parseTokens(text, `${MCP_TOKENS_FILE_ENV} (${tokensFile})`))
}
