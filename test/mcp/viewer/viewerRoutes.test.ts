/**
 * The viewer's routes in process, over a session watch fed as the MCP server feeds it:
 * nothing without the cookie (401), a link refused once expired, the cookie's
 * attributes, a fresh link only with the bearer token, the interrupt action only from the
 * door's exact origin, hostile output inert in the HTML, a strict CSP on every answer,
 * another token's sessions hidden, and a running cell's output on the event stream.
 */
import { Effect } from "effect"
import { HttpEffect } from "effect/http"
import { describe, expect, it } from "vitest"
import { KernelOutput } from "../../../src/kernel/KernelOutput.ts"
import type { EvalResult } from "../../../src/services/tool/EvalTool.ts"
import { makeSessionWatch } from "../../../src/mcp/viewer/SessionWatch.ts"
import { SOLE_TOKEN } from "../../../src/mcp/viewer/ViewerAccess.ts"
import { LINK_LIFETIME_MS, makeViewerAuth } from "../../../src/mcp/viewer/ViewerAuth.ts"
import { makeViewer, VIEWER_COOKIE, VIEWER_CSP, viewerOrigin } from "../../../src/mcp/viewer/ViewerRoutes.ts"

import { evalResult } from "../../support/evalResult.ts"

const ORIGIN = "http://127.0.0.1:4555"
const TOKEN = "secret-bearer-token"

const result = (outputs: EvalResult["outputs"], extra: Partial<EvalResult> = {}): EvalResult => evalResult({ outputs, durationMs: 5, ...extra })

const setUp = (ownerOf?: (id: string) => string, memoryOf?: (id: string) => number | undefined) => {
  let now = 1_000_000
  const clock = { now: () => now, advance: (ms: number) => void (now += ms) }
  const watch = makeSessionWatch({ now: clock.now, ...(ownerOf === undefined ? {} : { ownerOf }) })
  const auth = makeViewerAuth({ now: clock.now })
  const app = makeViewer({
    origin: ORIGIN,
    watch,
    auth,
    authenticate: (header) => (header === `Bearer ${TOKEN}` ? SOLE_TOKEN : undefined),
    notebook: (id) => Effect.succeed({ nbformat: 4, cells: [], id }),
    ...(memoryOf === undefined ? {} : { memoryOf: (id: string) => Effect.sync(() => memoryOf(id)) }),
    now: clock.now
  })
  const handler = HttpEffect.toWebHandler(app)
  const request = (path: string, init: RequestInit = {}) => handler(new Request(`${ORIGIN}${path}`, init))
  const signIn = async () => {
    const response = await request(`/viewer/?code=${auth.mint(SOLE_TOKEN).code}`)
    expect(response.status).toBe(200)
    const cookie = response.headers.get("set-cookie")!
    return cookie.split(";")[0]!
  }
  return { clock, watch, auth, request, signIn }
}

const SESSION = "mcp-0123456789abcdef0123456789abcdef"

describe("viewer routes", () => {
  it("answers 401 with how to get in to every page, fragment, stream and export without a viewer session", async () => {
    const { watch, request } = setUp()
    watch.observer.opened(SESSION, "agent")
    for (const path of ["/viewer/", "/viewer/list", `/viewer/s/${SESSION}`, `/viewer/s/${SESSION}/events`, `/viewer/s/${SESSION}/notebook.ipynb`]) {
      for (const cookie of [undefined, `${VIEWER_COOKIE}=forged`]) {
        const response = await request(path, cookie === undefined ? {} : { headers: { cookie } })
        expect(response.status, path).toBe(401)
        expect(await response.text()).toContain("/viewer/link")
      }
    }
    const post = await request(`/viewer/s/${SESSION}/interrupt/1`, { method: "POST", headers: { origin: ORIGIN } })
    expect(post.status).toBe(401)
  })

  it("a link sets an HttpOnly, SameSite=Strict cookie on the viewer's path holding a fresh random session, and is refused once expired", async () => {
    const { clock, auth, request } = setUp()
    const { code } = auth.mint(SOLE_TOKEN)
    const response = await request(`/viewer/?code=${code}`)
    expect(response.status).toBe(200)
    const cookie = response.headers.get("set-cookie")!
    expect(cookie).toMatch(new RegExp(`^${VIEWER_COOKIE}=[A-Za-z0-9_-]{43}; `))
    expect(cookie).toContain("HttpOnly")
    expect(cookie).toContain("SameSite=Strict")
    expect(cookie).toContain("Path=/viewer")
    expect(cookie).not.toContain(code)
    expect(cookie).not.toContain(TOKEN)
    expect(await response.text()).toContain(`content="0;url=/viewer/"`)
    const page = await request("/viewer/", { headers: { cookie: cookie.split(";")[0]! } })
    expect(page.status).toBe(200)

    clock.advance(LINK_LIFETIME_MS)
    const expired = await request(`/viewer/?code=${code}`)
    expect(expired.status).toBe(401)
    expect(expired.headers.get("set-cookie")).toBeNull()
    expect(await expired.text()).toMatch(/expired/)
    expect((await request("/viewer/?code=not-a-code")).status).toBe(401)
  })

  it("mints a fresh link only for the bearer token", async () => {
    const { request } = setUp()
    expect((await request("/viewer/link", { method: "POST" })).status).toBe(401)
    expect((await request("/viewer/link", { method: "POST", headers: { authorization: "Bearer wrong" } })).status).toBe(401)
    const minted = await request("/viewer/link", { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } })
    expect(minted.status).toBe(200)
    const { url } = (await minted.json()) as { url: string }
    expect(url).toMatch(new RegExp(`^${ORIGIN}/viewer/\\?code=[A-Za-z0-9_-]{43}$`))
    expect((await request(url.slice(ORIGIN.length))).status).toBe(200)
  })

  it("interrupts a running cell only for a request from the door's exact origin", async () => {
    const { watch, request, signIn } = setUp()
    const cookie = await signIn()
    watch.observer.opened(SESSION, "agent")
    const cell = watch.observer.cell(SESSION, { language: "py", code: "import time\ntime.sleep(60)" })
    const interrupt = (origin?: string) =>
      request(`/viewer/s/${SESSION}/interrupt/1`, { method: "POST", headers: { cookie, ...(origin === undefined ? {} : { origin }) } })
    for (const foreign of [undefined, "http://127.0.0.1:4556", "http://localhost:4555", "https://127.0.0.1:4555", "null", "http://evil.example"]) {
      const refused = await interrupt(foreign)
      expect(refused.status, String(foreign)).toBe(403)
    }
    expect(cell.signal.aborted).toBe(false)
    const done = await interrupt(ORIGIN)
    expect(done.status).toBe(303)
    expect(done.headers.get("location")).toBe(`/viewer/s/${SESSION}`)
    expect(cell.signal.aborted).toBe(true)
  })

  it("renders hostile output inert: text escaped, HTML in a sandboxed srcdoc frame, SVG as an image, with a strict CSP", async () => {
    const { watch, request, signIn } = setUp()
    const cookie = await signIn()
    watch.observer.opened(SESSION, "<b>client</b>")
    const cell = watch.observer.cell(SESSION, { language: "py", code: "</pre><script>alert('code')</script>", title: "<i>t</i>" })
    cell.finished({
      result: result([
        KernelOutput.Stdout({ text: "<script>alert('out')</script>\n" }),
        KernelOutput.Display({ bundle: { "text/html": "<img src=x onerror=\"fetch('/x')\"><script>top.marker=1</script>", "text/plain": "html" } }),
        KernelOutput.Display({ bundle: { "image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>" } }),
        KernelOutput.Display({ bundle: { "image/png": "not base64 \"><script>alert(2)</script>", "text/plain": "fake" } }),
        KernelOutput.Error({ ename: "ValueError", evalue: "<bad>", traceback: ["\u001b[31mValueError\u001b[0m: <bad>"] })
      ], { status: "error" })
    })
    const response = await request(`/viewer/s/${SESSION}`, { headers: { cookie } })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-security-policy")).toBe(VIEWER_CSP)
    expect(VIEWER_CSP).toContain("script-src 'self'")
    expect(VIEWER_CSP).toContain("frame-ancestors 'none'")
    const html = await response.text()
    const scripts = html.match(/<script\b[^>]*>/g) ?? []
    expect(scripts).toEqual([`<script src="/viewer/app.js" defer>`])
    expect(html).not.toMatch(/<(b|i|img src=x|svg)\b/)
    expect(html).toContain("&lt;script&gt;alert(&apos;out&apos;)&lt;/script&gt;")
    const frame = /<iframe[^>]*>/.exec(html)![0]
    expect(frame).toContain(`sandbox=""`)
    expect(frame).not.toMatch(/allow-/)
    expect(frame).toContain(`srcdoc="&lt;!doctype html&gt;`)
    expect(frame).toContain("&lt;img src=x onerror=&quot;fetch(&apos;/x&apos;)&quot;&gt;&lt;script&gt;")
    expect(html).toMatch(/<img class="figure" alt="SVG figure" src="data:image\/svg\+xml;base64,[A-Za-z0-9+/=]+">/)
    expect(html).not.toContain("image/png")
    expect(html).toContain("ValueError: &lt;bad&gt;")
    expect(html).not.toContain("\u001b")
  })

  it("hides another token's sessions", async () => {
    const { watch, request, auth } = setUp((id) => (id === SESSION ? "alice" : "bob"))
    const redeem = async (owner: string) =>
      (await request(`/viewer/?code=${auth.mint(owner).code}`)).headers.get("set-cookie")!.split(";")[0]!
    watch.observer.opened(SESSION, "alice-agent")
    watch.observer.opened("mcp-other", "bob-agent")
    const alice = await redeem("alice")
    const list = await (await request("/viewer/list", { headers: { cookie: alice } })).text()
    expect(list).toContain("alice-agent")
    expect(list).not.toContain("bob-agent")
    expect((await request("/viewer/s/mcp-other", { headers: { cookie: alice } })).status).toBe(404)
    expect((await request("/viewer/s/mcp-other/events", { headers: { cookie: alice } })).status).toBe(404)
    expect((await request("/viewer/s/mcp-other/notebook.ipynb", { headers: { cookie: alice } })).status).toBe(404)
  })

  it("streams a running cell's output as it comes, and says when the session ends", async () => {
    const { watch, request, signIn } = setUp()
    const cookie = await signIn()
    watch.observer.opened(SESSION, "agent")
    const cell = watch.observer.cell(SESSION, { language: "py", code: "print('a')" })
    cell.onEvent(KernelOutput.Stdout({ text: "first <line>\n" }))
    const response = await request(`/viewer/s/${SESSION}/events`, { headers: { cookie } })
    expect(response.headers.get("content-type")).toContain("text/event-stream")
    const reader = response.body!.getReader()
    let seen = ""
    const until = async (text: string) => {
      while (!seen.includes(text)) {
        const chunk = await reader.read()
        if (chunk.done) throw new Error(`the stream ended before ${text}: ${seen}`)
        seen += new TextDecoder().decode(chunk.value)
      }
    }
    await until("event: cell")
    expect(seen).toContain("first &lt;line&gt;")
    cell.onEvent(KernelOutput.Stdout({ text: "second\n" }))
    await until(`"text":"second\\n"`)
    cell.finished({ result: result([KernelOutput.Stdout({ text: "first <line>\nsecond\n" })]) })
    await until(`data-state=\\"ok\\"`)
    watch.observer.ended(SESSION)
    await until("event: ended")
    expect((await reader.read()).done).toBe(true)
  })

  it("shows each session's kernel memory where it is measured, a dash where not", async () => {
    const { watch, request, signIn } = setUp(undefined, (id) => (id === SESSION ? 143 * 1024 * 1024 : undefined))
    const cookie = await signIn()
    watch.observer.opened(SESSION, "measured-agent")
    watch.observer.opened("mcp-unmeasured", "other-agent")
    const list = await (await request("/viewer/list", { headers: { cookie } })).text()
    expect(list).toContain("<th>Kernel memory</th>")
    expect(list).toMatch(/measured-agent.*<td>143 MiB<\/td>/)
    expect(list).toMatch(/other-agent.*<td><span class="muted">–<\/span><\/td>/)
    expect(await (await request(`/viewer/s/${SESSION}`, { headers: { cookie } })).text()).toContain("kernel memory 143 MiB")
    expect(await (await request("/viewer/s/mcp-unmeasured", { headers: { cookie } })).text()).not.toContain("kernel memory")
  })

  it("serves a session's notebook as a download", async () => {
    const { watch, request, signIn } = setUp()
    const cookie = await signIn()
    watch.observer.opened(SESSION, "agent")
    const response = await request(`/viewer/s/${SESSION}/notebook.ipynb`, { headers: { cookie } })
    expect(response.status).toBe(200)
    expect(response.headers.get("content-disposition")).toBe(`attachment; filename="${SESSION}.ipynb"`)
    expect(await response.json()).toMatchObject({ nbformat: 4, id: SESSION })
  })

  it("browses a wildcard host as loopback and brackets IPv6", () => {
    expect(viewerOrigin("127.0.0.1", 80)).toBe("http://127.0.0.1:80")
    expect(viewerOrigin("0.0.0.0", 7523)).toBe("http://127.0.0.1:7523")
    expect(viewerOrigin("::", 7523)).toBe("http://[::1]:7523")
    expect(viewerOrigin("::1", 7523)).toBe("http://[::1]:7523")
  })
})
