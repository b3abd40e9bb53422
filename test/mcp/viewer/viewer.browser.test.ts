/**
 * `veyyon mcp --http --viewer` in a real browser (Debian's chromium, headless, driven by
 * playwright-core), beside an agent on the official MCP SDK client: the printed one-time
 * link opens the session list (with the kernel's memory); a cell printing a line every 200 ms shows each line while
 * it runs; a matplotlib figure shows as an image; an HTML output holding a `<script>` and
 * an `onerror` handler runs neither (no marker on the page, no request in the log of the
 * server they call); the page's interrupt button stops a `time.sleep(60)` cell, the
 * agent's result says a person did it and the kernel keeps its variables; without the
 * cookie every page and event stream answers 401; the interrupt action is refused from
 * another origin, another localhost port included, and from a page served there.
 *
 * The run also takes the docs' screenshots (`docs/viewer.png`, `docs/viewer-sessions.png`, `docs/viewer-phone.png`)
 * when `VEYYON_DOCS_SCREENSHOTS=1`; otherwise they go to a temporary directory.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PERSON_INTERRUPTED_NOTICE } from "../../../src/mcp/CellObserver.ts"
import { repoRoot, tempDir } from "../../cli/support.ts"
import { findChromium } from "../../support/browser.ts"
import { findPythonWith, integrationEnabled } from "../../support/python.ts"
import { integrationOff, skipReason, titled } from "../../support/skip.ts"
import { type McpChild, startMcp } from "../support.ts"

/** The page's globals, in the functions run there (this package's types have no DOM). */
declare const document: any
declare const window: any

const TOKEN = "viewer-test-token-0123456789"
const chromiumPath = findChromium()
const python = integrationEnabled() ? findPythonWith(["matplotlib"]) : undefined
const skip = skipReason(integrationOff(), python === undefined && "no python3 imports matplotlib", chromiumPath === undefined && "no chromium on PATH (apt-get install chromium)")

interface ToolResult {
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>
  readonly isError?: boolean
}

const textOf = (result: ToolResult) => result.content.filter((block) => block.type === "text").map((block) => block.text).join("\n")

/** A server that records every request it gets: where hostile output would phone home. */
const startProbe = async () => {
  const seen: Array<string> = []
  const server = http.createServer((request, response) => {
    seen.push(`${request.method} ${request.url}`)
    response.writeHead(200, { "access-control-allow-origin": "*", "content-type": "text/plain" })
    response.end("probe")
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { seen, port: (server.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

describe.skipIf(skip !== undefined)(titled("viewer page in a real browser", skip), { timeout: 120_000 }, () => {
  let server: McpChild
  let origin: string
  let link: string
  let probe: Awaited<ReturnType<typeof startProbe>>
  let browser: Browser
  let context: BrowserContext
  let page: Page
  let agent: Client
  let sessionUrl: string
  const shots = process.env.VEYYON_DOCS_SCREENSHOTS === "1" ? path.join(repoRoot, "docs") : tempDir("veyyon-viewer-shots-")

  /** The agent's call; a test that fails before awaiting it leaves no unhandled rejection when the client closes. */
  const call = (code: string, timeout = 60) => {
    const pending = agent.callTool({ name: "eval", arguments: { language: "py", code, timeout } }, undefined, { timeout: 90_000 }) as Promise<ToolResult>
    pending.catch(() => {})
    return pending
  }

  /** The number of the newest cell on the page once it shows one more than `before`. */
  const nextCell = async (before: number) => {
    await page.waitForFunction((count) => document.querySelectorAll("#cells .cell").length > count, before, { timeout: 60_000 })
    return Number(await page.locator("#cells .cell").last().getAttribute("data-n"))
  }
  const cellCount = () => page.locator("#cells .cell").count()

  beforeAll(async () => {
    server = startMcp(["mcp", "--http", "--port", "0", "--viewer"], { VEYYON_MCP_TOKEN: TOKEN, VEYYON_PYTHON_INTERPRETER: python! })
    link = (await server.stderrMatch(/viewer page .*: (http:\S+\/viewer\/\?code=\S+)/))[1]!
    origin = new URL(link).origin
    probe = await startProbe()
    browser = await chromium.launch({ executablePath: chromiumPath!, headless: true })
    context = await browser.newContext({ viewport: { width: 1280, height: 860 }, deviceScaleFactor: 1 })
    page = await context.newPage()
    agent = new Client({ name: "data-analyst-agent", version: "1.0.0" })
    await agent.connect(new StreamableHTTPClientTransport(new URL(`${origin}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }), {
      timeout: 60_000
    })
  }, 120_000)

  afterAll(async () => {
    await agent?.close().catch(() => {})
    await browser?.close().catch(() => {})
    await probe?.close()
    await server?.kill()
  }, 60_000)

  it("the printed one-time link signs the browser in with an HttpOnly, SameSite=Strict cookie and shows the session list", async () => {
    await page.goto(link)
    await page.waitForURL(`${origin}/viewer/`)
    await expect.poll(() => page.locator("table.sessions").textContent(), { timeout: 30_000 }).toContain("data-analyst-agent")
    const cookies = await context.cookies(`${origin}/viewer/`)
    expect(cookies).toHaveLength(1)
    expect(cookies[0]).toMatchObject({ name: "veyyon_viewer", httpOnly: true, sameSite: "Strict", path: "/viewer" })
    expect(cookies[0]!.value).not.toContain(TOKEN)
    sessionUrl = new URL((await page.locator("table.sessions a").first().getAttribute("href"))!, origin).href
    await page.goto(sessionUrl)
    await expect.poll(() => page.locator("#live").textContent(), { timeout: 30_000 }).toBe("live")
  })

  it("shows each line of a cell printing every 200 ms while the cell runs", async () => {
    const before = await cellCount()
    const running = call(
      "import time\nfor i in range(10):\n    print(f'tick {i} {time.time():.3f}', flush=True)\n    time.sleep(0.2)\ntime.sleep(3)\nprint('done')"
    ).then((result) => ({ result, at: Date.now() }))
    const n = await nextCell(before)
    const seen: Array<{ readonly printed: number; readonly at: number }> = []
    for (let i = 0; i < 10; i++) {
      await page.waitForFunction(({ n, i }) => document.querySelector(`#cell-${n} .outputs`)?.textContent?.includes(`tick ${i} `) === true, { n, i }, {
        timeout: 30_000,
        polling: 20
      })
      const at = Date.now()
      const text = (await page.locator(`#cell-${n} .outputs`).textContent())!
      seen.push({ printed: Number(new RegExp(`tick ${i} ([\\d.]+)`).exec(text)![1]) * 1000, at })
    }
    const ended = await running
    expect(ended.result.isError).toBe(false)
    for (const line of seen) expect(line.at).toBeLessThan(ended.at)
    // Streamed, not delivered at the end: the first line was on the page before the last was printed.
    expect(seen[0]!.at).toBeLessThan(seen[9]!.printed + 3000)
    console.log(`viewer: print-to-page delays ${seen.map((line) => Math.round(line.at - line.printed)).join(", ")} ms`)
    await expect.poll(() => page.locator(`#cell-${n}`).getAttribute("data-state"), { timeout: 30_000 }).toBe("ok")
  })

  it("shows a matplotlib figure as an image", async () => {
    const before = await cellCount()
    const result = await call(
      [
        "import matplotlib",
        "matplotlib.use('agg')",
        "import matplotlib.pyplot as plt",
        "import math",
        "xs = [i / 20 for i in range(200)]",
        "fig, ax = plt.subplots(figsize=(6, 3))",
        "ax.plot(xs, [math.sin(x) for x in xs], label='sin')",
        "ax.plot(xs, [math.cos(x) * 0.8 for x in xs], label='0.8 cos')",
        "ax.legend(); ax.set_title('signal')",
        "print('plotted', len(xs), 'points')"
      ].join("\n")
    )
    expect(result.isError).toBe(false)
    const n = await nextCell(before)
    const figure = page.locator(`#cell-${n} img.figure`)
    await figure.waitFor({ timeout: 30_000 })
    await expect.poll(() => figure.evaluate((img: any) => (img.complete ? img.naturalWidth : 0)), { timeout: 30_000 }).toBeGreaterThan(100)
    expect(await figure.getAttribute("src")).toMatch(/^data:image\/png;base64,/)
  })

  it("interrupts a time.sleep(60) cell from the page; the agent hears a person did it and the kernel keeps its variables", async () => {
    const table = await cellCount()
    expect((await call("kept = 41\nimport pandas as pd\nframe = pd.DataFrame({'city': ['Lisbon', 'Oslo', 'Quito', 'Nairobi'], 'temp_c': [21.5, 4.0, 13.2, 19.8], 'rain_mm': [2.1, 11.4, 7.9, 0.6]})\nframe")).isError).toBe(false)
    const tableCell = await nextCell(table)
    await expect.poll(() => page.frameLocator(`#cell-${tableCell} iframe.html`).locator("table").textContent(), { timeout: 30_000 }).toContain("Nairobi")
    const before = await cellCount()
    const running = call("import time\nprint('sleeping for a minute', flush=True)\ntime.sleep(60)", 120)
    const n = await nextCell(before)
    await page.waitForFunction((n) => document.querySelector(`#cell-${n} .outputs`)?.textContent?.includes("sleeping") === true, n, { timeout: 30_000 })
    await page.setViewportSize({ width: 1280, height: 1240 })
    await page.locator("#cells .cell").nth(1).evaluate((cell: any) => window.scrollTo(0, cell.offsetTop - 66))
    await page.screenshot({ path: path.join(shots, "viewer.png") })
    await page.setViewportSize({ width: 1280, height: 860 })
    const list = await context.newPage()
    try {
      await list.setViewportSize({ width: 1280, height: 300 })
      await list.goto(`${origin}/viewer/`)
      await expect.poll(() => list.locator("table.sessions").textContent(), { timeout: 30_000 }).toContain(`running #${n}`)
      // The kernel (pandas loaded) holds tens of megabytes: measured from its own process tree.
      const memory = Number(/(\d+) MiB/.exec((await list.locator("table.sessions tbody tr").first().textContent())!)?.[1])
      expect(memory).toBeGreaterThan(20)
      await list.screenshot({ path: path.join(shots, "viewer-sessions.png") })
    } finally {
      await list.close()
    }
    const started = Date.now()
    await page.locator(`#cell-${n} form.interrupt button`).click()
    const result = await running
    expect(Date.now() - started).toBeLessThan(30_000)
    expect(result.isError).toBe(true)
    expect(textOf(result)).toContain(PERSON_INTERRUPTED_NOTICE)
    await expect.poll(() => page.locator(`#cell-${n}`).getAttribute("data-state"), { timeout: 30_000 }).toBe("interrupted")
    expect(textOf(await call("kept + 1"))).toBe("42")
  })

  it("runs neither the script nor the onerror handler of an HTML output", async () => {
    const before = await cellCount()
    const target = `http://127.0.0.1:${probe.port}`
    const hostile = [
      `<p id="hostile">hostile html</p>`,
      `<img src="data:image/png;base64,broken" onerror="fetch('${target}/onerror'); top.veyyonMarker = 'onerror'; parent.document.title = 'owned'">`,
      `<script>fetch('${target}/script'); top.veyyonMarker = 'script'; parent.document.title = 'owned'</script>`
    ].join("")
    const result = await call(`class Hostile:\n    def _repr_html_(self):\n        return ${JSON.stringify(hostile)}\nHostile()`)
    expect(result.isError).toBe(false)
    const n = await nextCell(before)
    const frame = page.locator(`#cell-${n} iframe.html`)
    await frame.waitFor({ timeout: 30_000 })
    expect(await frame.getAttribute("sandbox")).toBe("")
    await expect.poll(() => page.frameLocator(`#cell-${n} iframe.html`).locator("#hostile").textContent(), { timeout: 30_000 }).toBe("hostile html")
    // The handlers would have run by now; give a loaded machine a generous moment anyway.
    await page.waitForTimeout(2000)
    expect(await page.evaluate(() => window.veyyonMarker)).toBeUndefined()
    expect(await page.title()).not.toBe("owned")
    expect(probe.seen).toEqual([])
  })

  it("looks right at a phone's width", async () => {
    const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true })
    try {
      const small = await phone.newPage()
      await small.goto(link)
      await small.waitForURL(`${origin}/viewer/`)
      await small.goto(sessionUrl)
      await small.locator("img.figure").first().waitFor({ timeout: 30_000 })
      await small.locator("#cells .cell").nth(1).evaluate((cell: any) => window.scrollTo(0, cell.offsetTop - 64))
      expect(await small.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
      await small.screenshot({ path: path.join(shots, "viewer-phone.png") })
    } finally {
      await phone.close()
    }
  })

  it("answers 401 to every page and event stream without the cookie", async () => {
    const id = new URL(sessionUrl).pathname.split("/").at(-1)!
    for (const suffix of ["/viewer/", "/viewer/list", `/viewer/s/${id}`, `/viewer/s/${id}/events`, `/viewer/s/${id}/notebook.ipynb`]) {
      const response = await fetch(`${origin}${suffix}`)
      expect(response.status, suffix).toBe(401)
      expect(await response.text()).toContain("/viewer/link")
    }
    const fresh = await browser.newContext()
    try {
      const stranger = await fresh.newPage()
      const response = await stranger.goto(sessionUrl)
      expect(response!.status()).toBe(401)
      expect(await stranger.locator("main").textContent()).toContain("viewer link")
    } finally {
      await fresh.close()
    }
  })

  it("refuses the interrupt action from another origin, another localhost port and a page served there included", async () => {
    const id = new URL(sessionUrl).pathname.split("/").at(-1)!
    const cookie = (await context.cookies(`${origin}/viewer/`)).map((entry) => `${entry.name}=${entry.value}`).join("; ")
    const before = await cellCount()
    const running = call("import time\nprint('long', flush=True)\ntime.sleep(20)\nprint('finished')", 60)
    const n = await nextCell(before)
    const action = `${origin}/viewer/s/${id}/interrupt/${n}`
    const port = new URL(origin).port
    for (const foreign of [`http://127.0.0.1:${probe.port}`, `http://localhost:${port}`, "http://evil.example", "null"]) {
      const response = await fetch(action, { method: "POST", headers: { cookie, origin: foreign }, redirect: "manual" })
      expect(response.status, foreign).toBe(403)
    }
    expect((await fetch(action, { method: "POST", headers: { cookie }, redirect: "manual" })).status).toBe(403)
    // A page on another localhost port, in the signed-in browser, posts the form: the cookie goes along (same site), the Origin gives it away.
    const attacker = await context.newPage()
    try {
      await attacker.goto(`http://127.0.0.1:${probe.port}/`)
      const status = await attacker.evaluate(
        (url) => fetch(url, { method: "POST", credentials: "include", mode: "no-cors" }).then((response) => response.type, () => "failed"),
        action
      )
      expect(status).toBe("opaque")
    } finally {
      await attacker.close()
    }
    // Every refusal came while the cell ran, and none stopped it.
    expect(await page.locator(`#cell-${n}`).getAttribute("data-state")).toBe("running")
    const result = await running
    expect(result.isError).toBe(false)
    expect(textOf(result)).toContain("finished")
  })
})
