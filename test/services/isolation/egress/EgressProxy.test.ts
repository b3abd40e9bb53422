/**
 * The egress proxy against real local origins on a non-loopback address (a veth pair the test
 * creates and removes), through CONNECT (TLS inside) and plain HTTP, and against
 * clients that misbehave. Names resolve through a test resolver only: a destination reached
 * by name proves the connection used the checked, pinned address (the system resolver knows
 * none of these names).
 */
import * as NodeFs from "node:fs"
import * as NodeHttp from "node:http"
import type * as NodeNet from "node:net"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Result, Scope } from "effect"
import { parseAllowHosts } from "../../../../src/services/isolation/egress/AllowHosts.ts"
import type { EgressEvent } from "../../../../src/services/isolation/egress/EgressEvent.ts"
import type { EgressLimits } from "../../../../src/services/isolation/egress/EgressLimits.ts"
import { type EgressProxy, makeEgressProxy } from "../../../../src/services/isolation/egress/EgressProxy.ts"
import { EgressResolver } from "../../../../src/services/isolation/egress/EgressResolver.ts"
import { connectViaProxy, httpsViaTunnel, httpViaProxy, rawConnection, readAll, refusedConnect } from "../../../support/egressClients.ts"
import { ORIGIN_NAME, type OriginCert, type OriginNetwork, type Origins, startOriginNetwork, type TestLink, testLinkUnavailable } from "../../../support/egressNet.ts"
import { titled } from "../../../support/skip.ts"

const unavailable = testLinkUnavailable()

let network: OriginNetwork | undefined
let net: TestLink
let cert: OriginCert
let origins: Origins
let loopback: NodeHttp.Server
let loopbackSeen = 0
let loopbackPort = 0
const stateDir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "egress-state-"))

beforeAll(async () => {
  if (unavailable !== undefined) return
  network = await startOriginNetwork()
  ;({ link: net, cert, origins } = network)
  loopback = NodeHttp.createServer((_req, res) => {
    loopbackSeen++
    res.end("loopback")
  })
  await new Promise<void>((resolve) => loopback.listen(0, "127.0.0.1", resolve))
  loopbackPort = (loopback.address() as NodeNet.AddressInfo).port
})

afterAll(async () => {
  if (unavailable === undefined) {
    if (loopback !== undefined) await new Promise<void>((resolve) => loopback.close(() => resolve()))
    await network?.close()
  }
  NodeFs.rmSync(stateDir, { recursive: true, force: true })
})

const ALLOW = ["origin.test", "*.origin.test", "loop.test", "meta.test", "mixed.test", "gone.test"]

/** A proxy over the allowlist, with the names mapped, reporting into `events`; closed with the returned scope. */
const startProxy = (events: Array<EgressEvent>, limits: Partial<EgressLimits> = {}, allow = ALLOW) =>
  Effect.gen(function*() {
    const parsed = parseAllowHosts(allow)
    if (Result.isFailure(parsed)) return yield* Effect.die(parsed.failure)
    const scope = yield* Scope.make()
    const names = {
      "origin.test": [net.address],
      "www.origin.test": [net.address],
      "loop.test": ["127.0.0.1"],
      "meta.test": ["169.254.169.254"],
      "mixed.test": [net.address, "::ffff:127.0.0.1"]
    }
    const proxy = yield* makeEgressProxy({ allow: parsed.success, directory: stateDir, limits, onEvent: (event) => events.push(event) }).pipe(
      Effect.provide(EgressResolver.layerTest(names)),
      Scope.provide(scope)
    )
    return { proxy, close: Scope.close(scope, Exit.void) }
  })

const withProxy = <A>(
  limits: Partial<EgressLimits>,
  body: (proxy: EgressProxy, events: Array<EgressEvent>) => Promise<A>
): Effect.Effect<A> =>
  Effect.gen(function*() {
    const events: Array<EgressEvent> = []
    const { proxy, close } = yield* Effect.orDie(startProxy(events, limits))
    return yield* Effect.promise(() => body(proxy, events)).pipe(Effect.ensuring(close))
  })

describe.skipIf(unavailable !== undefined)(titled("egress proxy", unavailable), () => {
  it.effect("forwards a plain HTTP request in absolute form to a listed host, dropping hop-by-hop headers", () =>
    withProxy({}, async (proxy, events) => {
      const reply = await httpViaProxy(proxy.socketPath, `http://origin.test:${origins.httpPort}/hello?x=1`)
      expect(reply.status).toBe(200)
      expect(reply.body).toBe(`http GET /hello?x=1 host=origin.test:${origins.httpPort}`)
      expect(reply.headers["x-hop"]).toBeUndefined()
      const posted = await httpViaProxy(proxy.socketPath, `http://www.origin.test:${origins.httpPort}/form`, { method: "POST", body: "a=1" })
      expect(posted.body).toBe(`http POST /form host=www.origin.test:${origins.httpPort} body=a=1`)
      expect(events).toEqual([
        { _tag: "Allowed", via: "http", host: "origin.test", port: origins.httpPort, addresses: [net.address] },
        { _tag: "Allowed", via: "http", host: "www.origin.test", port: origins.httpPort, addresses: [net.address] }
      ])
    }))

  it.effect("tunnels TLS through CONNECT to a listed host, the certificate checked end to end", () =>
    withProxy({}, async (proxy, events) => {
      const text = await httpsViaTunnel(proxy.socketPath, ORIGIN_NAME, origins.httpsPort, cert.cert, "/secure")
      expect(text).toMatch(/^HTTP\/1\.1 200/)
      expect(text).toContain(`https GET /secure host=origin.test:${origins.httpsPort}`)
      expect(events).toEqual([{ _tag: "Allowed", via: "connect", host: "origin.test", port: origins.httpsPort, addresses: [net.address] }])
    }))

  it.effect("refuses hosts not listed, IP literals and names resolving to loopback or link-local, with a readable 403", () =>
    withProxy({}, async (proxy, events) => {
      const before = origins.seen.length
      const notListed = await refusedConnect(proxy.socketPath, `evil.test:443`)
      expect(notListed.status).toBe(403)
      expect(notListed.text).toContain("X-Veyyon-Egress: refused:not-listed")
      expect(notListed.text).toContain("evil.test is not in sandbox.allowHosts (VEYYON_SANDBOX_ALLOW_HOSTS)")
      expect(notListed.text).toContain("To allow it, add evil.test to sandbox.allowHosts")
      const literal = await refusedConnect(proxy.socketPath, `${net.address}:${origins.httpsPort}`)
      expect(literal.status).toBe(403)
      expect(literal.text).toContain("is an IP address")
      const plainLiteral = await httpViaProxy(proxy.socketPath, `http://${net.address}:${origins.httpPort}/`)
      expect(plainLiteral.status).toBe(403)
      const loop = await httpViaProxy(proxy.socketPath, `http://loop.test:${loopbackPort}/`)
      expect(loop.status).toBe(403)
      expect(loop.body).toContain("loop.test resolves to 127.0.0.1, a loopback address")
      const loopTunnel = await refusedConnect(proxy.socketPath, `loop.test:${loopbackPort}`)
      expect(loopTunnel.status).toBe(403)
      const meta = await httpViaProxy(proxy.socketPath, "http://meta.test/latest/meta-data/")
      expect(meta.body).toContain("meta.test resolves to 169.254.169.254, a link-local address")
      const mixed = await refusedConnect(proxy.socketPath, `mixed.test:${origins.httpsPort}`)
      expect(mixed.text).toContain("a loopback address")
      expect(loopbackSeen).toBe(0)
      expect(origins.seen.length).toBe(before)
      expect(events.map((event) => event._tag === "Refused" ? event.reason : event._tag)).toEqual([
        "not-listed",
        "ip-literal",
        "ip-literal",
        "forbidden-address",
        "forbidden-address",
        "forbidden-address",
        "forbidden-address"
      ])
    }))

  it.effect("answers 502 naming the host when a listed name does not resolve", () =>
    withProxy({}, async (proxy, events) => {
      const reply = await httpViaProxy(proxy.socketPath, "http://gone.test/")
      expect(reply.status).toBe(502)
      expect(reply.body).toContain("gone.test could not be resolved")
      expect(events).toMatchObject([{ _tag: "Failed", host: "gone.test" }])
    }))

  it.effect("refuses a connection past the limit with a 503 and keeps serving the others", () =>
    withProxy({ maxConnections: 2 }, async (proxy, events) => {
      const held = [await rawConnection(proxy.socketPath), await rawConnection(proxy.socketPath)]
      const third = await rawConnection(proxy.socketPath)
      const text = await readAll(third)
      expect(text).toMatch(/^HTTP\/1\.1 503/)
      expect(text).toContain("limit of 2 connections")
      held[0]!.destroy()
      await new Promise((resolve) => setTimeout(resolve, 200))
      const reply = await httpViaProxy(proxy.socketPath, `http://origin.test:${origins.httpPort}/after`)
      expect(reply.status).toBe(200)
      held[1]!.destroy()
      expect(events[0]).toMatchObject({ _tag: "Refused", reason: "connection-limit" })
    }))

  it.effect("cuts a download at the session's byte budget and refuses what follows", () =>
    withProxy({ maxBytes: 200_000 }, async (proxy, events) => {
      const cut = await httpViaProxy(proxy.socketPath, `http://origin.test:${origins.httpPort}/big?n=5000000`).then(
        (reply) => reply.body.length,
        () => -1
      )
      expect(cut).toBeLessThan(5_000_000)
      const after = await httpViaProxy(proxy.socketPath, `http://origin.test:${origins.httpPort}/small`)
      expect(after.status).toBe(403)
      expect(after.body).toContain("limit of 200000 bytes")
      expect(events.at(-1)).toMatchObject({ _tag: "Refused", reason: "byte-limit" })
      expect(proxy.usage().bytes).toBeGreaterThan(200_000)
    }))

  it.effect("answers an oversized request head with 431, garbage with 400, and keeps serving", () =>
    withProxy({ maxHeaderBytes: 1024 }, async (proxy) => {
      const big = await rawConnection(proxy.socketPath)
      big.write(`GET http://origin.test:${origins.httpPort}/ HTTP/1.1\r\nHost: origin.test\r\nX-Big: ${"a".repeat(4096)}\r\n\r\n`)
      expect(await readAll(big)).toMatch(/^HTTP\/1\.1 431/)
      const garbage = await rawConnection(proxy.socketPath)
      garbage.write("\u0000\u0001\u0002 not http at all\r\n\r\n")
      expect(await readAll(garbage)).toMatch(/^HTTP\/1\.1 400/)
      const originForm = await httpViaProxy(proxy.socketPath, "/relative")
      expect(originForm.status).toBe(400)
      expect(originForm.body).toContain("send absolute-form requests")
      const badTarget = await refusedConnect(proxy.socketPath, "no-port-here")
      expect(badTarget.status).toBe(400)
      const reset = await rawConnection(proxy.socketPath)
      reset.write("GET http://origin.test/ HTTP/1.1\r\nHo")
      reset.destroy()
      const reply = await httpViaProxy(proxy.socketPath, `http://origin.test:${origins.httpPort}/still`)
      expect(reply.body).toContain("/still")
    }))

  it.effect("closes a client that never finishes its request head, and an idle tunnel", () =>
    withProxy({ headersTimeoutMs: 500, idleTimeoutMs: 700 }, async (proxy) => {
      const slow = await rawConnection(proxy.socketPath)
      slow.write("GET http://origin.test/ HTTP/1.1\r\n")
      const started = Date.now()
      const text = await readAll(slow)
      expect(text === "" || /^HTTP\/1\.1 408/.test(text)).toBe(true)
      expect(Date.now() - started).toBeLessThan(30_000)
      const { socket, status } = await connectViaProxy(proxy.socketPath, `origin.test:${origins.httpsPort}`)
      expect(status).toBe(200)
      socket.resume()
      await readAll(socket)
      expect(Date.now() - started).toBeLessThan(60_000)
    }))

  it.effect("closing the scope ends open tunnels and removes the socket and its directory", () =>
    Effect.gen(function*() {
      const events: Array<EgressEvent> = []
      const { proxy, close } = yield* Effect.orDie(startProxy(events))
      const dir = NodePath.dirname(proxy.socketPath)
      expect(NodeFs.statSync(dir).mode & 0o777).toBe(0o700)
      const { socket, status } = yield* Effect.promise(() => connectViaProxy(proxy.socketPath, `origin.test:${origins.httpsPort}`))
      expect(status).toBe(200)
      socket.resume()
      const ended = readAll(socket)
      yield* close
      yield* Effect.promise(() => ended)
      expect(NodeFs.existsSync(proxy.socketPath)).toBe(false)
      expect(NodeFs.existsSync(dir)).toBe(false)
    }))

  it.effect("refuses to put its socket in a directory others can write", () =>
    Effect.gen(function*() {
      const open = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "egress-open-"))
      NodeFs.chmodSync(open, 0o777)
      const parsed = parseAllowHosts([])
      const exit = yield* Effect.exit(Effect.scoped(
        makeEgressProxy({ allow: Result.getOrThrow(parsed), directory: open }).pipe(Effect.provide(EgressResolver.layerTest({})))
      ))
      NodeFs.rmSync(open, { recursive: true, force: true })
      expect(Exit.isFailure(exit)).toBe(true)
      expect(String(Exit.isFailure(exit) ? exit.cause : "")).toMatch(/writable by group or others/)
    }))
})

