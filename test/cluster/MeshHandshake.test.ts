import { Effect, Exit } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { clientHandshake, CLIENT_HELLO_BYTES, serverHandshake, SERVER_HELLO_BYTES } from "../../src/cluster/MeshHandshake.ts"
import { EFFECT_VERSION, LOCAL_VERSIONS, type PeerVersions, VERSIONS_BYTES } from "../../src/cluster/ProtocolVersion.ts"

const secret = "a".repeat(64)

/** A connected loopback pair: the accepted (runner) side and the connecting side. */
const pair = async () => {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const accepted = new Promise<net.Socket>((resolve) => server.once("connection", resolve))
  const client = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1")
  const runner = await accepted
  server.close()
  return { runner, client }
}

const both = async (runnerSecret: string, clientSecret: string, versions: { readonly runner?: PeerVersions; readonly client?: PeerVersions } = {}) => {
  const { runner, client } = await pair()
  try {
    // The runner's socket server closes a connection whose handshake failed; so does this one.
    const [r, c] = await Promise.all([
      Effect.runPromiseExit(serverHandshake(runner, runnerSecret, 3000, versions.runner)).then((exit) => {
        if (Exit.isFailure(exit)) runner.destroy()
        return exit
      }),
      Effect.runPromiseExit(clientHandshake(client, clientSecret, 3000, versions.client)).then((exit) => {
        if (Exit.isFailure(exit)) client.destroy()
        return exit
      })
    ])
    return { r, c }
  } finally {
    runner.destroy()
    client.destroy()
  }
}

describe("the mesh handshake", () => {
  it("succeeds when both sides hold the secret, and the bytes after it reach the protocol in order", async () => {
    const { runner, client } = await pair()
    try {
      const [r, c] = await Promise.all([
        Effect.runPromiseExit(serverHandshake(runner, secret, 3000)),
        Effect.runPromiseExit(clientHandshake(client, secret, 3000))
      ])
      expect(Exit.isSuccess(r) && Exit.isSuccess(c)).toBe(true)
      const got: Array<Buffer> = []
      runner.on("data", (chunk: Buffer) => got.push(chunk))
      runner.resume()
      client.write("after")
      await new Promise((resolve) => setTimeout(resolve, 200))
      expect(Buffer.concat(got).toString()).toBe("after")
    } finally {
      runner.destroy()
      client.destroy()
    }
  })

  it("fails on both sides with a wrong secret: the runner names the missing proof and sends no proof of its own", async () => {
    const { r, c } = await both(secret, "b".repeat(64))
    expect(Exit.isFailure(r) && String(r.cause)).toMatch(/did not prove the cluster secret/)
    expect(Exit.isFailure(c) && String(c.cause)).toMatch(/refused this process's cluster secret/)
  })

  it("refuses a peer that speaks another protocol, and one that sends nothing, within its bound", async () => {
    const { runner, client } = await pair()
    try {
      client.write(Buffer.alloc(200, 0x41))
      const exit = await Effect.runPromiseExit(serverHandshake(runner, secret, 3000))
      expect(Exit.isFailure(exit)).toBe(true)
    } finally {
      runner.destroy()
      client.destroy()
    }
    const silent = await pair()
    try {
      const exit = await Effect.runPromiseExit(serverHandshake(silent.runner, secret, 300))
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/within 300 ms/)
    } finally {
      silent.runner.destroy()
      silent.client.destroy()
    }
  })

  it("sends hellos of the fixed sizes: the runner's 76 bytes, the peer's 108", () => {
    expect(SERVER_HELLO_BYTES).toBe(8 + 32 + VERSIONS_BYTES)
    expect(CLIENT_HELLO_BYTES).toBe(8 + 32 + VERSIONS_BYTES + 32)
    expect(VERSIONS_BYTES).toBe(36)
  })
})

describe("the mesh handshake between releases", () => {
  const sameEffect = (protocol: number, oldest: number): PeerVersions => ({ protocol, oldest, effect: EFFECT_VERSION })

  it("tells each side the other's versions when they are compatible, a newer peer that still talks protocol 2 included", async () => {
    const newer = sameEffect(3, 2)
    const { r, c } = await both(secret, secret, { client: newer })
    expect(r).toEqual(Exit.succeed(newer))
    expect(c).toEqual(Exit.succeed(LOCAL_VERSIONS))
    const other = await both(secret, secret, { runner: newer })
    expect(other.r).toEqual(Exit.succeed(LOCAL_VERSIONS))
    expect(other.c).toEqual(Exit.succeed(newer))
  })

  it("refuses a runner of a future protocol on both sides with a sentence naming both versions, and no proof goes out", async () => {
    const future = sameEffect(3, 3)
    const { r, c } = await both(secret, secret, { runner: future })
    expect(Exit.isFailure(c) && String(c.cause)).toMatch(/this process speaks cluster protocol 2 .* the runner speaks cluster protocol 3 .*this release is too old for the runner/)
    expect(Exit.isFailure(r) && String(r.cause)).toMatch(/this process speaks cluster protocol 3 .* the peer speaks cluster protocol 2 .*the peer is too old/)
  })

  it("refuses a peer of a future protocol the same way", async () => {
    const { r, c } = await both(secret, secret, { client: sameEffect(7, 5) })
    expect(Exit.isFailure(r) && String(r.cause)).toMatch(/this process speaks cluster protocol 2 .* the peer speaks cluster protocol 7 \(talks with 5 and newer\)/)
    expect(Exit.isFailure(c) && String(c.cause)).toMatch(/this process speaks cluster protocol 7 .* the runner speaks cluster protocol 2/)
  })

  it("refuses a peer on another effect version, naming both", async () => {
    const { r, c } = await both(secret, secret, { client: { ...LOCAL_VERSIONS, effect: "4.0.0-other" } })
    expect(Exit.isFailure(r) && String(r.cause)).toMatch(new RegExp(`on effect ${EFFECT_VERSION.replace(/[.]/g, "[.]")}.*on effect 4[.]0[.]0-other.*same effect version`))
    expect(Exit.isFailure(c) && String(c.cause)).toMatch(/same effect version/)
  })

  it("names protocol 1 to a runner of the release before stated versions (VYMESH1), without answering it", async () => {
    const { runner, client } = await pair()
    try {
      const received: Array<Buffer> = []
      runner.on("data", (chunk: Buffer) => received.push(chunk))
      runner.write(Buffer.concat([Buffer.from("VYMESH1\n", "latin1"), Buffer.alloc(32, 7)]))
      const exit = await Effect.runPromiseExit(clientHandshake(client, secret, 3000))
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(
        /this process speaks cluster protocol 2 .* the runner speaks cluster protocol 1 \(a release from before protocol versions were stated\): the runner is too old for this release; upgrade it/
      )
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(Buffer.concat(received).length).toBe(0)
    } finally {
      runner.destroy()
      client.destroy()
    }
  })

  it("names protocol 1 to a peer that answers with the old hello, and sends it no proof", async () => {
    const { runner, client } = await pair()
    try {
      const received: Array<Buffer> = []
      client.on("data", (chunk: Buffer) => {
        received.push(chunk)
        if (received.length === 1) client.write(Buffer.concat([Buffer.from("VYMESH1\n", "latin1"), Buffer.alloc(64, 1)]))
      })
      const exit = await Effect.runPromiseExit(serverHandshake(runner, secret, 3000))
      expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/the peer speaks cluster protocol 1 \(a release from before protocol versions were stated\)/)
      expect(Buffer.concat(received).length).toBe(SERVER_HELLO_BYTES)
    } finally {
      runner.destroy()
      client.destroy()
    }
  })

  it("refuses a peer whose versions were changed on the way: the proofs cover both statements", async () => {
    const { runner, client } = await pair()
    const relay = net.createServer()
    try {
      // A relay that rewrites the peer's stated protocol (at byte 8 + 32) on its way to the runner.
      await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve))
      const accepted = new Promise<net.Socket>((resolve) => relay.once("connection", resolve))
      const peer = net.connect((relay.address() as net.AddressInfo).port, "127.0.0.1")
      const front = await accepted
      client.on("data", (chunk: Buffer) => front.write(chunk))
      let first = true
      front.on("data", (chunk: Buffer) => {
        const copy = Buffer.from(chunk)
        if (first && copy.length >= 42) copy.writeUInt16BE(3, 40)
        first = false
        client.write(copy)
      })
      const [r, c] = await Promise.all([
        Effect.runPromiseExit(serverHandshake(runner, secret, 3000)).then((exit) => {
          runner.destroy()
          return exit
        }),
        Effect.runPromiseExit(clientHandshake(peer, secret, 3000))
      ])
      expect(Exit.isFailure(r) && String(r.cause)).toMatch(/did not prove the cluster secret/)
      expect(Exit.isFailure(c)).toBe(true)
      peer.destroy()
      front.destroy()
    } finally {
      relay.close()
      runner.destroy()
      client.destroy()
    }
  })
})
