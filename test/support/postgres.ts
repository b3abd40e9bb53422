/**
 * A private PostgreSQL server for one test file: `initdb` into a fresh private directory,
 * `postgres` listening on a random loopback port with password authentication (a random
 * password, so no other local user can use it), and everything stopped and removed by
 * `stop`. As root the server runs as the `postgres` system user (PostgreSQL refuses to run
 * as root); the directory is then that user's, mode 0700, and removed by us afterwards.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as NodeFs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

/** A running server and how to reach and end it. */
export interface TestPostgres {
  /** `postgres://` URL of a database the tests own (superuser, password included). */
  readonly url: string
  readonly port: number
  /** The server's private directory (data, socket, password file). */
  readonly dir: string
  /** Stops the server (fast shutdown, then SIGKILL) and removes its directory. */
  readonly stop: () => Promise<void>
  /** Stops the server (fast shutdown: every connection is closed) and keeps its data; `up` starts it again. */
  readonly down: () => Promise<void>
  /** Starts the stopped server again on the same data directory and port; resolves once it answers a query. */
  readonly up: () => Promise<void>
}

const binDirs = (): ReadonlyArray<string> => {
  const root = "/usr/lib/postgresql"
  let versions: Array<string>
  try {
    versions = NodeFs.readdirSync(root)
  } catch {
    return []
  }
  return versions
    .filter((version) => /^\d+$/.test(version))
    .sort((a, b) => Number(b) - Number(a))
    .map((version) => path.join(root, version, "bin"))
}

const findBinDir = (): string | undefined =>
  binDirs().find((dir) => ["initdb", "postgres", "psql"].every((name) => NodeFs.existsSync(path.join(dir, name))))

const serverUser = (): { readonly uid: number; readonly gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined
  const id = (flag: string) => spawnSync("id", [flag, "postgres"], { encoding: "utf8" })
  const uid = id("-u")
  const gid = id("-g")
  if (uid.status !== 0 || gid.status !== 0) return undefined
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) }
}

/** Why a test PostgreSQL cannot be started here, or undefined when it can. */
export const postgresSkipReason = (): string | undefined => {
  if (process.platform !== "linux") return "the test PostgreSQL is set up for Linux only"
  if (findBinDir() === undefined) return "PostgreSQL is not installed (apt-get install postgresql; CI installs it)"
  if (process.getuid?.() === 0 && serverUser() === undefined) return "running as root, but there is no postgres system user to run the server as"
  return undefined
}

/** A loopback port nothing listens on right now, for the caller to bind soon after. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))))
    })
  })

const exited = (child: ChildProcess): Promise<void> =>
  child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once("exit", () => resolve()))

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Whether the server answers a query. A TCP connect is not enough: the server listens while
 * it is still starting up and answers every connection 57P03 ("the database system is
 * starting up") until then.
 */
export const answersQuery = (port: number, password: string): Promise<boolean> =>
  new Promise((resolve) => {
    const bin = findBinDir()
    if (bin === undefined) return resolve(false)
    const psql = spawn(path.join(bin, "psql"), [
      "-X", "-A", "-t", "-h", "127.0.0.1", "-p", String(port), "-U", "veyyon", "-d", "postgres", "-c", "select 1"
    ], { env: { ...process.env, PGPASSWORD: password, PGCONNECT_TIMEOUT: "10" }, stdio: ["ignore", "pipe", "ignore"] })
    let out = ""
    psql.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
    psql.once("error", () => resolve(false))
    psql.once("close", (code) => resolve(code === 0 && out.trim() === "1"))
  })

const ready = async (port: number, password: string, server: ChildProcess, log: () => string): Promise<void> => {
  const deadline = Date.now() + 120_000
  while (Date.now() < deadline) {
    if (server.exitCode !== null || server.signalCode !== null) throw new Error(`the test PostgreSQL exited before it was ready:\n${log()}`)
    if (await answersQuery(port, password)) return
    await sleep(100)
  }
  throw new Error(`the test PostgreSQL did not answer a query within 120 s:\n${log()}`)
}

/** Starts a fresh server; call `stop` when done (also on failure). */
export const startPostgres = async (): Promise<TestPostgres> => {
  const bin = findBinDir()
  if (bin === undefined) throw new Error(postgresSkipReason())
  const owner = serverUser()
  const asOwner = owner === undefined ? {} : { uid: owner.uid, gid: owner.gid }
  const root = NodeFs.mkdtempSync(path.join(os.tmpdir(), "veyyon-pg-"))
  NodeFs.chmodSync(root, 0o700)
  if (owner !== undefined) NodeFs.chownSync(root, owner.uid, owner.gid)
  const data = path.join(root, "data")
  const password = randomBytes(18).toString("hex")
  const passwordFile = path.join(root, "password")
  NodeFs.writeFileSync(passwordFile, password, { mode: 0o600, flag: "wx" })
  if (owner !== undefined) NodeFs.chownSync(passwordFile, owner.uid, owner.gid)
  const remove = () => NodeFs.rmSync(root, { recursive: true, force: true })
  const init = spawnSync(path.join(bin, "initdb"), [
    "-D", data, "-U", "veyyon", "--auth=scram-sha-256", `--pwfile=${passwordFile}`, "--no-sync", "-E", "UTF8", "--locale=C"
  ], { ...asOwner, cwd: root, encoding: "utf8" })
  if (init.status !== 0) {
    remove()
    throw new Error(`initdb failed (${init.status ?? init.signal}): ${init.stderr}`)
  }
  /** Starts the server on `port`; resolves with it once it answers a query. */
  const launch = async (port: number) => {
    let log = ""
    const server = spawn(path.join(bin, "postgres"), [
      "-D", data, "-p", String(port), "-k", root, "-c", "listen_addresses=127.0.0.1",
      "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200"
    ], { ...asOwner, cwd: root, stdio: ["ignore", "pipe", "pipe"] })
    const keep = (chunk: Buffer) => (log = (log + chunk.toString("utf8")).slice(-8000))
    server.stdout?.on("data", keep)
    server.stderr?.on("data", keep)
    const kill = () => server.kill("SIGKILL")
    process.once("exit", kill)
    const halt = async () => {
      if (server.exitCode === null && server.signalCode === null) {
        server.kill("SIGINT")
        let timer: NodeJS.Timeout | undefined
        const done = await Promise.race([exited(server).then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), 30_000)))])
        clearTimeout(timer)
        if (!done) {
          server.kill("SIGKILL")
          await exited(server)
        }
      }
      process.removeListener("exit", kill)
    }
    try {
      await ready(port, password, server, () => log)
    } catch (error) {
      server.kill("SIGKILL")
      await exited(server)
      process.removeListener("exit", kill)
      throw Object.assign(error as Error, { log })
    }
    return { halt }
  }
  let lastPort = 0
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort()
    lastPort = port
    let running: { readonly halt: () => Promise<void> } | undefined
    try {
      running = await launch(port)
    } catch (error) {
      if (/could not bind|already in use/i.test((error as { log?: string }).log ?? "")) continue
      remove()
      throw error
    }
    const down = async () => {
      await running?.halt()
      running = undefined
    }
    const up = async () => {
      if (running === undefined) running = await launch(port)
    }
    const stop = async () => {
      await down()
      remove()
    }
    return { url: `postgres://veyyon:${password}@127.0.0.1:${port}/postgres`, port, dir: root, stop, down, up }
  }
  remove()
  throw new Error(`the test PostgreSQL could not bind a loopback port (last tried ${lastPort})`)
}
