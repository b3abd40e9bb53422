import { Effect, Exit } from "effect"
import * as net from "node:net"
import { describe, expect, it } from "vitest"
import { clientHandshake, serverHandshake } from "../../src/cluster/MeshHandshake.ts"

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

const both = async (runnerSecret: string, clientSecret: string) => {
  const { runner, client } = await pair()
  try {
    // The runner's socket server closes a connection whose handshake failed; so does this one.
    const [r, c] = await Promise.all([
      Effect.runPromiseExit(serverHandshake(runner, runnerSecret, 3000)).then((exit) => {
        if (Exit.isFailure(exit)) runner.destroy()
        return exit
      }),
      Effect.runPromiseExit(clientHandshake(client, clientSecret, 3000))
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
})
